"""`fleet dashboard` in a real browser (headless Chromium), on the demo's fleet, during the
demo's stories.

The demo's sandbox (its layout: four members, member-4 on koord-scheduler) and controller come
up once for this module; `fleet dashboard` runs as a user runs it, with the sandbox's kubeconfig;
Chromium opens its page and the tests wait for what the page shows while the stories' steps
happen. The page is never reloaded between a step and what it should show: what changes on it
arrives through the dashboard's event stream.

FLEET_DASHBOARD_SCREENSHOTS=<folder> also saves a PNG of each view there (docs/img/ holds the
ones in the docs).
"""

from __future__ import annotations

import contextlib
import os
import re
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from fleet.api.access import viewer_nodes_role
from fleet.demo import seeds
from fleet.demo.layout import bring_up
from fleet.demo.runner import Demo
from fleet.demo.stories import held_gang, queue, reservation
from fleet.sandbox import Sandbox
from fleet.testing.browser import Browser, Chromium, find_chromium
from fleet.testing.kube import wait_until

pytestmark = [pytest.mark.sandbox, pytest.mark.timeout(1800)]

MEMBERS = ("member-1", "member-2", "member-3", "member-4")
#: The demo's member on koord-scheduler (Reservations).
KOORDINATOR = "member-4"
#: The member this module kills; the others must go on showing.
KILLED = "member-3"
SHOTS = os.environ.get("FLEET_DASHBOARD_SCREENSHOTS")


@pytest.fixture(scope="module")
def chromium() -> Chromium:
    found = find_chromium()
    if isinstance(found, str):
        pytest.skip(found)
    return found


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Demo]:
    """The demo's fleet: its sandbox, fleet's CRDs, the members joined, the controller."""
    state = tmp_path_factory.mktemp("dashboard-sandbox")
    log = (state.parent / "dashboard-demo.log").open("a")
    sandbox = Sandbox(state)
    fleet_demo = Demo(sandbox, check=True, out=lambda line: print(line, file=log, flush=True))
    try:
        bring_up(fleet_demo, die_with_parent=True)
        yield fleet_demo
    finally:
        fleet_demo.close()
        sandbox.down(progress=lambda _m: None)
        log.close()


@pytest.fixture(scope="module")
def dashboard(demo: Demo, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """`fleet dashboard --port 0` with the sandbox's kubeconfig; its URL."""
    with _dashboard_process(demo, tmp_path_factory.mktemp("dashboard") / "dashboard.log") as url:
        yield url


@contextlib.contextmanager
def _dashboard_process(demo: Demo, out: Path, *extra: str) -> Iterator[str]:
    """A `fleet dashboard --port 0` process (its output in `out`, `extra` its further
    arguments) while inside; its URL."""
    with out.open("w") as log:
        process = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "fleet",
                "dashboard",
                "--kubeconfig",
                str(demo.kubeconfig),
                "--context",
                "fleet",
                "--port",
                "0",
                *extra,
            ],
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            env={**os.environ, "PYTHONUNBUFFERED": "1"},
        )
    try:
        url = wait_until(
            lambda: _url(out, process), timeout=60, what=f"the dashboard's URL in {out}"
        )
        yield url
    finally:
        process.terminate()
        try:
            process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def _url(log: Path, process: subprocess.Popen[bytes]) -> str | None:
    if process.poll() is not None:
        raise AssertionError(f"fleet dashboard exited {process.returncode}:\n{log.read_text()}")
    found = re.search(r"(http://127\.0\.0\.1:\d+/)", log.read_text())
    return found.group(1) if found else None


@pytest.fixture(scope="module")
def browser(chromium: Chromium, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Browser]:
    where = tmp_path_factory.mktemp("chromium")
    with Browser(chromium, where / "profile", where / "chromedriver.log") as b:
        yield b


def _shot(browser: Browser, name: str) -> None:
    if SHOTS:
        browser.screenshot(Path(SHOTS) / f"dashboard-{name}.png")
        browser.run("window.scrollTo(0, 0)")


def _show(browser: Browser, url: str, route: str) -> None:
    """Open a view and wait until the page has drawn it without an error."""
    browser.open(f"{url}#/{route}")
    view = "job" if route.count("/") == 2 else route
    browser.wait(
        "return document.body.dataset.view === arguments[0] && document.body.dataset.version"
        " && document.getElementById('error').hidden",
        f"the {route} view drawn",
        view,
    )


