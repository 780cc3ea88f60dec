#!/usr/bin/env python3
"""The overhead matrix of issue 28: what each CUPTI feature costs per launch, on a GPU or on the
simulated device, with prebuilt binaries (no build step).

    tests/gpu/overhead_matrix.py BUILD_DIR OUT_DIR [--rounds 5] [--budget-s 230]
    tests/gpu/overhead_matrix.py BUILD_DIR OUT_DIR --sim [--rounds 1] [--check]

GPU (default): the programs are examples/launch_bound (3000 tiny kernels a step, C API step
marks) and the PyTorch loops of tests/gpu/loops.py -- `launch` (the MLP, ~2,000 launches a step)
and `graph` (the same MLP through CUDA graphs) -- run through `loops.py --serve`, which imports
torch once and forks a child per run (the child sets the row's environment before its first
CUDA call).  Each row is one configuration: no tracer, torch.profiler, the bare CUPTI tracer, or
libgpuacct.so under the GPUACCT_CUPTI_* experiment settings (docs/overhead.md) that switch one
CUPTI feature at a time.  Rounds alternate every row of every program (so drift hits them
alike); each row's figure is the median over rounds of the program's own time per step:
launch_bound's printed ms/step, the loops' mean over their --window.  Per-launch cost = (row -
no tracer) / launches per step (launch_bound: 3000; loops: the `launches` of the design row's
report, the median over its busiest steps).

Hard time budget: before each run the matrix checks that the run's expected time (its last
one, or a guess) still fits in --budget-s; if not it stops, prints which rows got fewer rounds
and says so in the table.  Defaults fit 240 s of wall time on an H200.

Simulated device (--sim): the programs are the sim scenarios launch_bound (2000 launches a
step), graphs (one cudaGraphLaunch of 40 kernels a step) and nested_launch (runtime launches
making their driver call), under the fake CUPTI, which counts what the library asked of it
(GPUACCT_SIM_CUPTI_COUNTS, tests/sim/README.md): callbacks and records per launch, launches
that cost any CUPTI work, and the configuration calls (switches) a run made.  --check fails
(exit 1) when a launch costs more than the design allows (docs/overhead.md, "Budgets") or a
design row's steps differ from the planted truth: ctest overhead_matrix_sim.

Output: OUT_DIR/matrix.md (the table), OUT_DIR/matrix.json (every run's numbers and what the
library's report said of its configuration), OUT_DIR/matrix.log (one line per run).  Scratch
(reports, clocks, logs) goes to a temporary directory, removed at the end (--keep keeps it).
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from typing import Any, Dict, List, Optional

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

K, A, C, T = ("GPUACCT_CUPTI_KINDS", "GPUACCT_CUPTI_API_RECORDS", "GPUACCT_CUPTI_CALLBACKS",
              "GPUACCT_CUPTI_TIMESTAMPS")
R = {"GPUACCT_CUPTI_API": "records"}  # the calls timed by CUPTI's records: callbacks as asked
ALONE = {A: "0", C: "none", **R}  # with K: one activity kind and nothing else

# name, tracer ("none", "lib", "bare", "profiler"), environment, what it measures.  The order is
# the priority: a round runs them in it, and when the time budget cannot hold every row's five
# rounds the last ones are dropped after round 1 (never the first five: the targets).
ROWS = [
    ("none", "none", {}, "no tracer"),
    ("design", "lib", {}, "the design (defaults): kernel,copy,memset,graph kinds, the traced "
     "calls timed by their callbacks (both domains, a ring record each; no API record), CUPTI's "
     "own clock"),
    ("design_records", "lib", {"GPUACCT_CUPTI_API": "records"},
     "the design before: the traced calls' API records, launch callbacks in the driver domain "
     "only (GPUACCT_CUPTI_API=records)"),
    ("today", "lib", {K: "kernel,copy,memset,sync", C: "both", T: "callback", **R},
     "before issue 28: + SYNCHRONIZATION, runtime and driver callbacks, timestamp callback, "
     "graphs node by node"),
    ("torch_profiler", "profiler", {}, "torch.profiler (CPU + CUDA activities)"),
    ("sample10", "lib", {"GPUACCT_SAMPLE": "10"}, "design, GPUACCT_SAMPLE=10 (switch all)"),
    ("untraced", "lib", {"GPUACCT_SAMPLE": "1000000"},
     "design, switched off at the first step and never on again: an untraced step's floor"),
    ("design_nostacks", "lib", {"GPUACCT_STACKS": "0"}, "design without native call sites"),
    ("records_nostacks", "lib", {"GPUACCT_STACKS": "0", "GPUACCT_CUPTI_API": "records"},
     "API records without callbacks (no stacks)"),
    ("design_nodes", "lib", {"GPUACCT_GRAPH_NODES": "1"}, "design, graphs node by node"),
    ("kernels", "lib", {K: "kernel", **ALONE}, "CONCURRENT_KERNEL alone"),
    ("api_records", "lib", {K: "none", C: "none", **R}, "the traced calls' API records alone"),
    ("cb_driver", "lib", {K: "none", A: "0", C: "driver", **R}, "launch/sync callbacks, driver"),
    ("cb_both", "lib", {K: "none", A: "0", C: "both", **R},
     "launch/sync callbacks, both domains"),
    ("ts_callback", "lib", {T: "callback"}, "design with the timestamp callback"),
    ("subscribe", "lib", {K: "none", **ALONE}, "subscribed; resource, state, reset callbacks only"),
    ("sample10_cb_on", "lib", {"GPUACCT_SAMPLE": "10", "GPUACCT_CUPTI_SAMPLE_SWITCH": "activity"},
     "GPUACCT_SAMPLE=10 switching kinds and records only; callbacks stay on"),
    ("sample2", "lib", {"GPUACCT_SAMPLE": "2"}, "GPUACCT_SAMPLE=2: five times the switches"),
    ("cb_runtime", "lib", {K: "none", A: "0", C: "runtime", **R},
     "launch/sync callbacks, runtime"),
    ("copies", "lib", {K: "copy,memset", **ALONE}, "MEMCPY, MEMCPY2, MEMSET alone"),
    ("sync", "lib", {K: "sync", **ALONE}, "SYNCHRONIZATION alone"),
    ("graph_trace", "lib", {K: "graph", **ALONE}, "GRAPH_TRACE alone"),
    ("no_api_cb", "lib", {K: "none", **ALONE, "GPUACCT_CUPTI_RESET_CALLBACK": "0"},
     "subscribed, no API-domain callback at all (not even cudaDeviceReset)"),
    ("bare", "bare", {}, "bare CUPTI tracer (tests/gpu/bare_cupti_tracer.cc: today's kinds and "
     "API records, no callbacks)"),
]
ESSENTIAL = {"none", "design", "design_records", "today", "torch_profiler", "sample10"}
TORCH_KEEP = {"untraced", "design_nodes"}  # dropped after the other loop rows
ROW_INDEX = {r[0]: i for i, r in enumerate(ROWS)}
ALL_LIB = [r[0] for r in ROWS if r[1] in ("lib", "none", "bare")]
GRAPH_ONLY = {"design_nodes", "graph_trace"}

# name -> (kind, rows, settings).  kind: "example" | "torch" | "sim".
GPU_PROGRAMS: Dict[str, Dict[str, Any]] = {
    "launch_bound": {"kind": "example", "binary": "examples/launch_bound", "steps": 12,
                     "launches": 3000, "guess_s": 1.0,
                     "rows": [r for r in ALL_LIB if r not in GRAPH_ONLY]},
    "torch_launch": {"kind": "torch", "scenario": "launch", "iters": 10, "window": "3:10",
                     "launches": 1998, "guess_s": 4.0,
                     "rows": ["none", "design", "design_records", "today", "torch_profiler",
                              "sample10", "untraced", "design_nostacks", "kernels",
                              "api_records"]},
    "torch_graph": {"kind": "torch", "scenario": "graph", "iters": 10, "window": "3:10",
                    "launches": 658, "guess_s": 5.0,
                    "rows": ["none", "design", "design_records", "today", "torch_profiler",
                             "design_nodes", "graph_trace"]},
    # The compute-bound target (<= 1.02x): few launches, long kernels.
    "torch_compute": {"kind": "torch", "scenario": "compute", "iters": 10, "window": "3:10",
                      "launches": 12, "guess_s": 5.0,
                      "rows": ["none", "design", "design_records", "torch_profiler"]},
}
SIM_PROGRAMS: Dict[str, Dict[str, Any]] = {
    "sim_launch_bound": {"kind": "sim", "scenario": "launch_bound", "steps": 10,
                         "launches": 2000, "guess_s": 2.0,
                         "rows": [r for r in ALL_LIB if r not in GRAPH_ONLY]},
    "sim_graphs": {"kind": "sim", "scenario": "graphs", "steps": 10, "launches": 1,
                   "guess_s": 1.0, "rows": ["none", "design", "design_records", "today",
                                            "design_nodes", "design_nostacks", "graph_trace",
                                            "kernels", "sample10", "bare"]},
    "sim_nested": {"kind": "sim", "scenario": "nested_launch", "steps": 10, "launches": 10,
                   "guess_s": 1.0, "rows": ["none", "design", "design_records", "today", "cb_both",
                                            "cb_runtime", "cb_driver", "design_nostacks"]},
}
KIND_NAMES = {1: "MEMCPY", 2: "MEMSET", 4: "DRIVER", 5: "RUNTIME", 10: "CONCURRENT_KERNEL",
              31: "MEMCPY2", 38: "SYNCHRONIZATION", 39: "EXTERNAL_CORRELATION",
              51: "GRAPH_TRACE"}


def clean_env() -> Dict[str, str]:
    return {k: v for k, v in os.environ.items()
            if not k.startswith(("GPUACCT_", "CUDA_INJECTION", "NVTX_INJECTION"))}


def report_facts(report_dir: str, iters: int, with_rows: bool = False) -> Dict[str, Any]:
    """What the library's report says of the run: its CUPTI configuration, records, launches."""
    files = sorted(glob.glob(os.path.join(report_dir, "gpuacct_*.json")))
    if not files:
        return {}
    try:
        with open(files[-1]) as f:
            r = json.load(f)
    except (OSError, ValueError):
        return {"report": "unreadable"}
    col = r.get("collection", {})
    stats = {s["name"]: s["value"] for s in r.get("stats", [])}
    launches = sorted((s.get("launches", 0) for s in r.get("steps", []) if s.get("device", 0) <= 0),
                      reverse=True)[:max(1, iters)]
    return {"cupti": col.get("cupti"), "clock": (col.get("clock") or {}).get("source"),
            "records": col.get("records"),
            "launches_per_step": statistics.median(launches) if launches else None,
            "steps": len(r.get("steps", [])),
            "sampling": (r.get("sampling") or {}).get("line"),
            "launch_callbacks": {k: stats.get("launch_callbacks_" + k)
                                 for k in ("runtime", "driver", "driver_nested")},
            "data_loss": bool(r.get("data_loss")),
            "unmatched_launches": stats.get("unmatched_launches"),
            **({"rows": [{"duration_ns": s["duration_ns"], "categories": s["categories"]}
                         for s in sorted((s for s in r.get("steps", []) if s.get("device") == 0),
                                         key=lambda s: s["step_index"])]}
               if with_rows else {})}


