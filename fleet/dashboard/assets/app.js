// fleet dashboard: one page, four views, refreshed when the server says something changed.
// Plain DOM, no framework, no build step; every text goes in through textContent.
"use strict";

const view = document.getElementById("view");
const errorBox = document.getElementById("error");
const live = document.getElementById("live");

function el(tag, attrs, ...children) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs || {})) {
    if (value === null || value === undefined || value === false) continue;
    if (key === "class") node.className = value;
    else if (key === "text") node.textContent = value;
    else if (key.startsWith("data-")) node.setAttribute(key, value);
    else if (key === "style") node.setAttribute("style", value);
    else node[key] = value;
  }
  for (const child of children.flat()) {
    if (child === null || child === undefined || child === false) continue;
    node.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return node;
}

const badge = (word, extra) => el("span", { class: `badge ${word || ""} ${extra || ""}`, text: word || "-" });
const dash = (v) => (v === null || v === undefined || v === "" ? "-" : String(v));

function table(headers, rows) {
  return el("table", {},
    el("thead", {}, el("tr", {}, headers.map((h) => el("th", { text: h })))),
    el("tbody", {}, rows));
}

function kv(pairs) {
  return el("dl", { class: "kv" }, pairs.flatMap(([k, v]) => [el("dt", { text: k }), el("dd", {}, v)]));
}

// Colour of a node by its free GPUs: red (none free) through amber to green (all free).
function nodeColour(free, total) {
  const share = total > 0 ? free / total : 0;
  return `hsl(${Math.round(share * 130)}, 62%, ${free === 0 ? 42 : 40}%)`;
}

// -- views ------------------------------------------------------------------------------------

function fleetView(data) {
  const s = data.summary;
  const problems = Object.entries(data.problems || {}).map(([kind, why]) =>
    el("div", { class: "err-text", text: `${kind}: ${why}` }));
  const cards = data.members.map((m) => {
    const g = m.gpus;
    // Unreachable: its nodes as last seen, dimmed.
    const grid = el("div", { class: `grid${m.reachable === false ? " stale" : ""}`, "data-member-grid": m.name,
                             title: m.reachable === false ? "as last seen: the member does not answer" : null },
      m.nodes.map((n) => n.error
        ? el("div", { class: "node err", title: `${n.name}: ${n.error}`, text: "!" })
        : n.gpus > 0
          ? el("div", {
              class: `node${n.cordoned ? " cordoned" : ""}`, "data-node": n.name,
              "data-free": n.free, style: `background:${nodeColour(n.free, n.gpus)}`,
              title: `${n.name}: ${n.free} of ${n.gpus} GPUs free${n.cordoned ? " (cordoned)" : ""}`,
              text: n.free })
          : el("div", { class: "node cpu", "data-node": n.name, title: `${n.name}: no GPUs`, text: "" })));
    return el("div", { class: "card member", "data-member": m.name, "data-status": m.status },
      el("h3", {}, m.name, badge(m.status, "status")),
      m.error ? el("div", { class: "err-text", text: m.error }) : null,
      m.problem ? el("div", { class: "err-text problem", text: m.problem }) : null,
      Object.entries(m.watchProblems || {}).map(([resource, why]) =>
        el("div", { class: "err-text watch-problem", "data-watch-problem": resource, text: why })),
      m.status === "NotReady" && m.readyMessage ? el("div", { class: "why", text: m.readyMessage }) : null,
      kv([
        ["gang scheduler", m.gangScheduler || "not detected yet"],
        ["nodes", dash(m.nodeCount)],
        ["GPUs", g.total === null ? "-" : `${g.free} free of ${g.total}`],
        ["largest free block", g.largestFree === null ? "-" : `${g.largestFree} GPU${g.largestFree === 1 ? "" : "s"} on one node`],
        ["version", dash(m.version)],
      ]),
      grid,
      m.nodesNotDrawn ? el("div", { class: "legend", text: `${m.nodesNotDrawn} more nodes not drawn` }) : null);
  });
  return el("div", {},
    el("div", { class: "row" },
      el("span", { text: `${s.members} members, ${s.ready} Ready` }),
      el("span", { class: "muted", text: `${s.free} of ${s.gpus} GPUs free` })),
    problems,
    el("div", { class: "cards" }, cards),
    el("div", { class: "legend", text: "Each square is a node, labelled and coloured by its free GPUs (red: none free, green: all free); grey: no GPUs; outlined: cordoned." }));
}

