#!/usr/bin/env python3
"""The overhead table of tests/gpu/check.sh on the simulated device: a CPU proxy.

    bench/sim_overhead.py --build build [--rounds 7] [--steps 20]

Runs the simulated launch-bound program (tests/sim/scenarios/launch_bound.cc: 2000 launches per
step, steps marked through the C API) under each tracer and prints the median real time per step
and its ratio to no tracer and to the bare CUPTI tracer:

    none          no injection
    bare CUPTI    tests/gpu/bare_cupti_tracer.cc on the fake CUPTI: gpuacct's activity kinds and
                  API records, no callbacks, no analysis
    full          libgpuacct.so, defaults
    stacks off    GPUACCT_STACKS=0
    sampled 1/10  GPUACCT_SAMPLE=10

The sim's step time is virtual (planted): what a tracer costs shows only in real time, which the
scenario prints with GPUACCT_SIM_REAL_TIME=1 (first step begin to last step end).  The fake
CUPTI's own cost per callback and record is not a real CUPTI's, so the ratios are a proxy: they
rank the configurations and catch regressions; the targets are checked on a GPU
(tests/gpu/check.sh).  Rounds run the configurations interleaved so drift hits them alike.
Not a ctest (timing); docs/overhead.md records its numbers."""

from __future__ import annotations

import argparse
import os
import re
import statistics
import subprocess
import sys
import tempfile


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", required=True)
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--steps", type=int, default=20)
    a = ap.parse_args()
    build = os.path.abspath(a.build)
    prog = os.path.join(build, "sim", "bin", "sim_scenario_launch_bound")
    lib = os.path.join(build, "inject", "libgpuacct.so")
    bare = os.path.join(build, "bench", "libsim_bare_cupti_tracer.so")
    for p in (prog, lib, bare):
        if not os.path.exists(p):
            print(f"sim_overhead: missing {p} (build sim_all, gpuacct, sim_bare_cupti_tracer)",
                  file=sys.stderr)
            return 2
    configs = [("none", {}), ("bare CUPTI", {"CUDA_INJECTION64_PATH": bare}),
               ("gpuacct full", {"CUDA_INJECTION64_PATH": lib}),
               ("gpuacct stacks off", {"CUDA_INJECTION64_PATH": lib, "GPUACCT_STACKS": "0"}),
               ("gpuacct sampled 1/10", {"CUDA_INJECTION64_PATH": lib, "GPUACCT_SAMPLE": "10"})]
    times: dict[str, list[float]] = {name: [] for name, _ in configs}
    with tempfile.TemporaryDirectory(prefix="gpuacct_overhead_") as out:
        base = {k: v for k, v in os.environ.items()
                if not k.startswith(("GPUACCT_", "CUDA_INJECTION", "NVTX_INJECTION"))}
        base.update(LD_LIBRARY_PATH=os.path.join(build, "sim", "lib"), GPUACCT_OUTPUT_DIR=out,
                    GPUACCT_QUIET="1", GPUACCT_SIM_REAL_TIME="1")
        for _ in range(a.rounds):
            for name, extra in configs:
                env = dict(base, **extra)
                res = subprocess.run([prog, "--marks=capi", f"--steps={a.steps}"], env=env,
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                     timeout=300)
                m = re.search(r"real_ns_per_step=([0-9.]+)", res.stdout)
                if res.returncode != 0 or m is None:
                    print(f"sim_overhead: {name} failed (rc {res.returncode}):\n{res.stderr}",
                          file=sys.stderr)
                    return 1
                times[name].append(float(m.group(1)))
    med = {name: statistics.median(v) for name, v in times.items()}
    launches = 2000
    print(f"sim overhead proxy: launch_bound, {a.steps} steps x {launches} launches, "
          f"median of {a.rounds} interleaved rounds (real time per step)")
    print(f"{'tracer':<22} {'ms/step':>9} {'ns/launch':>10} {'x none':>8} {'x bare':>8}")
    for name, _ in configs:
        ms = med[name] / 1e6
        print(f"{name:<22} {ms:9.3f} {med[name] / launches:10.1f} {med[name] / med['none']:8.3f} "
              f"{med[name] / med['bare CUPTI']:8.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
