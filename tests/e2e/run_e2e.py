#!/usr/bin/env python3
"""End-to-end tests of the real libgpuacct.so on the simulated device (tests/sim).

Each ctest runs one case:  run_e2e.py --build <build dir> <case>

  scenario:<name>:<capi|nvtx|none>[:VAR=VALUE[,VAR=VALUE...]]
                                    the scenario's report against its planted truth: exact step
                                    count, every category of every step within 1% of the step
                                    time, launches per step, the verdict the truth implies; the
                                    optional variables go into the scenario's environment (e.g.
                                    GPUACCT_SIM_CUPTI_CLOCK=monotonic)
  subscribe_refused, drop, buffer_refused, pool_cap, fork, sigterm, sigkill, busy, bad_env,
  no_cupti, real_cupti, nocuda, record, enable_off     fault and lifecycle cases
  latin1_names                      bytes that are not UTF-8 in argv[0] and the output path
  same_steps                        live = analyze = timeline on one run's recording
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import signal
import subprocess
import sys
import tempfile
import time

BUILD = ""
LIBRARY = ""  # --library: another libgpuacct.so (e.g. an older build, for before/after numbers)
TOL = 0.01  # of the step time
SIM_DEVICE_MEMORY = 80 << 30  # what the sim's cuDeviceTotalMem reports (tests/sim/README.md)

# Scenarios that need the library loaded before cuInit (tests/sim/scenarios/early_init.cc).
PRELOADED_SCENARIOS = {"early_init"}


class Fail(Exception):
    pass


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


# ---- scenarios against the planted truth -----------------------------------------------------

BANDS = {"data": (0.05, 0.20), "launch": (0.03, 0.15), "communication": (0.03, 0.15),
         "other": (0.10, 0.25)}


def expected_verdict(truth: dict, marks: str) -> str:
    """The verdict run_summary.h's bands give for the truth's walls (the scenarios' copies are
    host-to-device input copies: data wall).  Without marks, data waits are host_other."""
    t = truth["totals_ns"]
    total = sum(t[c] for c in truth["categories"])
    data = t["copy"] + (t["data_wait"] if marks != "none" else 0)
    other = t["host_other"] + (t["data_wait"] if marks == "none" else 0)
    walls = {"data": data, "launch": t["launch_gap"],
             "communication": t["communication_exposed"], "other": other}
    best = None
    for bound, (moderate, high) in BANDS.items():
        share = walls[bound] / total
        sev = 2 if share >= high else 1 if share >= moderate else 0
        if sev and (best is None or (sev, share) > best[:2]):
            best = (sev, share, bound)
    return best[2] if best else "compute"


def case_scenario(name: str, marks: str, extra_env: dict) -> None:
    lib, _, sim_bin, _ = paths()
    with tempfile.TemporaryDirectory(prefix="gpuacct_e2e_") as out:
        truth_path = os.path.join(out, "truth.json")
        env = base_env(out, GPUACCT_SIM_TRUTH=truth_path, **extra_env)
        if name in PRELOADED_SCENARIOS:
            env["LD_PRELOAD"] = lib
        if name == "million":
            # The sim issues a million kernels in ~0.2 s of real time (a GPU needs >= 4 s for
            # them); on a loaded 2-core box the default pool (8 x 4 MiB) can fill before the
            # worker gets the CPU, which the pool_cap case tests on purpose.  Here: exactness.
            env["GPUACCT_BUFFER_COUNT"] = "128"
        res = run([os.path.join(sim_bin, f"sim_scenario_{name}"), f"--marks={marks}"], env)
        rep = one_report(out, res)
        with open(truth_path) as f:
            truth = json.load(f)
        rows = sorted((r for r in rep["steps"] if r["device"] == 0), key=lambda r: r["step_index"])
        n = truth["num_steps"]
        check(len(rows) == n, f"{len(rows)} steps in the report, {n} planted")
        check(rep["summary"]["steps"] + rep["summary"]["warmup_steps"] == n,
              f"summary counts {rep['summary']['steps']}+{rep['summary']['warmup_steps']} != {n}")
        worst = (0.0, None)
        for row, ts in zip(rows, truth["steps"]):
            ex = ts["expected_ns"]
            c = row["categories"]
            got = {"compute": c["compute"], "communication_exposed": c["comm_exposed"],
                   "copy": c["copy_input"] + c["copy_other"], "data_wait": c["data_wait"],
                   "launch_gap": c["launch_gap"], "host_other": c["host_other"]}
            exp = dict(ex)
            if marks == "none":  # no data ranges: waiting for input is plain host time
                exp["host_other"] += exp["data_wait"]
                exp["data_wait"] = 0
            wall = ts["wall_ns"]
            check(abs(row["duration_ns"] - wall) <= TOL * wall,
                  f"step {row['step_index']}: window {row['duration_ns']} ns, planted {wall} ns")
            if "launches" in ts and marks != "none":  # detected steps may cut elsewhere
                check(row["launches"] == ts["launches"],
                      f"step {row['step_index']}: {row['launches']} launches, the program made "
                      f"{ts['launches']}")
            for k in got:
                d = abs(got[k] - exp[k]) / wall
                if d > worst[0]:
                    worst = (d, (row["step_index"], k, got[k], exp[k]))
                check(d <= TOL, f"step {row['step_index']} {k}: got {got[k]} ns, planted "
                                f"{exp[k]} ns (step {wall} ns)")
        want = expected_verdict(truth, marks)
        check(rep["verdict"]["bound"] == want,
              f"verdict {rep['verdict']['bound']!r}, the truth implies {want!r}")
        check(not rep["data_loss"], f"data loss reported: {rep['stats']}")
        check(stat(rep, "unmatched_launches") == 0,
              f"{stat(rep, 'unmatched_launches')} unmatched launches: every launch got its op")
        devs = rep["run"]["devices"]
        check(devs and all(d["name"].startswith("gpuacct simulated GPU") for d in devs),
              f"device names read from the driver: {devs}")
        check(all(d["total_memory"] == SIM_DEVICE_MEMORY and d["sm_count"] == 132
                  and d["compute_capability"] == "9.0" for d in devs),
              f"device memory, SMs, compute capability read from the driver: {devs}")
        clock = rep["collection"]["clock"]
        refused = "error:cuptiActivityRegisterTimestampCallback" in extra_env.get(
            "GPUACCT_SIM_FAULTS", "")
        want_clock = "measured_offset" if refused else "cupti_timestamp_callback"
        check(clock["source"] == want_clock, f"clock {clock}, expected {want_clock}")
        src = rep["collection"]["step_source"]
        check(src == {"capi": "capi", "nvtx": "nvtx", "none": "detected"}[marks],
              f"step source {src}")
        # Detected steps: the section every source writes, at the top level (not in collection).
        check("step_detection" not in rep["collection"], "step_detection inside collection")
        if marks == "none":
            sd = rep.get("step_detection", {})
            check(sd.get("source") == "detected" and sd.get("locked") and sd.get("steps") == n,
                  f"step_detection section {sd}, {n} steps planted")
        else:
            check("step_detection" not in rep, "a step_detection section although steps are marked")
        summaries = check_stream_summaries(out)
        print(f"ok: {n} steps, worst category error {worst[0] * 100:.4f}% {worst[1]}, "
              f"verdict {want}, {summaries}")


def check_stream_summaries(out: str) -> str:
    """Every summary line of the run's step stream is the C++ summary of the rows before it,
    and the last one is the report's (tests/e2e/stream_summary_check.cc)."""
    streams = glob.glob(os.path.join(out, "*.steps.jsonl"))
    check(len(streams) == 1, f"expected one stream in {out}, found {os.listdir(out)}")
    checker = os.path.join(BUILD, "tests", "e2e", "stream_summary_check")
    res = run([checker, streams[0]], os.environ.copy())
    with open(streams[0]) as f:
        last = json.loads(f.read().splitlines()[-1])
    rep = one_report(out)
    check(last.get("provisional") is False and last["summary"] == rep["summary"]
          and last["verdict"] == rep["verdict"], "the stream's last line is not the report's summary")
    return res.stdout.strip()