function jobsView(data) {
  const rows = data.jobs.map((j) => {
    const key = `${j.namespace}/${j.name}`;
    if (j.error) {
      return el("tr", { class: "job bad", "data-job": key },
        el("td", {}, dash(j.namespace)), el("td", {}, dash(j.name)),
        el("td", { class: "err", colSpan: 6, text: j.error }));
    }
    return el("tr", { class: "job", "data-job": key, "data-phase": j.phase },
      el("td", { text: j.namespace }),
      el("td", {}, el("a", { href: `#/jobs/${encodeURIComponent(j.namespace)}/${encodeURIComponent(j.name)}`, text: j.name })),
      el("td", { text: j.kind }),
      el("td", { class: "phase" }, badge(j.phase)),
      el("td", { class: "member", text: dash(j.member) }),
      el("td", { text: j.queue ? `${j.queue}${j.queuePhase ? ` (${j.queuePhase})` : ""}` : "-" }),
      el("td", { text: j.age }),
      el("td", { class: "why", text: j.why || (j.queuePhase === "Enqueued" ? j.queueMessage : "") }));
  });
  const counts = Object.entries(data.phases).map(([p, n]) => `${n} ${p}`).join(", ");
  return el("div", {},
    el("div", { class: "muted", text: counts || "no gang jobs" }),
    table(["namespace", "name", "kind", "state", "member", "queue", "age", "why it waits"], rows));
}

let logReplica = null;

function jobView(data) {
  if (data.error && !data.kind) {
    return el("div", {}, el("a", { href: "#/jobs", text: "← jobs" }), el("p", { class: "err-text", text: data.error }));
  }
  const pendingHead = ["member", "code", "reason", ...data.factColumns];
  const pending = data.pendingReasons.map((r) => el("tr", { "data-cluster": r.cluster },
    el("td", { text: r.cluster }), el("td", { text: dash(r.code) }), el("td", { text: r.reason }),
    data.factColumns.map((f) => el("td", { text: dash((r.facts || {})[f]) }))));
  // The binding names only the closest members and counts every member's code.
  const counts = Object.entries(data.pendingReasonCounts || {});
  const counted = counts.reduce((sum, [, n]) => sum + n, 0);
  const countsLine = counted > pending.length
    ? el("p", { class: "muted", id: "pending-counts", text: `the ${pending.length} closest of ${counted} members; every member by code: ${counts.map(([code, n]) => `${code} ${n}`).join(", ")}` })
    : null;
  const placements = data.placements.map((p) => el("tr", {},
    el("td", { text: p.cluster }), el("td", { text: p.placedAt }), el("td", { text: dash(p.removedAt) }),
    el("td", { text: dash(p.reason) })));
  const failovers = data.failoverHistory.map((f) => el("tr", {},
    el("td", { text: f.fromCluster }), el("td", { text: f.reason }), el("td", { text: f.time })));
  const pods = data.pods.map((p) => el("tr", { "data-pod": p.name },
    el("td", { text: p.member }), el("td", { text: p.name }), el("td", { text: dash(p.node) }),
    el("td", {}, badge(p.phase)), el("td", { text: p.ready }), el("td", { text: p.restarts }),
    el("td", { text: p.age })));
  const conditions = data.conditions.map((c) => el("tr", {},
    el("td", { text: c.type }), el("td", { text: c.status }), el("td", { text: dash(c.reason) }),
    el("td", { class: "why", text: dash(c.message) })));
  const members = data.members.map((m) => el("tr", {},
    el("td", { text: m.cluster }), el("td", { text: dash(m.applied) }), el("td", { text: dash(m.health) }),
    el("td", { text: dash(m.state) }), el("td", { class: "why", text: m.message })));
  const select = el("select", { id: "replica" },
    data.replicas.map((r) => el("option", { value: r, text: r, selected: r === logReplica })));
  const logBox = el("pre", { class: "log", id: "log", text: "(press Load to read the log)" });
  const load = el("button", { id: "load-log", text: "Load log" });
  load.onclick = async () => {
    logReplica = select.value || null;
    logBox.textContent = "reading…";
    const q = new URLSearchParams({ kind: data.kind });
    if (logReplica) q.set("replica", logReplica);
    const answer = await (await fetch(`/api/jobs/${encodeURIComponent(data.namespace)}/${encodeURIComponent(data.name)}/log?${q}`)).json();
    // The page may have been redrawn meanwhile (a change arrived): write to the box shown now.
    const shown = document.getElementById("log");
    if (shown) shown.textContent = answer.error ? `error: ${answer.error}` : (answer.log || "(empty)");
  };
  return el("div", { "data-job-page": `${data.namespace}/${data.name}` },
    el("a", { href: "#/jobs", text: "← jobs" }),
    el("h2", {}, `${data.kind} ${data.namespace}/${data.name} `, badge(data.phase, "phase")),
    kv([
      ["member", dash(data.member)],
      ["member's state", dash(data.memberState)],
      ["gang", data.gang.map((g) => `${g.replicas} ${g.name}`).join(" + ") + ` (min ${data.minMember})`],
      ["queue", data.queue ? `${data.queue} (${dash(data.queuePhase)}) ${data.queueMessage}` : "-"],
      ["failovers", String(data.failovers)],
      ["age", data.age],
    ]),
    data.why ? el("p", { class: "why", id: "why", text: data.why }) : null,
    el("h3", { text: "Why each member cannot take it now" }),
    el("div", { id: "pending" }, pending.length ? table(pendingHead, pending) : el("p", { class: "muted", text: "none: it is placed, or nothing was rejected" }), countsLine),
    el("h3", { text: "Placement history" }),
    placements.length ? table(["member", "placed", "removed", "why it left"], placements) : el("p", { class: "muted", text: "never placed" }),
    el("h3", { text: "Failovers" }),
    failovers.length ? table(["from", "reason", "when"], failovers) : el("p", { class: "muted", text: "none" }),
    el("h3", { text: "In the members" }),
    members.length ? table(["member", "applied", "health", "state", "message"], members) : el("p", { class: "muted", text: "no copy yet" }),
    el("h3", { text: "Pods" }),
    el("div", { id: "pods" }, pods.length ? table(["member", "pod", "node", "phase", "ready", "restarts", "age"], pods) : el("p", { class: "muted", text: "no pods in any member" })),
    el("h3", { text: "Conditions" }),
    table(["type", "status", "reason", "message"], conditions),
    el("h3", { text: "Log (as kubectl amc logs reads it)" }),
    el("div", { class: "row" }, select, load),
    logBox);
}

