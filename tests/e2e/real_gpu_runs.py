#!/usr/bin/env python3
"""`gpuacct analyze` of the real H200 recordings (tests/data/gpu/h200-2026-12-04, README there)
against what the loops' own clocks say.  Issue 27: the README's first command must name the
right wall on real PyTorch loops -- set-up is no step, detected steps are the loop's
iterations, and the data wait of a loop without data marks is inferred.

    real_gpu_runs.py --build BUILD_DIR [--data DIR]

Prints one line per recording; exits 1 on the first failed check (one FAIL line says which).
"""

from __future__ import annotations

import argparse
import gzip
import json
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
DATA = HERE.parent / "data" / "gpu" / "h200-2026-12-04"
LIVE = HERE.parent / "data" / "gpu" / "h200-2026-12-04-b"  # recorded by this library, live

# (folder, expected verdict, set-up at least this many seconds, steps detected)
CASES = [
    ("launch", "launch", 3.0, False),
    ("compute", "compute", 3.0, False),
    ("graph", "launch", 3.0, False),
    ("data", "data", 0.0, False),
    ("databare", "data", 0.5, True),
]
WALLS = ("compute", "communication", "data", "launch", "other")
# The second set: (folder, steps detected).  Their verdicts are the live reports'.
LIVE_CASES = [("graph_python", False), ("compile_python", False), ("syncs_none", True),
              ("accum_python", False), ("launch_none", True)]


class Fail(Exception):
    pass


def check(cond: bool, what: str) -> None:
    if not cond:
        raise Fail(what)


def analyze(cli: Path, recording_gz: Path, tmp: Path) -> dict:
    rec = tmp / (recording_gz.parent.name + ".gpuacct")
    with gzip.open(recording_gz, "rb") as src, open(rec, "wb") as dst:
        shutil.copyfileobj(src, dst)
    res = subprocess.run([str(cli), "analyze", str(rec), "--json", "--no-files"],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=300)
    check(res.returncode == 0, f"gpuacct analyze exited {res.returncode}: {res.stderr.strip()}")
    return json.loads(res.stdout)


def check_live_run(name: str, detected: bool, report: dict) -> str:
    """A recording of this library: analyze gives the live report's rows, to the nanosecond,
    and they match the loop's clock."""
    live = json.loads((LIVE / name / "live_steps.json").read_text())
    rows = sorted(report["steps"], key=lambda r: r["step_index"])
    check(report["verdict"]["bound"] == live["verdict"],
          f"verdict {report['verdict']['bound']}, live {live['verdict']}")
    check(report["summary"]["steps"] == live["summary_steps"], "summary steps differ from live")
    check([(r["step_index"], r["duration_ns"], r["walls"]) for r in rows] ==
          [(r["step_index"], r["duration_ns"], r["walls"]) for r in live["steps"]],
          "rows differ from the live report's")
    check((report.get("setup") or {}).get("duration_ns") == live["setup_duration_ns"],
          "set-up differs from live")
    check(20 <= report["summary"]["steps"] <= 25, f"{report['summary']['steps']} summary steps")
    clock = [json.loads(l) for l in (LIVE / name / "loop_clock.jsonl").read_text().splitlines()]
    iters = [c for c in clock if "step" in c]
    tol_ms = 1.0 if detected else 0.5
    for r, c in zip(rows[-23:], iters[-23:]):
        got = r["duration_ns"] / 1e6
        check(abs(got - c["step_ms"]) <= tol_ms,
              f"step {r['step_index']}: {got:.2f} ms, the loop's clock {c['step_ms']:.2f} ms")
    return (f"{name:15s} {report['summary']['steps']} summary steps, "
            f"{report['verdict']['bound']}, the live rows exactly")