# ---- faults and lifecycle ----------------------------------------------------------------------

def scenario_with(out: str, name: str = "data_bound", marks: str = "capi", expect_rc=0, **env):
    _, _, sim_bin, _ = paths()
    e = base_env(out, **env)
    return run([os.path.join(sim_bin, f"sim_scenario_{name}"), f"--marks={marks}"], e,
               expect_rc=expect_rc)


def gpu_off_line(stderr: str, needle: str) -> None:
    lines = [l for l in stderr.splitlines() if l.startswith("gpuacct:")]
    off = [l for l in lines if "GPU activity off, host ranges only" in l]
    check(len(off) == 1, f"expected one 'GPU activity off' line, got:\n{stderr}")
    check(needle in off[0], f"{needle!r} not in {off[0]!r}")


def host_only_report(rep: dict, steps: int) -> None:
    rows = rep["steps"]
    check(len(rows) == steps, f"{len(rows)} host-only rows, expected {steps}")
    check(all(r["host_only"] for r in rows), "rows should be host-only")
    check("No GPU activity" in rep["verdict"]["headline"], rep["verdict"]["headline"])
    check("no GPU activity" in rep["collection"].get("note", ""), str(rep["collection"]))


def case_subscribe_refused() -> None:
    with tempfile.TemporaryDirectory() as out:
        res = scenario_with(out, GPUACCT_SIM_FAULTS="subscribe_refused")
        gpu_off_line(res.stderr, "another CUPTI client")
        rep = one_report(out)
        check(rep["collection"]["gpu"] == "other_subscriber", str(rep["collection"]))
        host_only_report(rep, 20)
        print("ok: stepped aside, host ranges kept")