#: The job page's phase badge, member and per-member reasons.
JOB_PAGE = """
const phase = document.querySelector('h2 .badge')?.textContent;
const reasons = [...document.querySelectorAll('#pending tr[data-cluster]')]
  .map((r) => [r.dataset.cluster, r.children[1].textContent]);
const pods = [...document.querySelectorAll('#pods tr[data-pod]')]
  .map((r) => [r.children[0].textContent, r.children[3].textContent]);
return {phase, reasons, pods};
"""


def test_the_held_gang_waits_with_a_reason_per_member_then_runs_where_capacity_arrived(
    demo: Demo, dashboard: str, browser: Browser
) -> None:
    name = held_gang.NAME
    demo.fleet.apply(seeds.TFJOB_POLICY)
    demo.fleet.create(seeds.tfjob())
    try:
        _show(browser, dashboard, "jobs")
        browser.wait(
            "return document.querySelector(`tr.job[data-job='default/${arguments[0]}']`)"
            "?.dataset.phase === 'Pending'",
            f"{name} listed Pending on the Jobs view",
            name,
        )
        _show(browser, dashboard, f"jobs/default/{name}")
        page = browser.wait(
            f"const p = (() => {{{JOB_PAGE}}})();"
            "return p.phase === 'Pending' && p.reasons.length === 4 ? p : null",
            f"{name}'s page: Pending, a reason per member",
        )
        assert sorted(cluster for cluster, _ in page["reasons"]) == list(MEMBERS)
        assert {code for _, code in page["reasons"]} == {"Insufficient"}
        assert page["pods"] == []
        _shot(browser, "job")

        # Capacity arrives in member-2; the open page turns Running there by itself.
        demo.sandbox.add_nodes(held_gang.GROWS, held_gang.NEW_NODES)
        page = browser.wait(
            f"const p = (() => {{{JOB_PAGE}}})();"
            "return p.phase === 'Running' && p.pods.length === 5"
            " && p.pods.every(([m, s]) => s === 'Running') ? p : null",
            f"{name}'s page: Running, its five pods Running",
        )
        assert {member for member, _ in page["pods"]} == {held_gang.GROWS}
        member = browser.run(
            "return [...document.querySelectorAll('dl.kv dt')]"
            ".find((d) => d.textContent === 'member').nextSibling.textContent"
        )
        assert member == held_gang.GROWS
        # Its log, as `kubectl amc logs` reads it.
        browser.run("document.getElementById('load-log').click()")
        text = browser.wait(
            "const t = document.getElementById('log').textContent;"
            "return t && !t.startsWith('reading') && !t.startsWith('(press') ? t : null",
            f"{name}'s log read",
        )
        assert not text.startswith("error:"), text
        _show(browser, dashboard, "fleet")
        _shot(browser, "fleet")
    finally:
        held_gang.reset(demo)