class TorchServer:
    """tests/gpu/loops.py --serve: one torch import, a forked child per run."""

    def __init__(self, python: str, env: Dict[str, str], timeout_s: float):
        self.proc = subprocess.Popen([python, os.path.join(ROOT, "tests", "gpu", "loops.py"),
                                      "--serve"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     text=True, env=env, cwd=ROOT)
        # Its import of torch counts against the budget: wait for it no longer than that.
        import select
        assert self.proc.stdout is not None
        ready, _, _ = select.select([self.proc.stdout], [], [], max(0.0, timeout_s))
        line = self.proc.stdout.readline() if ready else ""
        self.ok = line.startswith('{"ready"')
        if not self.ok:
            self.proc.kill()

    def run(self, request: Dict[str, Any]) -> Dict[str, Any]:
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.write(json.dumps(request) + "\n")
        self.proc.stdin.flush()
        line = self.proc.stdout.readline()
        return json.loads(line) if line else {"rc": -1, "error": "loops.py --serve ended"}

    def close(self) -> None:
        if not self.ok:
            return
        if self.proc.stdin is not None:
            self.proc.stdin.close()
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()


class Matrix:
    def __init__(self, a: argparse.Namespace):
        self.a = a
        self.build = os.path.abspath(a.build_dir)
        self.out = os.path.abspath(a.out_dir)
        self.scratch = tempfile.mkdtemp(prefix="gpuacct_matrix_")
        self.lib = os.path.join(self.build, "inject", "libgpuacct.so")
        self.programs = SIM_PROGRAMS if a.sim else GPU_PROGRAMS
        self.runs: List[Dict[str, Any]] = []
        self.last_s: Dict[str, float] = {}
        self.cut: Optional[str] = None
        self.notes: List[str] = []
        self.torch: Optional[TorchServer] = None
        self.start = time.monotonic()
        self.log = open(os.path.join(self.out, "matrix.log"), "w")

    def say(self, text: str) -> None:
        print(text, flush=True)
        self.log.write(text + "\n")
        self.log.flush()

    # ---- which rows can run --------------------------------------------------------------
    def bare_tracer(self) -> Optional[str]:
        names = (["bench/libsim_bare_cupti_tracer.so"] if self.a.sim else
                 ["bare_cupti_tracer.so", "tests/gpu/libbare_cupti_tracer.so"])
        for n in names:
            if os.path.exists(os.path.join(self.build, n)):
                return os.path.join(self.build, n)
        return None

    def plan(self) -> Dict[str, List[str]]:
        wanted_rows = set(self.a.rows.split(",")) if self.a.rows else None
        wanted_programs = set(self.a.programs.split(",")) if self.a.programs else None
        if not os.path.exists(self.lib):
            raise SystemExit(f"overhead_matrix: no {self.lib} (build it first: no build step here)")
        plan: Dict[str, List[str]] = {}
        for name, p in self.programs.items():
            if wanted_programs is not None and name not in wanted_programs:
                continue
            why = self.missing(p)
            if why:
                self.notes.append(f"{name}: skipped, {why}")
                self.say(f"{name}: skipped, {why}")
                continue
            rows = [r for r in p["rows"] if wanted_rows is None or r in wanted_rows]
            if "bare" in rows and self.bare_tracer() is None:
                rows.remove("bare")
                self.notes.append(f"{name}: row bare skipped, no bare CUPTI tracer in the build")
            plan[name] = sorted(rows, key=lambda r: ROW_INDEX[r])
        return plan

    def missing(self, p: Dict[str, Any]) -> str:
        if p["kind"] == "example":
            b = os.path.join(self.build, p["binary"])
            return "" if os.access(b, os.X_OK) else f"no {b} (tests/gpu/compile_examples.sh)"
        if p["kind"] == "sim":
            b = os.path.join(self.build, "sim", "bin", "sim_scenario_" + p["scenario"])
            return "" if os.access(b, os.X_OK) else f"no {b} (build sim_all)"
        want = "torch.cuda.is_available()" if self.a.torch_device == "cuda" else "True"
        probe = subprocess.run([self.a.python, "-c", f"import torch, sys; sys.exit(0 if {want} "
                                "else 1)"], capture_output=True)
        return "" if probe.returncode == 0 else f"torch with CUDA not importable by {self.a.python}"

    # ---- one run ----------------------------------------------------------------------------
    def row_env(self, row: str, rdir: str) -> Dict[str, str]:
        _, tracer, extra, _ = ROWS[ROW_INDEX[row]]
        env = clean_env()
        if tracer == "lib":
            env.update(CUDA_INJECTION64_PATH=self.lib, GPUACCT_OUTPUT_DIR=rdir, GPUACCT_QUIET="1")
            env.update(extra)
        elif tracer == "bare":
            env["CUDA_INJECTION64_PATH"] = self.bare_tracer() or ""
        return env

    def run_one(self, prog: str, row: str, rnd: int) -> Dict[str, Any]:
        p = self.programs[prog]
        rdir = os.path.join(self.scratch, f"{prog}.{row}.{rnd}")
        os.makedirs(rdir, exist_ok=True)
        env = self.row_env(row, rdir)
        res: Dict[str, Any] = {"program": prog, "row": row, "round": rnd, "ms_per_step": None}
        t0 = time.monotonic()
        if p["kind"] == "torch":
            if self.torch is None:
                self.torch = TorchServer(self.a.python, clean_env(), self.left())
            if not self.torch.ok:
                res.update(rc="torch server not ready", wall_s=0.0)
                return res
            env["PYTHONPATH"] = os.path.join(ROOT, "python_shim")
            clock = os.path.join(rdir, "clock.jsonl")
            # --torch-device cpu: a smoke run of the mechanics on loops.py's small CPU loop.
            scenario = p["scenario"] if self.a.torch_device == "cuda" else "tiny"
            ans = self.torch.run({"scenario": scenario, "iters": p["iters"],
                                  "window": p["window"], "clock": clock, "env": env,
                                  "device": self.a.torch_device,
                                  "profile": row == "torch_profiler",
                                  "timeout_s": min(90.0, self.left()),
                                  "log": os.path.join(rdir, "log")})
            res["rc"] = ans.get("rc")
            try:
                with open(clock) as f:
                    res["ms_per_step"] = json.loads(f.read().splitlines()[-1])["summary"][
                        "window_ms_per_step"]
            except (OSError, ValueError, KeyError, IndexError):
                pass
        else:
            if p["kind"] == "example":
                cmd = [os.path.join(self.build, p["binary"]), "--marks=capi",
                       f"--steps={p['steps']}"]
                pattern = r"([0-9.]+) ms/step"
            else:
                cmd = [os.path.join(self.build, "sim", "bin", "sim_scenario_" + p["scenario"]),
                       "--marks=capi", f"--steps={p['steps']}"]
                env.update(LD_LIBRARY_PATH=os.path.join(self.build, "sim", "lib"),
                           GPUACCT_SIM_REAL_TIME="1",
                           GPUACCT_SIM_CUPTI_COUNTS=os.path.join(rdir, "counts.json"),
                           GPUACCT_SIM_TRUTH=os.path.join(rdir, "truth.json"))
                pattern = r"real_ns_per_step=([0-9.]+)"
            try:
                proc = subprocess.run(cmd, env=env, capture_output=True, text=True,
                                      timeout=max(1.0, min(60.0, self.left())))
                res["rc"] = proc.returncode
                m = re.search(pattern, proc.stdout)
                if m:
                    v = float(m.group(1))
                    res["ms_per_step"] = v / 1e6 if p["kind"] == "sim" else v
                if proc.returncode != 0:
                    res["stderr"] = proc.stderr[-400:]
            except subprocess.TimeoutExpired:
                res["rc"] = "timeout"
        res["wall_s"] = round(time.monotonic() - t0, 3)
        facts = report_facts(rdir, p.get("iters", p.get("steps", 1)), p["kind"] == "sim")
        if facts:
            res["report"] = facts
        if p["kind"] == "sim":
            try:
                with open(os.path.join(rdir, "counts.json")) as f:
                    res["counts"] = json.load(f)
                with open(os.path.join(rdir, "truth.json")) as f:
                    res["truth"] = json.load(f)
            except (OSError, ValueError):
                pass
        return res

    # ---- the rounds -------------------------------------------------------------------------
    def left(self) -> float:
        return self.a.budget_s - (time.monotonic() - self.start)

    def fit(self, plan: Dict[str, List[str]], rounds_left: int) -> None:
        """After round 1: drops rows -- the loops' feature rows first, then the lowest priority,
        the costliest first among equals -- until every kept row's remaining rounds fit in the
        budget, by round 1's run times."""
        cost = lambda prog, row: self.last_s.get(f"{prog}.{row}", 0.0)  # noqa: E731
        need = sum(cost(p, r) for p, rows in plan.items() for r in rows) * rounds_left
        dropped = []
        while need > 0.95 * self.left():
            # The PyTorch loops' feature rows first (seconds a run; launch_bound prices each
            # feature for a fraction of that), then every program's by priority.
            cands = [(self.programs[p]["kind"] == "torch" and r not in TORCH_KEEP, ROW_INDEX[r],
                      cost(p, r), p, r) for p, rows in plan.items() for r in rows
                     if r not in ESSENTIAL]
            if not cands:
                break
            _, _, c, p, r = max(cands)
            plan[p].remove(r)
            need -= c * rounds_left
            dropped.append(f"{p}.{r}")
        if dropped:
            note = (f"budget: after round 1, {len(dropped)} rows stop at n=1 so that the others "
                    f"get every round: {', '.join(dropped)}")
            self.notes.append(note)
            self.say(note)

    def run(self) -> None:
        plan = self.plan()
        self.start = time.monotonic()
        for rnd in range(self.a.rounds):
            if rnd == 1:
                self.fit(plan, self.a.rounds - 1)
            for prog, rows in plan.items():
                for row in rows:
                    key = f"{prog}.{row}"
                    guess = self.last_s.get(key, self.programs[prog]["guess_s"])
                    if guess > self.left():
                        self.cut = (f"stopped at the {self.a.budget_s:.0f} s budget in round "
                                    f"{rnd + 1} of {self.a.rounds}, before {key}: later rows have "
                                    "fewer rounds (n in the table)")
                        self.say(self.cut)
                        return
                    r = self.run_one(prog, row, rnd)
                    self.last_s[key] = r["wall_s"]
                    self.runs.append(r)
                    ms = r["ms_per_step"]
                    self.say(f"round {rnd + 1} {prog:<16} {row:<16} "
                             f"{'-' if ms is None else f'{ms:.3f}'} ms/step rc={r.get('rc')} "
                             f"{r['wall_s']:.1f} s")

    def close(self) -> None:
        if self.torch is not None:
            self.torch.close()
        self.log.close()
        if self.a.keep:
            print(f"scratch kept in {self.scratch}")
        else:
            shutil.rmtree(self.scratch, ignore_errors=True)


# ---- the table ----------------------------------------------------------------------------------
def summarize(runs: List[Dict[str, Any]], programs: Dict[str, Dict[str, Any]], sim: bool
              ) -> List[Dict[str, Any]]:
    by: Dict[tuple, List[Dict[str, Any]]] = {}
    for r in runs:
        by.setdefault((r["program"], r["row"]), []).append(r)
    out = []
    for (prog, row), rs in sorted(by.items(), key=lambda kv: (list(programs).index(kv[0][0]),
                                                              ROW_INDEX[kv[0][1]])):
        vals = [r["ms_per_step"] for r in rs if r["ms_per_step"] is not None]
        s: Dict[str, Any] = {"program": prog, "row": row, "n": len(vals), "runs": len(rs),
                             "ms_per_step": statistics.median(vals) if vals else None,
                             "values": vals}
        reps = [r["report"] for r in rs if r.get("report")]
        if reps:
            s["cupti"] = reps[-1].get("cupti")
            s["clock"] = reps[-1].get("clock")
            s["sampling"] = reps[-1].get("sampling")
            s["launch_callbacks"] = reps[-1].get("launch_callbacks")
            s["unmatched_launches"] = reps[-1].get("unmatched_launches")
            s["records"] = reps[-1].get("records")
            lps = [x["launches_per_step"] for x in reps if x.get("launches_per_step")]
            if lps:
                s["report_launches_per_step"] = statistics.median(lps)
        counts = [r["counts"] for r in rs if r.get("counts")]
        if counts:
            c = counts[-1]
            n = max(1, c["launches"])
            s["counts"] = c
            s["callbacks_per_launch"] = c["launch_callbacks"] / n
            s["records_per_launch"] = c["launch_records"] / n
            s["launches_with_work"] = c["launches_with_work"] / n
            s["switches"] = c["kind_switches"] + c["callback_switches"] + c["api_filter_switches"]
        out.append(s)
    base = {s["program"]: s["ms_per_step"] for s in out if s["row"] == "none"}
    for s in out:
        p = programs[s["program"]]
        lps = p["launches"]
        design = [x for x in out if x["program"] == s["program"] and x["row"] == "design"]
        if not sim and p["kind"] == "torch" and design and design[0].get("report_launches_per_step"):
            lps = design[0]["report_launches_per_step"]
        s["launches_per_step"] = lps
        b = base.get(s["program"])
        if b and s["ms_per_step"] is not None:
            s["x_none"] = s["ms_per_step"] / b
            s["us_per_launch"] = (s["ms_per_step"] - b) * 1000.0 / lps
    return out


def table(rows: List[Dict[str, Any]], sim: bool) -> str:
    what = {r[0]: r[3] for r in ROWS}
    if sim:
        head = ("| program | row | n | real ms/step | x none | cb/launch | rec/launch | launches "
                "with work | switches | what |\n|---|---|---|---|---|---|---|---|---|---|")
    else:
        head = ("| program | row | n | ms/step | x none | µs/launch over none | what |\n"
                "|---|---|---|---|---|---|---|")
    lines = [head]
    f = lambda v, fmt: "-" if v is None else format(v, fmt)  # noqa: E731
    for s in rows:
        cells = [s["program"], s["row"], str(s["n"]), f(s["ms_per_step"], ".3f"),
                 f(s.get("x_none"), ".3f")]
        if sim:
            cells += [f(s.get("callbacks_per_launch"), ".2f"), f(s.get("records_per_launch"), ".2f"),
                      f(s.get("launches_with_work"), ".0%"), f(s.get("switches"), "d")]
        else:
            cells += [f(s.get("us_per_launch"), ".2f")]
        cells.append(what[s["row"]])
        lines.append("| " + " | ".join(cells) + " |")
    # What the library's report said it asked of CUPTI (a row that did not run as meant shows
    # here), its clock, launches per step and, for sampled rows, which steps it traced.
    # Launch callbacks counted runtime / driver / driver nested in a runtime call (the cb_both
    # row says whether every runtime launch reaches the driver domain: nested = runtime).
    lines += ["", "| program | row | CUPTI as the report says | clock | launches/step | launch "
              "callbacks rt/drv/nested | records kernels/graph spans (no nodes) | unmatched "
              "launches | sampling |", "|---|---|---|---|---|---|---|---|---|"]
    for s in rows:
        c = s.get("cupti")
        if not c:
            continue
        plan = (f"{c.get('kinds')}{' +graph_trace' if c.get('graph_trace') else ''}; api "
                f"{int(bool(c.get('api_records')))}; launch cb {c.get('launch_callbacks') or '-'}; "
                f"sync cb {c.get('sync_callbacks') or '-'}"
                f"{'; experiment' if c.get('experiment') else ''}")
        lc = s.get("launch_callbacks") or {}
        rec = s.get("records") or {}
        counted = "/".join(str(lc.get(k, "-")) for k in ("runtime", "driver", "driver_nested"))
        lines.append(f"| {s['program']} | {s['row']} | {plan} | {s.get('clock') or '-'} | "
                     f"{f(s.get('report_launches_per_step'), '.0f')} | {counted} | "
                     f"{rec.get('kernels', '-')}/{rec.get('graph_spans', '-')} "
                     f"({rec.get('graph_spans_without_nodes', '-')}) | "
                     f"{s.get('unmatched_launches', '-')} | {s.get('sampling') or '-'} |")
    return "\n".join(lines)


# ---- budgets on the simulated device (docs/overhead.md, "Budgets") -------------------------------
def check(rows: List[Dict[str, Any]], runs: List[Dict[str, Any]]) -> List[str]:
    fails: List[str] = []
    got = {(s["program"], s["row"]): s for s in rows}

    ran = {s["program"] for s in rows}

    def need(prog: str, row: str, cond, text: str) -> None:
        if prog not in ran:  # --programs left it out
            return
        s = got.get((prog, row))
        if s is None or "counts" not in s:
            fails.append(f"{prog} {row}: no counts (the run failed?)")
            return
        ok = cond(s["counts"])
        print(f"budget {'ok  ' if ok else 'FAIL'} {prog} {row}: {text}")
        if not ok:
            fails.append(f"{prog} {row}: {text}: {json.dumps(s['counts'])}")

    lb, gr, ne = "sim_launch_bound", "sim_graphs", "sim_nested"
    # The design: the calls timed by their callbacks -- the runtime pair and the nested driver
    # pair (4 callbacks), no RUNTIME / DRIVER record, the op's record alone.
    for prog in (lb, ne, gr):
        need(prog, "design", lambda c: c["max_launch_callbacks"] <= 4
             and c["max_launch_records"] <= 1 and c["records"].get("5", 0) == 0
             and c["records"].get("4", 0) == 0,
             "<= 4 callbacks and <= 1 record a launch, no RUNTIME or DRIVER record")
    need(lb, "design_nostacks", lambda c: c["max_launch_callbacks"] <= 4
         and c["max_launch_records"] <= 1, "without stacks: the same (the callbacks time calls)")
    need(gr, "design", lambda c: c["records"].get("51", 0) == c["launches"],
         "a graph launch: one GRAPH_TRACE record")
    # With API records (the design before, GPUACCT_CUPTI_API=records): one callback pair, in the
    # driver domain, and two records a launch.
    need(lb, "design_records", lambda c: c["max_launch_callbacks"] <= 2
         and c["max_launch_records"] <= 2 and c["callbacks"]["runtime"] <= 2 * 10 + 2,
         "<= 2 callbacks and <= 2 records a launch, no runtime-domain launch callback")
    need(lb, "records_nostacks", lambda c: c["max_launch_callbacks"] == 0
         and c["max_launch_records"] <= 2, "no callback, <= 2 records a launch")
    need(gr, "design_records", lambda c: c["max_launch_records"] <= 2
         and c["max_launch_callbacks"] <= 2 and c["records"].get("51", 0) == c["launches"],
         "a graph launch: one GRAPH_TRACE record beside its API record, <= 2 callbacks")
    need(ne, "design_records", lambda c: c["max_launch_callbacks"] <= 2,
         "a runtime launch making its driver call: <= 2 callbacks (the driver pair)")
    need(lb, "today", lambda c: c["max_launch_callbacks"] == 4, "before: 4 callbacks a launch")
    need(lb, "sample10", lambda c: 0 < c["launches_with_work"] <= c["launches"] // 10,
         "CUPTI work only in the traced step (1 in 10)")
    need(lb, "untraced", lambda c: c["launches_with_work"] == 0,
         "no CUPTI work in an untraced step")
    need(lb, "sample10_cb_on", lambda c: c["launch_records"] <= 2 * (c["launches"] // 10),
         "records only in the traced step (the callbacks stay on)")
    need(gr, "design_nodes", lambda c: c["max_launch_records"] == 40,
         "node by node: a record per node (40)")
    need(ne, "cb_both", lambda c: c["max_launch_callbacks"] == 4, "both domains: 4 callbacks")
    # The design's rows equal the planted truth (the e2e suite checks far more; this keeps the
    # matrix honest about the configuration it measures).
    for r in runs:
        if (r["row"] not in ("design", "design_records", "design_nostacks", "records_nostacks",
                             "design_nodes")
                or not r.get("truth")):
            continue
        got_rows = (r.get("report") or {}).get("rows") or []
        planted = r["truth"]["steps"]
        if len(got_rows) != len(planted):
            fails.append(f"{r['program']} {r['row']}: {len(got_rows)} steps, {len(planted)} planted")
            continue
        for i, (g, ts) in enumerate(zip(got_rows, planted)):
            c, e = g["categories"], ts["expected_ns"]
            pairs = [(g["duration_ns"], ts["wall_ns"]), (c["compute"], e["compute"]),
                     (c["launch_gap"], e["launch_gap"]), (c["host_other"], e["host_other"]),
                     (c["data_wait"], e["data_wait"])]
            if any(abs(x - y) > 1e-6 * ts["wall_ns"] + 1 for x, y in pairs):
                fails.append(f"{r['program']} {r['row']} step {i}: {g}, planted {ts}")
                break
    print(f"budget {'ok  ' if not any('step' in f for f in fails) else 'FAIL'} design rows: "
          "every step's window and walls equal the planted truth")
    return fails


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("build_dir")
    ap.add_argument("out_dir")
    ap.add_argument("--sim", action="store_true", help="the simulated device (counts per launch)")
    ap.add_argument("--rounds", type=int, default=None, help="default 5 (GPU), 1 (--sim)")
    ap.add_argument("--budget-s", type=float, default=None, help="default 230 (GPU), 600 (--sim)")
    ap.add_argument("--rows", default="", help="comma list of rows (default: all)")
    ap.add_argument("--programs", default="", help="comma list of programs (default: all)")
    ap.add_argument("--python", default="python3", help="the Python with torch (GPU)")
    ap.add_argument("--torch-device", default="cuda",
                    help="cpu: a smoke run of the loops' mechanics without a GPU")
    ap.add_argument("--check", action="store_true", help="--sim: fail on a budget overrun")
    ap.add_argument("--keep", action="store_true", help="keep the scratch directory")
    a = ap.parse_args()
    a.rounds = a.rounds if a.rounds is not None else (1 if a.sim else 5)
    a.budget_s = a.budget_s if a.budget_s is not None else (600.0 if a.sim else 230.0)
    if a.rounds < 1 or a.budget_s <= 0:
        ap.error("--rounds and --budget-s must be positive")
    unknown = [r for r in a.rows.split(",") if r and r not in ROW_INDEX]
    if unknown:
        ap.error(f"unknown rows {unknown}; rows: {', '.join(ROW_INDEX)}")
    os.makedirs(a.out_dir, exist_ok=True)
    m = Matrix(a)
    t0 = time.monotonic()
    try:
        m.run()
    finally:
        m.close()
    rows = summarize(m.runs, m.programs, a.sim)
    where = "the simulated device (fake CUPTI counts)" if a.sim else "GPU"
    text = (f"# Overhead matrix, {where}\n\n{len(m.runs)} runs, {a.rounds} round(s) alternating, "
            f"median per row; {time.monotonic() - t0:.0f} s.\n\n" + table(rows, a.sim) + "\n")
    for note in m.notes + ([m.cut] if m.cut else []):
        text += f"\n- {note}"
    print("\n" + text)
    with open(os.path.join(a.out_dir, "matrix.md"), "w") as f:
        f.write(text + "\n")
    with open(os.path.join(a.out_dir, "matrix.json"), "w") as f:
        json.dump({"sim": a.sim, "rounds": a.rounds, "budget_s": a.budget_s, "cut": m.cut,
                   "notes": m.notes, "rows": rows, "runs": m.runs}, f, indent=1, default=str)
    failed = [r for r in m.runs if r.get("rc") not in (0, None)]
    for r in failed:
        print(f"run failed: {r['program']} {r['row']} round {r['round'] + 1}: rc={r.get('rc')} "
              f"{r.get('stderr', '')}", file=sys.stderr)
    if a.check:
        if not a.sim:
            ap.error("--check is for --sim")
        fails = check(rows, m.runs) + [f"{r['program']} {r['row']}: rc {r.get('rc')}"
                                       for r in failed]
        for f_ in fails:
            print("FAIL: " + f_, file=sys.stderr)
        return 1 if fails else 0
    return 0


if __name__ == "__main__":
    sys.exit(main())
