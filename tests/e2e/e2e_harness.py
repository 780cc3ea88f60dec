"""The simulated program and its environment, for the end-to-end tests: the build's outputs
(BUILD, LIBRARY: set by run_e2e.py's main or by run_case_main before a case runs), the
environment that injects libgpuacct.so into a program on the simulated device (tests/sim),
running it, and reading what it wrote.  Other tests import these through run_e2e.py.
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import subprocess
import time

BUILD = ""
LIBRARY = ""  # --library: another libgpuacct.so (e.g. an older build, for before/after numbers)
SIM_DEVICE_MEMORY = 80 << 30  # what the sim's cuDeviceTotalMem reports (tests/sim/README.md)

# Scenarios that need the library loaded before cuInit (tests/sim/scenarios/early_init.cc).
PRELOADED_SCENARIOS = {"early_init"}
# How late the first mark of a run may be stamped after the program made it (the first_mark
# case): the library starts on that call, which took 0.23-13 ms here when the clock was read
# after it; read first, 1-42 us (11-16 us under TSan).
FIRST_MARK_TOL_NS = 100_000


class Fail(Exception):
    pass


def run_case_main(cases: dict) -> int:
    """main() of a file of e2e cases run as `FILE --build DIR CASE`: sets BUILD, runs the case;
    a failed check prints one `FAIL <case>: <why>` line and returns 1."""
    global BUILD
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", required=True)
    ap.add_argument("case", choices=sorted(cases))
    a = ap.parse_args()
    BUILD = os.path.abspath(a.build)
    return run_case(a.case, cases[a.case])


def run_case(name: str, case) -> int:
    """Runs one case: a failed check prints one `FAIL <name>: <why>` line and returns 1."""
    try:
        case()
    except Fail as err:
        print(f"FAIL {name}: {err}")
        return 1
    return 0


def check(cond: bool, msg: str) -> None:
    if not cond:
        raise Fail(msg)


def paths():
    lib = LIBRARY or os.path.join(BUILD, "inject", "libgpuacct.so")
    sim_lib = os.path.join(BUILD, "sim", "lib")
    sim_bin = os.path.join(BUILD, "sim", "bin")
    driver = os.path.join(BUILD, "tests", "e2e", "e2e_driver")
    for p in (lib, sim_lib, sim_bin, driver):
        check(os.path.exists(p), f"missing build output {p}")
    return lib, sim_lib, sim_bin, driver


def base_env(out: str, **extra: str) -> dict:
    lib, sim_lib, _, _ = paths()
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("GPUACCT_", "CUDA_INJECTION", "NVTX_INJECTION", "LD_PRELOAD"))}
    env.update(LD_LIBRARY_PATH=sim_lib, CUDA_INJECTION64_PATH=lib, GPUACCT_OUTPUT_DIR=out,
               GPUACCT_QUIET="1")
    env.update(extra)
    return env


def run(cmd, env, timeout=120, expect_rc=0):
    res = subprocess.run(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                         timeout=timeout)
    if expect_rc is not None and res.returncode != expect_rc:
        raise Fail(f"{cmd} exited {res.returncode}\nstdout:\n{res.stdout}\nstderr:\n{res.stderr}")
    return res


def reports(out: str):
    return sorted(p for p in glob.glob(os.path.join(out, "gpuacct_*.json")))


def one_report(out: str, res=None) -> dict:
    found = reports(out)
    check(len(found) == 1, f"expected one report in {out}, found {os.listdir(out)}"
          + (f"\nstderr:\n{res.stderr}" if res is not None else ""))
    with open(found[0]) as f:
        return json.load(f)


def stat(report: dict, name: str) -> int:
    for s in report["stats"]:
        if s["name"] == name:
            return int(s["value"])
    raise Fail(f"no stat {name}")


def scenario_with(out: str, name: str = "data_bound", marks: str = "capi", expect_rc=0, **env):
    _, _, sim_bin, _ = paths()
    e = base_env(out, **env)
    return run([os.path.join(sim_bin, f"sim_scenario_{name}"), f"--marks={marks}"], e,
               expect_rc=expect_rc)


def wait_for(pred, timeout: float) -> bool:
    end = time.time() + timeout
    while time.time() < end:
        if pred():
            return True
        time.sleep(0.05)
    return False


def jsonl_rows(out: str):
    streams = glob.glob(os.path.join(out, "*.steps.jsonl"))
    if not streams:
        return None, []
    rows = []
    with open(streams[0]) as f:
        for line in f:
            if line.strip():
                obj = json.loads(line)  # every line complete and parseable
                if "step_index" in obj:
                    rows.append(obj)
    return streams[0], rows


def long_loop(out: str, sig: int, args=("--sleep-ms=10",), rows=3, **extra_env):
    _, _, _, driver = paths()
    env = base_env(out, GPUACCT_FLUSH_MS="20")
    env.update(extra_env)
    p = subprocess.Popen([driver, "--mode=loop", "--steps=100000", *args], env=env,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        ok = wait_for(lambda: len(jsonl_rows(out)[1]) >= rows, 30)
        check(ok, "no streamed rows within 30 s")
        p.send_signal(sig)
        _, err = p.communicate(timeout=30)
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
    return p.returncode, err


def read_utf8_json_lines(path: str) -> list:
    """Every line of a JSONL file, decoded as strict UTF-8 (a byte that is not UTF-8 fails)."""
    with open(path, encoding="utf-8", errors="strict") as f:
        return [json.loads(l) for l in f.read().splitlines() if l.strip()]