def case_drop() -> None:
    with tempfile.TemporaryDirectory() as out:
        scenario_with(out, GPUACCT_SIM_FAULTS="drop=25")
        rep = one_report(out)
        check(stat(rep, "cupti_records_dropped") == 25, str(rep["stats"]))
        check(rep["data_loss"] is True, "data_loss must be set")
        print("ok: 25 dropped records counted")


def case_buffer_refused() -> None:
    with tempfile.TemporaryDirectory() as out:
        scenario_with(out, "launch_bound", GPUACCT_SIM_FAULTS="buffer_refused=2")
        rep = one_report(out)
        check(stat(rep, "cupti_records_dropped") > 0, str(rep["stats"]))
        check(rep["data_loss"] is True, "data_loss must be set")
        print(f"ok: {stat(rep, 'cupti_records_dropped')} records lost to refused buffers counted")


def case_pool_cap() -> None:
    # Our own cap: 2 buffers of 1 MiB for a million kernels produced in no real time.
    with tempfile.TemporaryDirectory() as out:
        scenario_with(out, "million", "capi", GPUACCT_BUFFER_MB="1", GPUACCT_BUFFER_COUNT="2")
        rep = one_report(out)
        refused = stat(rep, "cupti_buffers_refused")
        check(refused > 0, f"no buffer refused at the cap: {rep['stats']}")
        check(stat(rep, "cupti_records_dropped") > 0, "refusals must show as dropped records")
        check(rep["collection"]["buffers"]["allocated"] <= 2, str(rep["collection"]["buffers"]))
        print(f"ok: {refused} buffer requests refused at the cap, counted")