function bar(b) {
  const scale = Math.max(b.max ?? 0, b.min, b.used, 1);
  const own = b.used - b.borrowed;  // what it holds within its min (max-jobs: all of it)
  return el("div", { class: "bar", "data-resource": b.resource },
    el("span", { text: b.resource }),
    el("div", { class: "track", title: `used ${b.text.used}, min ${b.text.min}, max ${b.text.max}, borrowed ${b.text.borrowed}` },
      own ? el("div", { class: "fill", style: `width:${(100 * own) / scale}%` }) : null,
      b.borrowed ? el("div", { class: "fill borrow", style: `left:${(100 * own) / scale}%;width:${(100 * b.borrowed) / scale}%` }) : null,
      b.min ? el("div", { class: "minmark", style: `left:${(100 * b.min) / scale}%` }) : null),
    el("span", { class: "muted", text: `${b.text.used} used · min ${b.text.min} · max ${b.text.max}${b.borrowed ? ` · borrows ${b.text.borrowed}` : ""}` }));
}

function quotasView(data) {
  if (!data.tree) {
    return el("p", { class: "muted", text: "No ElasticQuotaTree in kube-system: Kube Queue is not in use." });
  }
  const problems = data.problems.map((p) => el("li", { class: p.severity === "Error" ? "err-text" : "muted", text: `${p.node || "spec.root"}: ${p.message} (${p.rule})` }));
  const nodes = data.nodes.map((n) => el("div", { class: "qnode", "data-path": n.path, style: `margin-left:${n.depth * 28}px` },
    el("div", { class: "row" }, el("strong", { text: n.name }), el("span", { class: "muted", text: n.path }),
      n.namespaces.length ? el("span", { class: "muted", text: `namespaces: ${n.namespaces.join(", ")}` }) : null,
      n.queue ? el("span", { class: "muted", text: `queue ${n.queue} (${n.policy}): ${dash(n.waiting)} waiting, ${dash(n.dequeued)} dequeued` }) : null),
    n.bars.map(bar),
    n.units.length ? el("ol", { class: "units" }, n.units.map((u) => u.error
      ? el("li", { class: "unit err-text", "data-unit": `${u.namespace}/${u.name}`, text: u.error })
      : el("li", { class: "unit", "data-unit": `${u.namespace}/${u.name}`, "data-phase": u.phase },
          badge(u.phase), " ", el("a", { href: `#/jobs/${encodeURIComponent(u.namespace)}/${encodeURIComponent(u.job)}`, text: `${u.namespace}/${u.job}` }),
          u.position ? el("span", { class: "muted", text: ` #${u.position}` }) : null,
          u.message ? el("span", { class: "why message", text: ` ${u.message}` }) : null))) : null));
  return el("div", {},
    el("div", { class: "row" }, el("strong", { text: data.tree }), badge(data.state || "Unknown"),
      el("span", { class: "muted", text: `generation ${dash(data.generation)}, in force ${dash(data.inForce)}` })),
    data.message && !problems.length ? el("p", { class: "err-text", text: data.message }) : null,
    data.error ? el("p", { class: "err-text", text: data.error }) : null,
    problems.length ? el("ul", {}, problems) : null,
    el("div", { class: "legend", text: "Bars: used within min (blue), borrowed beyond min (orange), the black mark is min; the bar's end is max. Units: holding quota first, then waiting ones in the order the queue takes them." }),
    nodes);
}