def test_behind_a_proxy_a_job_is_served_only_to_a_user_the_fleet_lets_get_it(
    demo: Demo, tmp_path: Path
) -> None:
    """`--auth-headers`: the request names its user as an authenticating proxy would; the
    dashboard asks the fleet (SubjectAccessReview) whether that user may get the job. (Before
    the quota story, whose tree would hold the job in its queue.)"""
    import httpx

    name = held_gang.NAME
    rbac = "rbac.authorization.k8s.io/v1"
    role = {
        "apiVersion": rbac,
        "kind": "Role",
        "metadata": {"name": "tfjob-reader", "namespace": "default"},
        "rules": [{"apiGroups": ["kubeflow.org"], "resources": ["tfjobs"], "verbs": ["get"]}],
    }
    binding = {
        "apiVersion": rbac,
        "kind": "RoleBinding",
        "metadata": {"name": "tfjob-reader", "namespace": "default"},
        "roleRef": {
            "apiGroup": "rbac.authorization.k8s.io",
            "kind": "Role",
            "name": "tfjob-reader",
        },
        "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": "alice"}],
    }
    demo.fleet.apply(role)
    demo.fleet.apply(binding)
    demo.fleet.apply(seeds.TFJOB_POLICY)
    demo.fleet.create(seeds.tfjob())
    demo.sandbox.add_nodes(held_gang.GROWS, held_gang.NEW_NODES)
    try:
        wait_until(
            lambda: demo.running_in(held_gang.GROWS, name, 5),
            timeout=180,
            what=f"{name} running",
            why=lambda: demo.situation(held_gang.TFJOB, name),
        )
        with _dashboard_process(demo, tmp_path / "dashboard.log", "--auth-headers") as url:
            page, log = f"{url}api/jobs/default/{name}", f"{url}api/jobs/default/{name}/log"
            with httpx.Client(timeout=60) as http:
                assert http.get(page).status_code == 401  # no user: not through the proxy
                bob = {"X-Remote-User": "bob"}
                assert http.get(page, headers=bob).status_code == 403
                refused = http.get(log, params={"kind": "TFJob"}, headers=bob)
                assert refused.status_code == 403 and refused.json()["log"] == ""
                assert name not in {
                    j["name"] for j in http.get(f"{url}api/jobs", headers=bob).json()["jobs"]
                }
                alice = {"X-Remote-User": "alice", "X-Remote-Group": "system:authenticated"}
                shown = wait_until(
                    lambda: (
                        (r := http.get(page, headers=alice)).status_code == 200
                        and r.json().get("pods")
                        and r.json()
                    ),
                    timeout=60,
                    what=f"{name}'s page for alice, with its pods",
                )
                assert {p["member"] for p in shown["pods"]} == {held_gang.GROWS}
                answer = http.get(log, params={"kind": "TFJob"}, headers=alice)
                assert answer.status_code == 200, answer.text
                assert answer.json()["error"] == "" and answer.json()["log"]
    finally:
        held_gang.reset(demo)
        demo.fleet.delete(rbac, "RoleBinding", "tfjob-reader", "default")
        demo.fleet.delete(rbac, "Role", "tfjob-reader", "default")


def test_the_quota_view_shows_the_second_queued_job_waiting(
    demo: Demo, dashboard: str, browser: Browser
) -> None:
    demo.fleet.apply(seeds.QUOTA_TREE)
    demo.fleet.apply(seeds.QUEUED_POLICY)
    try:
        demo.fleet.apply(queue.queued_job(queue.FIRST))
        wait_until(lambda: queue._phase(demo, queue.FIRST) == "Running", what="first Running")
        demo.fleet.apply(queue.queued_job(queue.SECOND))
        _show(browser, dashboard, "quotas")
        units = browser.wait(
            "const u = [...document.querySelectorAll(\"[data-path='root/child-2'] li.unit\")]"
            "  .map((li) => [li.dataset.unit, li.dataset.phase,"
            "    li.querySelector('.message')?.textContent || '']);"
            "return u.length === 2 && u[1][1] === 'Enqueued' && u[1][2] ? u : null",
            "root/child-2's queue: the first job holding quota, the second waiting",
        )
        first, second = units
        assert first[0] == f"default/pytorchjob-{queue.FIRST}" and first[1] == "Running"
        assert second[0] == f"default/pytorchjob-{queue.SECOND}"
        assert "1 of max 1 jobs" in second[2], second[2]
        _shot(browser, "quotas")
        _show(browser, dashboard, "jobs")
        browser.wait(
            "return document.querySelector(`tr.job[data-job='default/${arguments[0]}']`)"
            "?.dataset.phase === 'Queued'",
            f"{queue.SECOND} listed Queued on the Jobs view",
            queue.SECOND,
        )
        _shot(browser, "jobs")
        _show(browser, dashboard, "quotas")

        # The first finishes; the open page shows the second taking its turn.
        first_member = demo.target("PyTorchJob", queue.FIRST)
        assert first_member is not None
        demo.cluster(first_member).mark_job(
            queue.PYTORCHJOB, queue.FIRST, queue.NAMESPACE, "Succeeded"
        )
        browser.wait(
            "const li = document.querySelector("
            "  `li.unit[data-unit='default/pytorchjob-${arguments[0]}']`);"
            "return li && ['Dequeued', 'Running'].includes(li.dataset.phase)",
            f"{queue.SECOND} dequeued on the Quotas view",
            queue.SECOND,
        )
    finally:
        queue.reset(demo)