def case_fork() -> None:
    _, _, _, driver = paths()
    with tempfile.TemporaryDirectory() as out:
        res = run([driver, "--mode=fork", "--steps=8"], base_env(out))
        child = [l for l in res.stdout.splitlines() if l.startswith("child_pid=")]
        check(child and child[0].endswith("status=0"), res.stdout)
        child_pid = child[0].split()[0].split("=")[1]
        files = os.listdir(out)
        check(not any(f"_{child_pid}_" in f for f in files), f"child wrote files: {files}")
        rep = one_report(out, res)
        check(rep["run"]["pid"] != int(child_pid), "report written by the child")
        rows = [r for r in rep["steps"] if r["device"] == 0]
        check(len(rows) == 8, f"{len(rows)} steps in the parent's report")
        print("ok: the fork child wrote nothing; the parent's report has its 8 steps")


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


def long_loop(out: str, sig: int, args=("--sleep-ms=10",), **extra_env):
    _, _, _, driver = paths()
    env = base_env(out, GPUACCT_FLUSH_MS="20")
    env.update(extra_env)
    p = subprocess.Popen([driver, "--mode=loop", "--steps=100000", *args], env=env,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        ok = wait_for(lambda: len(jsonl_rows(out)[1]) >= 3, 30)
        check(ok, "no streamed rows within 30 s")
        p.send_signal(sig)
        _, err = p.communicate(timeout=30)
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
    return p.returncode, err


def case_sigterm() -> None:
    with tempfile.TemporaryDirectory() as out:
        rc, err = long_loop(out, signal.SIGTERM)
        check(rc == -signal.SIGTERM, f"exit status {rc}, expected death by SIGTERM\n{err}")
        rep = one_report(out)
        check(len(rep["steps"]) >= 3, f"{len(rep['steps'])} steps in the report")
        _, rows = jsonl_rows(out)
        check(len(rows) >= len(rep["steps"]) - 1, "stream and report disagree")
        print(f"ok: SIGTERM -> report with {len(rep['steps'])} steps, process died by SIGTERM")


def case_sigkill() -> None:
    with tempfile.TemporaryDirectory() as out:
        rc, _ = long_loop(out, signal.SIGKILL)
        check(rc == -signal.SIGKILL, f"exit status {rc}")
        check(not reports(out), "no report can exist after SIGKILL")
        path, rows = jsonl_rows(out)
        check(path is not None and len(rows) >= 3, "JSONL rows survive SIGKILL")
        check([r["step_index"] for r in rows] == list(range(len(rows))), "rows in order")
        print(f"ok: SIGKILL left {len(rows)} parseable JSONL rows")


def case_busy() -> None:
    # CUPTI completes a buffer every few tens of milliseconds (small buffers), more often than
    # the flush period: the worker must still tick every period (stream rows, drain the host
    # rings), not only parse.  The sim produces records as fast as the CPU allows, with no GPU
    # pacing: the pool gets 64 MiB of headroom so a CPU-starved worker on a loaded box does not
    # turn into refused buffers (the pool_cap case tests the cap on purpose).
    with tempfile.TemporaryDirectory() as out:
        rc, err = long_loop(out, signal.SIGTERM, ("--kernels=200", "--sleep-ms=2"),
                            GPUACCT_FLUSH_MS="500", GPUACCT_BUFFER_MB="1",
                            GPUACCT_BUFFER_COUNT="64")
        check(rc == -signal.SIGTERM, f"exit status {rc}, expected death by SIGTERM\n{err}")
        rep = one_report(out)
        check(stat(rep, "host_records_dropped") == 0, str(rep["stats"]))
        check(stat(rep, "cupti_records_dropped") == 0, str(rep["stats"]))
        _, rows = jsonl_rows(out)
        print(f"ok: rows streamed while buffers completed back to back ({len(rows)} rows)")


def case_bad_env() -> None:
    with tempfile.TemporaryDirectory() as out:
        res = scenario_with(out, GPUACCT_FLUSH_MS="abc", GPUACCT_BUFFER_MB="-1",
                            GPUACCT_WARMUP_STEPS="lots", GPUACCT_ENABLE="perhaps",
                            GPUACCT_OUTPUT_PATTERN="a/b")
        for var, default in (("GPUACCT_FLUSH_MS", "100"), ("GPUACCT_BUFFER_MB", "4"),
                             ("GPUACCT_WARMUP_STEPS", "2"), ("GPUACCT_ENABLE", "1")):
            lines = [l for l in res.stderr.splitlines() if l.startswith(f"gpuacct: {var}=")]
            check(len(lines) == 1, f"one warning for {var} expected:\n{res.stderr}")
            check(lines[0].endswith(f"using {default}"), lines[0])
        check("GPUACCT_OUTPUT_PATTERN" in res.stderr, res.stderr)
        rep = one_report(out, res)
        check(rep["summary"]["warmup_steps"] == 2 and rep["summary"]["steps"] == 18,
              str(rep["summary"]))
        check(rep["collection"]["gpu"] == "active", str(rep["collection"]))
        print("ok: one warning per bad variable, defaults used, run accounted")


def case_no_cupti() -> None:
    with tempfile.TemporaryDirectory() as out:
        res = scenario_with(out, GPUACCT_CUPTI_LIBRARY="/nonexistent/libcupti.so.13")
        gpu_off_line(res.stderr, "CUPTI not found (")
        rep = one_report(out)
        check(rep["collection"]["gpu"] == "no_cupti", str(rep["collection"]))
        host_only_report(rep, 20)
        print("ok: CUPTI missing -> one line, host-only report")


def case_real_cupti() -> None:
    real = "/usr/local/cuda/lib64/libcupti.so.13"
    check(os.path.exists(real), f"{real} missing")
    with tempfile.TemporaryDirectory() as out:
        res = scenario_with(out, GPUACCT_CUPTI_LIBRARY=real)
        gpu_off_line(res.stderr, "cuptiSubscribe failed")
        rep = one_report(out)
        check(rep["collection"]["gpu"] == "cupti_failed", str(rep["collection"]))
        check(rep["collection"]["cupti_version"] >= 130000, str(rep["collection"]))
        host_only_report(rep, 20)
        print("ok: real CUPTI without a driver -> stepped aside, host-only report")


def case_nocuda() -> None:
    lib, _, _, driver = paths()
    with tempfile.TemporaryDirectory() as out:
        # The driver links the sim's libcuda, whose clock is the process's CLOCK_REALTIME: the
        # hybrid clock lets the real sleeps count.
        env = base_env(out, LD_PRELOAD=lib, GPUACCT_SIM_CLOCK="hybrid")
        del env["CUDA_INJECTION64_PATH"]  # the library sets it itself at load
        res = run([driver, "--mode=nocuda", "--steps=6", "--sleep-ms=5"], env)
        check("loaded=1" in res.stdout, res.stdout)
        rep = one_report(out, res)
        host_only_report(rep, 6)
        for r in rep["steps"]:
            check(r["categories"]["data_wait"] >= 4_500_000, f"data wait {r['categories']}")
        print("ok: LD_PRELOAD without CUDA -> host ranges, 'no GPU activity'")


def case_enable_off() -> None:
    # GPUACCT_ENABLE=False (any spelling config.cc accepts): the load constructor must leave
    # CUDA_INJECTION64_PATH alone, as docs/configuration.md says.
    lib, _, _, driver = paths()
    for value in ("0", "False", " OFF ", "no"):
        with tempfile.TemporaryDirectory() as out:
            env = base_env(out, LD_PRELOAD=lib, GPUACCT_ENABLE=value)
            del env["CUDA_INJECTION64_PATH"]
            res = run([driver, "--mode=nocuda", "--steps=2"], env)
            check("cuda_injection=\n" in res.stdout,
                  f"GPUACCT_ENABLE={value!r} still set CUDA_INJECTION64_PATH:\n{res.stdout}")
    print("ok: GPUACCT_ENABLE off leaves the injection variables alone")


def case_record() -> None:
    with tempfile.TemporaryDirectory() as out:
        scenario_with(out, GPUACCT_RECORD="1")
        recs = glob.glob(os.path.join(out, "*.gpuacct"))
        check(len(recs) == 1, f"recording missing: {os.listdir(out)}")
        with open(recs[0], "rb") as f:
            check(f.read(8) == b"GPUACCT\x01", "recording magic")
        cli = os.path.join(BUILD, "bin", "gpuacct")
        if os.path.exists(cli):
            res = run([cli, "analyze", recs[0], "--out", os.path.join(out, "re")],
                      dict(os.environ), expect_rc=None)
            check(res.returncode == 0, f"gpuacct analyze failed:\n{res.stdout}\n{res.stderr}")
            again = glob.glob(os.path.join(out, "re", "*.report.json"))
            check(len(again) == 1, f"no re-analysed report: {res.stderr}")
            with open(again[0]) as f:
                re_rep = json.load(f)
            check(len(re_rep["steps"]) == 20, f"{len(re_rep['steps'])} steps re-analysed")
        print("ok: recording written" + (" and re-analysed" if os.path.exists(cli) else ""))


def case_same_steps() -> None:
    """One recording, three pipelines: the live library's report, `gpuacct analyze` of its
    recording and `gpuacct timeline` of it give the same steps (detected or marked), warm-up and
    rows -- the front door and the live pipeline hand detected steps to the accountant the same
    way."""
    cli = os.path.join(BUILD, "bin", "gpuacct")
    check(os.path.exists(cli), f"missing build output {cli}")
    for marks in ("none", "capi"):
        with tempfile.TemporaryDirectory(prefix="gpuacct_e2e_") as out:
            scenario_with(out, "data_bound", marks, GPUACCT_RECORD="1")
            live = one_report(out)
            recs = glob.glob(os.path.join(out, "*.gpuacct"))
            check(len(recs) == 1, f"recording missing: {os.listdir(out)}")
            run([cli, "analyze", recs[0], "--out", os.path.join(out, "re")],
                dict(os.environ))
            again = glob.glob(os.path.join(out, "re", "*.report.json"))
            check(len(again) == 1, f"no re-analysed report in {os.listdir(out)}")
            with open(again[0]) as f:
                offline = json.load(f)
            tl_path = os.path.join(out, "timeline.json")
            run([cli, "timeline", recs[0], "-o", tl_path], dict(os.environ))
            with open(tl_path) as f:
                tl = json.load(f)
            events = tl["traceEvents"] if isinstance(tl, dict) else tl
            slices = sorted((e for e in events if e.get("cat") == "gpuacct_step"),
                            key=lambda e: e["args"]["step_index"])

            def key(r):
                return (r["step_index"], r["device"], r["window_begin_ns"], r["window_end_ns"],
                        r["warmup"], r["launches"], r["categories"])
            live_rows = [key(r) for r in live["steps"]]
            check(len(live_rows) >= 10, f"{marks}: {len(live_rows)} live rows")
            check(live_rows == [key(r) for r in offline["steps"]],
                  f"{marks}: the live rows differ from `analyze` of the recording")
            check(live["summary"] == offline["summary"] and live["verdict"] == offline["verdict"],
                  f"{marks}: the live summary differs from `analyze` of the recording")
            live_stats = {s["name"]: s["value"] for s in live["stats"]}
            offline_stats = {s["name"]: s["value"] for s in offline["stats"]}
            check(live_stats == offline_stats,
                  f"{marks}: counters differ live vs analyze: " + str(
                      {k: (v, offline_stats.get(k)) for k, v in live_stats.items()
                       if offline_stats.get(k) != v}))
            check(live.get("step_detection") == offline.get("step_detection"),
                  f"{marks}: step_detection live {live.get('step_detection')} offline "
                  f"{offline.get('step_detection')}")
            rows0 = [r for r in live["steps"] if r["device"] == 0]
            check(len(slices) == len(rows0),
                  f"{marks}: {len(slices)} timeline steps, {len(rows0)} live rows")
            # Relative times (absolute ns do not fit a double's precision in microseconds).
            origin_us = slices[0]["ts"]
            begin0 = rows0[0]["window_begin_ns"]
            for s_, r in zip(slices, rows0):
                a = s_["args"]
                check(a["step_index"] == r["step_index"]
                      and ("warm-up" in s_["name"]) == r["warmup"]
                      and abs(s_["ts"] - origin_us - (r["window_begin_ns"] - begin0) / 1e3) < 0.002
                      and abs(s_["dur"] - r["duration_ns"] / 1e3) < 0.002
                      and abs(a["compute_us"] - r["walls"]["compute"] / 1e3) < 0.002
                      and abs(a["other_us"] - r["walls"]["other"] / 1e3) < 0.002,
                      f"{marks}: timeline step {s_} differs from live row {r}")
            print(f"ok: {marks}: {len(live_rows)} rows, live = analyze = timeline")


def read_utf8_json_lines(path: str) -> list:
    """Every line of a JSONL file, decoded as strict UTF-8 (a byte that is not UTF-8 fails)."""
    with open(path, encoding="utf-8", errors="strict") as f:
        return [json.loads(l) for l in f.read().splitlines() if l.strip()]


def case_latin1_names() -> None:
    """Bytes that are not UTF-8 from outside never cost a report: a program started under a
    Latin-1 file name (argv[0] = b"scen\\xe9narios", which also reaches the command line and
    the main module's name in native call sites), writing into a Latin-1 directory, with and
    without a recording.  Every output is strict UTF-8 JSON, the byte reads "\\xE9", the stream
    has its trailer, nothing is left behind, and `analyze` of the recording agrees."""
    _, _, sim_bin, _ = paths()
    cli = os.path.join(BUILD, "bin", "gpuacct")
    for record in ("0", "1"):
        with tempfile.TemporaryDirectory(prefix="gpuacct_e2e_") as tmp:
            out = os.path.join(tmp, os.fsdecode(b"out\xe9"))
            os.mkdir(out)
            prog = os.path.join(tmp, os.fsdecode(b"scen\xe9narios"))
            os.symlink(os.path.join(sim_bin, "sim_scenario_data_bound"), prog)
            res = run([prog, "--marks=capi"], base_env(out, GPUACCT_RECORD=record))
            check("internal error" not in res.stderr, f"record={record}: {res.stderr}")
            found = reports(out)
            check(len(found) == 1, f"record={record}: no report: {os.listdir(out)}\n{res.stderr}")
            with open(found[0], encoding="utf-8", errors="strict") as f:
                rep = json.load(f)
            check("scen\\xE9narios" in rep["run"]["command"], f"command {rep['run']['command']!r}")
            check(len(rep["steps"]) == 20, f"{len(rep['steps'])} steps in the report")
            check("\ufffd" not in json.dumps(rep, ensure_ascii=False),
                  "a byte was replaced instead of written as \\xHH")
            streams = glob.glob(os.path.join(out, "*.steps.jsonl"))
            check(len(streams) == 1, f"stream missing: {os.listdir(out)}")
            lines = read_utf8_json_lines(streams[0])
            check(lines[-1].get("provisional") is False, f"no trailer: {lines[-1]}")
            left = [f for f in os.listdir(out) if ".tmp." in f]
            check(not left, f"left behind: {left}")
            recs = glob.glob(os.path.join(out, "*.gpuacct"))
            check(len(recs) == int(record), f"record={record}: recordings {os.listdir(out)}")
            if recs and os.path.exists(cli):
                re_dir = os.path.join(out, "re")
                # Bytes: the CLI names the files it wrote, Latin-1 path and all, on stderr.
                res = subprocess.run([cli, "analyze", recs[0], "--out", re_dir],
                                     capture_output=True, timeout=120)
                check(res.returncode == 0, f"gpuacct analyze: {res.stderr!r}")
                again = glob.glob(os.path.join(re_dir, "*.report.json"))
                check(len(again) == 1, f"no re-analysed report in {os.listdir(re_dir)}")
                with open(again[0], encoding="utf-8", errors="strict") as f:
                    offline = json.load(f)
                check(offline["run"]["command"] == rep["run"]["command"],
                      f"command live {rep['run']['command']!r}, "
                      f"analyze {offline['run']['command']!r}")
                check(len(offline["steps"]) == 20, f"{len(offline['steps'])} steps re-analysed")
    # Names from the host rings (C-API data and user ranges) and from the driver (the kernel),
    # with the terminal summary on: the same \\xHH text in the report, the recording's
    # re-analysis and its timeline; no raw control byte reaches the terminal.
    _, _, _, driver = paths()
    with tempfile.TemporaryDirectory(prefix="gpuacct_e2e_") as out:
        env = base_env(out, GPUACCT_RECORD="1")
        del env["GPUACCT_QUIET"]
        res = subprocess.run([driver, "--mode=loop", "--steps=6", "--latin1-names"], env=env,
                             capture_output=True, timeout=120)
        check(res.returncode == 0 and b"internal error" not in res.stderr, repr(res.stderr))
        check(b"\x1b" not in res.stderr, f"a control byte reached the terminal: {res.stderr!r}")
        rep = one_report(out)
        kernels = [k["name"] for k in rep["top_kernels"]]
        check(kernels == ["k\\xE9rnel_\\xC3"], f"top kernels {kernels}")
        contexts = {g["host_context"] for g in rep["largest_idle_gaps"]}
        check("donn\\xE9es" in contexts, f"idle gap host contexts {contexts}")
        recs = glob.glob(os.path.join(out, "*.gpuacct"))
        check(len(recs) == 1, f"recording missing: {os.listdir(out)}")
        tl_path = os.path.join(out, "timeline.json")
        res = subprocess.run([cli, "timeline", recs[0], "-o", tl_path], capture_output=True,
                             timeout=120)
        check(res.returncode == 0, f"gpuacct timeline: {res.stderr!r}")
        with open(tl_path, encoding="utf-8", errors="strict") as f:
            names = {e.get("name") for e in json.load(f)["traceEvents"]}
        for want in ("k\\xE9rnel_\\xC3", "donn\\xE9es", "user\x1b[31m\\xFF"):
            check(want in names, f"{want!r} not among the timeline's names")
    print("ok: a Latin-1 program name and output directory: report, stream trailer and "
          "recording written, the byte as \\xE9; range and kernel names alike everywhere")


CASES = {
    "subscribe_refused": case_subscribe_refused, "drop": case_drop,
    "buffer_refused": case_buffer_refused, "pool_cap": case_pool_cap, "fork": case_fork,
    "sigterm": case_sigterm, "sigkill": case_sigkill, "busy": case_busy, "bad_env": case_bad_env,
    "no_cupti": case_no_cupti, "real_cupti": case_real_cupti, "nocuda": case_nocuda,
    "record": case_record, "enable_off": case_enable_off, "same_steps": case_same_steps,
    "latin1_names": case_latin1_names,
}


def main() -> int:
    global BUILD, LIBRARY
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", required=True)
    ap.add_argument("--library", default="", help="libgpuacct.so to test (default: the build's)")
    ap.add_argument("case")
    a = ap.parse_args()
    BUILD = os.path.abspath(a.build)  # the library records its own path only when absolute
    LIBRARY = os.path.abspath(a.library) if a.library else ""
    try:
        if a.case.startswith("scenario:"):
            _, name, marks, *rest = a.case.split(":", 3)
            extra = dict(kv.split("=", 1) for kv in rest[0].split(",")) if rest else {}
            case_scenario(name, marks, extra)
        else:
            CASES[a.case]()
    except Fail as e:
        print(f"FAIL {a.case}: {e}")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
