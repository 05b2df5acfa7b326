"""Write the `lenders` dataset: one team borrows with long training runs, three lend.

    python bench/reclaim_dataset.py OUT_DIR
    python -m fleet.simulate --dataset custom --fleet OUT_DIR/fleet.csv \\
        --trace OUT_DIR/trace.csv --queue OUT_DIR/tree.yaml \\
        --queue-policies Priority,Priority+reclaim --out report/lenders

Why this shape: Philly's VCs mostly stay near their share, so borrowing there is bursts of short
jobs. Reclaim matters when a team borrows with gangs that run for days while the lenders' work
arrives in waves. Two members of 16 nodes x 8 GPUs (256 GPUs); root min = max = 256; a team's
max is the whole fleet, so anyone may borrow what is idle:

* `research` (min 64): 4-8 gangs of 8-64 GPUs (8-GPU workers) of 6-24 h, in bursts every
  ~12 h (about 225 GPUs busy on average): it borrows most of what the others leave idle;
* `prod` (min 96): 1-16-GPU jobs of 0.5-4 h, a daytime wave (09:00-18:00) of ~6 jobs an hour;
* `dev` (min 64): 1-4-GPU jobs of 10-90 min, ~10 an hour in the daytime;
* `eval` (min 32): a nightly batch at 01:00 of 12 gangs of 8 GPUs, 1-2 h each.

Fourteen days, seed 7; the same files every run.
"""

from __future__ import annotations

import random
import sys
from pathlib import Path

DAYS = 14
HOUR = 3600.0
SEED = 7
TEAMS = {"research": 64, "prod": 96, "dev": 64, "eval": 32}
TOTAL = 256


def trace(rng: random.Random) -> list[tuple[str, float, float, str, int, int]]:
    """(job, submit, duration, team, workers, gpu per worker)."""
    jobs: list[tuple[str, float, float, str, int, int]] = []

    def add(team: str, submit: float, duration: float, workers: int, gpu: int) -> None:
        jobs.append(
            (f"{team}-{len(jobs)}", round(submit, 1), round(duration, 1), team, workers, gpu)
        )

    t = 0.0
    while t < DAYS * 24 * HOUR:  # research: a burst every ~12 h
        for _ in range(rng.randint(4, 8)):
            add("research", t + rng.uniform(0, 600), rng.uniform(6, 24) * HOUR,
                rng.choice([1, 2, 4, 8]), 8)  # fmt: skip
        t += rng.expovariate(1 / (12 * HOUR))
    for day in range(DAYS):
        base = day * 24 * HOUR
        for team, rate, sizes, low, high in (
            ("prod", 6, [(1, 1), (1, 2), (1, 4), (1, 8), (2, 8)], 0.5, 4),
            ("dev", 10, [(1, 1), (1, 2), (1, 4)], 1 / 6, 1.5),
        ):
            t = base + 9 * HOUR
            while True:
                t += rng.expovariate(rate / HOUR)
                if t >= base + 18 * HOUR:
                    break
                workers, gpu = rng.choice(sizes)
                add(team, t, rng.uniform(low, high) * HOUR, workers, gpu)
        for _ in range(12):
            add("eval", base + HOUR + rng.uniform(0, 300), rng.uniform(1, 2) * HOUR, 1, 8)
    return sorted(jobs, key=lambda j: j[1])


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print(__doc__, file=sys.stderr)
        return 2
    out = Path(argv[0])
    out.mkdir(parents=True, exist_ok=True)
    (out / "fleet.csv").write_text(
        "member,nodes,gpu,cpu,memory\nmember-a,16,8,96,768Gi\nmember-b,16,8,96,768Gi\n"
    )
    rows = ["job,submit,duration,team,workers,gpu,cpu,memory"]
    rows += [f"{j},{s},{d},{t},{w},{g},8,64Gi" for j, s, d, t, w, g in trace(random.Random(SEED))]
    (out / "trace.csv").write_text("\n".join(rows) + "\n")
    children = "\n".join(
        f"      - name: {team}\n        namespaces: [{team}]\n"
        f"        min: {{nvidia.com/gpu: {low}}}\n        max: {{nvidia.com/gpu: {TOTAL}}}"
        for team, low in TEAMS.items()
    )
    (out / "tree.yaml").write_text(
        "root:\n  name: root\n"
        f"  min: {{nvidia.com/gpu: {TOTAL}}}\n  max: {{nvidia.com/gpu: {TOTAL}}}\n"
        f"  children:\n{children}\n"
    )
    print(f"wrote {out}/fleet.csv, trace.csv ({len(rows) - 1} jobs), tree.yaml")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