function reservationsView(data) {
  return el("div", {}, data.members.map((m) => el("div", { class: "card rmember", "data-member": m.name, style: "margin-bottom:12px" },
    el("h3", {}, m.name, badge(m.status, "status"), el("span", { class: "muted", text: dash(m.gangScheduler) })),
    m.error ? el("div", { class: "err-text", text: m.error }) : null,
    m.problem ? el("div", { class: "err-text", text: m.problem }) : null,
    m.watchProblem ? el("div", { class: "err-text watch-problem", "data-watch-problem": "Reservation", text: m.watchProblem }) : null,
    !m.watched ? el("p", { class: "muted", text: "no Koordinator Reservations here (not a Koordinator member)" })
      : m.reservations.length === 0 ? el("p", { class: "muted", text: m.watchProblem ? "no Reservations seen (the watch is refused)" : "no Reservations" })
      : table(["name", "phase", "node", "job (binding)", "role", "message", "age"], m.reservations.map((r) => r.error
          ? el("tr", { class: "bad" }, el("td", { text: r.name }), el("td", { class: "err", colSpan: 6, text: r.error }))
          : el("tr", { "data-reservation": r.name },
              el("td", { text: r.name }), el("td", {}, badge(r.phase)), el("td", { text: dash(r.node) }),
              el("td", { text: dash(r.binding) }), el("td", { text: dash(r.role) }),
              el("td", { class: "why", text: r.message }), el("td", { text: r.age })))))));
}

// -- routing and refresh ------------------------------------------------------------------------

function route() {
  const parts = location.hash.replace(/^#\/?/, "").split("/").map(decodeURIComponent);
  if (parts[0] === "jobs" && parts.length === 3) {
    return { name: "job", url: `/api/jobs/${encodeURIComponent(parts[1])}/${encodeURIComponent(parts[2])}`, render: jobView, tab: "jobs" };
  }
  const views = { jobs: jobsView, quotas: quotasView, reservations: reservationsView, fleet: fleetView };
  const name = views[parts[0]] ? parts[0] : "fleet";
  return { name, url: `/api/${name}`, render: views[name], tab: name };
}

let busy = false;
let again = false;

async function refresh() {
  if (busy) { again = true; return; }
  busy = true;
  const r = route();
  for (const a of document.querySelectorAll("nav a")) a.classList.toggle("active", a.dataset.view === r.tab);
  try {
    const answer = await fetch(r.url);
    const data = await answer.json();
    if (data.error && !data.kind && r.name !== "job") {
      errorBox.hidden = false;
      errorBox.textContent = `${r.name}: ${data.error}`;
    } else {
      errorBox.hidden = true;
      const scrollY = window.scrollY;
      const logText = document.getElementById("log")?.textContent;
      view.replaceChildren(r.render(data));
      const log = document.getElementById("log");
      if (log && logText && r.name === "job") log.textContent = logText;
      window.scrollTo(0, scrollY);
    }
    document.body.dataset.view = r.name;
    document.body.dataset.version = String(data.version ?? "");
  } catch (e) {
    errorBox.hidden = false;
    errorBox.textContent = `cannot reach the dashboard: ${e}`;
  } finally {
    busy = false;
    if (again) { again = false; refresh(); }
  }
}

function connect() {
  const events = new EventSource("/api/events");
  events.addEventListener("change", () => refresh());
  events.onopen = () => { live.textContent = "live"; live.className = "live on"; };
  events.onerror = () => { live.textContent = "reconnecting"; live.className = "live off"; };
}

window.addEventListener("hashchange", () => { logReplica = null; refresh(); });
connect();
refresh();