def check_run(name: str, verdict: str, min_setup_s: float, detected: bool, report: dict) -> str:
    clock = [json.loads(l) for l in (DATA / name / "loop_clock.jsonl").read_text().splitlines()]
    iters = [c for c in clock if "step" in c]
    summary = report["summary"]
    rows = sorted(report["steps"], key=lambda r: r["step_index"])
    # 1. 20-25 summary steps, the designed verdict.
    check(20 <= summary["steps"] <= 25, f"{summary['steps']} summary steps (want 20-25)")
    check(report["verdict"]["bound"] == verdict,
          f"verdict {report['verdict']['bound']} (want {verdict}): {report['verdict']['headline']}")
    # 2. Set-up is a section of its own, not a step.
    setup = report.get("setup")
    check(isinstance(setup, dict), "no setup section")
    setup_s = setup["duration_ns"] / 1e9
    check(setup_s >= min_setup_s, f"set-up {setup_s:.2f} s (want >= {min_setup_s} s)")
    first_begin = min(r["host_begin_ns"] for r in rows)
    check(setup["end_ns"] == first_begin, "set-up does not end where the first step begins")
    # 3. The rows after the loop's second optimizer.step() are its last 23 iterations: each
    # matches the loop's clock (the step from one optimizer.step() return to the next).
    tail = rows[-23:]
    clock_tail = iters[-23:]
    tol_ms = 1.0 if detected else 0.5
    for r, c in zip(tail, clock_tail):
        got = r["duration_ns"] / 1e6
        check(abs(got - c["step_ms"]) <= tol_ms,
              f"step {r['step_index']}: {got:.2f} ms, the loop's clock {c['step_ms']:.2f} ms "
              f"(iteration {c['step']})")
    # 4. Each summary wall within 5 % of those rows' mean (plus 0.5 % of the step for the
    # walls near zero); 5. the mean step at most 1.5x the median.
    mean_step = statistics.mean(r["duration_ns"] for r in tail) / 1e6
    for w in WALLS:
        want = statistics.mean(r["walls"][w] for r in tail) / 1e6
        got = summary["walls"][w]["ns"] / 1e6 / summary["rows"]
        check(abs(got - want) <= 0.05 * want + 0.005 * mean_step,
              f"{w} wall {got:.2f} ms/step, the rows after the second optimizer step "
              f"{want:.2f}")
    st = summary["step_time_ms"]
    check(st["mean"] <= 1.5 * st["p50"], f"mean step {st['mean']:.1f} ms > 1.5 x p50 {st['p50']:.1f}")
    # How the steps were found.
    sd = report.get("step_detection")
    if detected:
        check(isinstance(sd, dict) and sd.get("locked"), "steps were not detected")
        check(sd.get("step_end_rule") == "optimizer",
              f"detected steps end by rule {sd.get('step_end_rule')} (want optimizer)")
        check(any(s["name"] == "data_waits_inferred" and s["value"] > 0 for s in report["stats"]),
              "no data wait was inferred")
    else:
        check(sd is None, "a marked run has a step_detection section")
    return (f"{name:9s} {summary['steps']} summary steps, {report['verdict']['bound']}, "
            f"set-up {setup_s:.2f} s, mean/p50 {st['mean'] / st['p50']:.2f}")


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", required=True)
    ap.add_argument("--data", default=str(DATA))
    a = ap.parse_args()
    cli = Path(a.build) / "bin" / "gpuacct"
    if not cli.is_file():
        print(f"FAIL: {cli} is not built", file=sys.stderr)
        return 1
    with tempfile.TemporaryDirectory() as tmp:
        for name, verdict, min_setup, detected in CASES:
            try:
                report = analyze(cli, Path(a.data) / name / "run.gpuacct.gz", Path(tmp))
                print(check_run(name, verdict, min_setup, detected, report))
            except Fail as e:
                print(f"FAIL: {name}: {e}")
                return 1
        for name, detected in LIVE_CASES:
            try:
                report = analyze(cli, LIVE / name / "run.gpuacct.gz", Path(tmp))
                print(check_live_run(name, detected, report))
            except Fail as e:
                print(f"FAIL: {name} (live set): {e}")
                return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