def test_the_reservations_of_a_gang_on_the_koordinator_member(
    demo: Demo, dashboard: str, browser: Browser
) -> None:
    _show(browser, dashboard, "reservations")
    failure: list[BaseException] = []

    def run() -> None:
        try:
            reservation.run(demo)
        except BaseException as e:
            failure.append(e)

    story = threading.Thread(target=run, daemon=True)
    story.start()
    try:
        # fleet makes one Reservation per pod, one after the other, and the watch shows each
        # as it comes: wait for all of them, not the first.
        rows = browser.wait(
            "const rows = [...document.querySelectorAll("
            "  \"[data-member='member-4'] tr[data-reservation]\")]"
            "  .map((r) => [r.dataset.reservation, r.children[1].textContent]);"
            f"return rows.length === {reservation.PODS} ? rows : null",
            "member-4's Reservations for the gang on the Reservations view",
        )
        _shot(browser, "reservations")
        assert len(rows) == reservation.PODS
        assert all(name.startswith("fleet-") for name, _ in rows)
        # Listed and watched through fleet's member identity: no refusal shown.
        assert (
            browser.run(
                "return document.querySelector(\"[data-member='member-4'] [data-watch-problem]\")"
                "  ?.textContent ?? null"
            )
            is None
        )
        story.join(timeout=600)
        assert not failure, failure
    finally:
        story.join(timeout=600)
        reservation.reset(demo)


def test_a_refused_reservation_watch_is_shown_on_the_page(
    demo: Demo, browser: Browser, tmp_path: Path
) -> None:
    """The viewer's role narrowed to `list` but no `watch` on Reservations (as fleet's member
    role once was): a dashboard started then says on member-4's Reservations that the watch is
    refused (403), instead of an empty list, and the member stays reachable."""
    member = demo.cluster(KOORDINATOR)
    rbac = ("rbac.authorization.k8s.io/v1", "ClusterRole", viewer_nodes_role())
    role = member.get(*rbac)
    assert role is not None, f"no ClusterRole {rbac[2]} in {KOORDINATOR}"
    rules = role["rules"]
    narrowed = [
        {**r, "verbs": [v for v in r["verbs"] if v != "watch"]}
        if "reservations" in r["resources"]
        else r
        for r in rules
    ]
    assert narrowed != rules, "the viewer's role grants no watch on reservations"
    member.patch(*rbac, {"rules": narrowed})
    try:
        with _dashboard_process(demo, tmp_path / "refused-dashboard.log") as url:
            _show(browser, url, "reservations")
            why = browser.wait(
                "return document.querySelector("
                "  \"[data-member='member-4'] [data-watch-problem='Reservation']\")?.textContent",
                "member-4's refused Reservation watch on the Reservations view",
            )
            assert why.startswith("Reservation refused: ") and "403" in why, why
            _show(browser, url, "fleet")
            card = browser.wait(
                "const m = document.querySelector(\"[data-member='member-4']\");"
                "return m && m.querySelector(\"[data-watch-problem='Reservation']\")"
                "  ? m.dataset.status : null",
                "member-4's card on the Fleet view saying the watch is refused",
            )
            assert card == "Ready"
    finally:
        member.patch(*rbac, {"rules": rules})


def test_a_member_killed_is_shown_not_ready_and_the_rest_works(
    demo: Demo, dashboard: str, browser: Browser
) -> None:
    _show(browser, dashboard, "fleet")
    status = (
        "return Object.fromEntries([...document.querySelectorAll('.member')]"
        "  .map((m) => [m.dataset.member, m.dataset.status]))"
    )
    browser.wait(
        f"const s = (() => {{{status}}})(); return Object.values(s).every((x) => x === 'Ready')"
        " && Object.keys(s).length === 4",
        "every member Ready on the Fleet view",
    )
    demo.sandbox.stop_cluster(KILLED, abrupt=True)
    try:
        shown = browser.wait(
            f"const s = (() => {{{status}}})();"
            "return ['NotReady', 'Unreachable'].includes(s[arguments[0]]) ? s : null",
            f"{KILLED} shown not ready",
            KILLED,
        )
        assert {m: s for m, s in shown.items() if m != KILLED} == {
            m: "Ready" for m in MEMBERS if m != KILLED
        }
        assert browser.run("return document.getElementById('error').hidden")
        _shot(browser, "member-down")
        for route in ("jobs", "quotas", "reservations"):
            _show(browser, dashboard, route)
    finally:
        with contextlib.suppress(Exception):
            demo.sandbox.start_cluster(KILLED)
