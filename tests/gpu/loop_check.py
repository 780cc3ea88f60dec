#!/usr/bin/env python3
"""Checks one PyTorch loop run of tests/gpu/check.sh (tests/gpu/loops.py under the library, the
README's one-liner as typed) against the loop's own clock.  Prints tab-separated table rows:
check, expected, got, result ("ok" or "FAIL: ...").

    loop_check.py RUN_DIR SCENARIO EXPECTED_WALL MARKS CLI

RUN_DIR holds the library's report (gpuacct_*.json), its recording (*.gpuacct) and the loop's
clock (loop_clock.jsonl); MARKS is "python" (the library's own Python instrumentation must have
loaded) or "none" (GPUACCT_PYTHON=0: steps detected); EXPECTED_WALL "-" checks no verdict.
"""

from __future__ import annotations

import glob
import json
import subprocess
import sys


def row(check: str, expected: str, got: str, ok: bool, note: str = "") -> None:
    result = "ok" if ok else "FAIL"
    print("\t".join([check, expected, got, result + (f": {note}" if note else "")]))


def main() -> int:
    run_dir, scenario, want, marks, cli = sys.argv[1:6]
    label = f"loop {scenario} ({marks})"
    reports = sorted(glob.glob(run_dir + "/gpuacct_*.json"))
    if not reports:
        row(label, want, "no report", False)
        return 0
    # The training process's report: the one with the most steps (a torch.compile worker, a
    # DataLoader worker that touched CUDA, may leave one of its own).
    rep = max((json.load(open(r)) for r in reports), key=lambda r: len(r.get("steps", [])))
    clock = [json.loads(l) for l in open(run_dir + "/loop_clock.jsonl")]
    iters = [c for c in clock if "step" in c]
    summ = rep["summary"]
    rows = sorted(rep["steps"], key=lambda r: r["step_index"])
    bound = rep["verdict"]["bound"]
    steps = summ["steps"] + summ["warmup_steps"]
    if want != "-":
        row(label, want, bound, bound == want,
            f"{steps} steps, {rep['verdict']['headline'][:60]}")
    else:
        row(label, "-", bound, True, f"{steps} steps (information)")
    n = len(iters)
    row(f"  steps ({n} iterations)", f"{n - 2}-{n}", str(len(rows)), n - 2 <= len(rows) <= n)
    py = rep.get("collection", {}).get("python", "")
    want_py = "embedded" if marks == "python" else "off"
    row("  python instrumentation", want_py, py.split(":")[0], py.startswith(want_py), py[:70])
    setup = rep.get("setup") or {}
    row("  set-up", "section", f"{setup.get('duration_ns', 0) / 1e9:.2f} s", bool(setup),
        setup.get("line", "none")[:90])
    # The rows after the loop's second optimizer.step(): its last iterations, matched to the
    # loop's own clock (step_ms: one optimizer.step() return to the next).
    k = min(len(rows), n - 2)
    tail, clock_tail = rows[-k:], iters[-k:]
    diffs = [abs(r["duration_ns"] / 1e6 - c["step_ms"]) for r, c in zip(tail, clock_tail)]
    worst = max(diffs) if diffs else float("nan")
    tol = 1.0 if marks == "python" else 2.0
    row("  rows vs the loop's clock", f"<= {tol} ms", f"{worst:.2f} ms max", worst <= tol,
        f"median {sorted(diffs)[len(diffs) // 2]:.3f} ms over the last {k}" if diffs else "")
    st = summ["step_time_ms"]
    row("  mean / p50 step", "<= 1.5", f"{st['mean'] / max(st['p50'], 1e-9):.2f}",
        st["mean"] <= 1.5 * st["p50"])
    # The recording replays to the same answer.
    pid = rep.get("run", {}).get("pid")
    recs = sorted(glob.glob(run_dir + f"/*_{pid}_*.gpuacct")) or sorted(glob.glob(run_dir + "/*.gpuacct"))
    if recs:
        res = subprocess.run([cli, "analyze", recs[-1], "--json", "--no-files"],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        try:
            off = json.loads(res.stdout)
            same = (off["verdict"]["bound"] == bound and
                    off["summary"]["steps"] == summ["steps"])
            row("  analyze of the recording", f"{bound}, {summ['steps']}",
                f"{off['verdict']['bound']}, {off['summary']['steps']}", same)
        except (ValueError, KeyError):
            row("  analyze of the recording", bound, "error", False, res.stderr.strip()[:80])
    return 0


if __name__ == "__main__":
    sys.exit(main())
