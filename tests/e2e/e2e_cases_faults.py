"""Fault and lifecycle cases of run_e2e.py: CUPTI taken, missing or failing, records dropped,
buffers refused or capped, fork, SIGTERM and SIGKILL, a busy worker, bad environment variables,
no CUDA, GPUACCT_ENABLE off, a recording, links planted in a shared output directory, and
names that are not UTF-8.
"""

from __future__ import annotations

import glob
import json
import os
import signal
import subprocess
import tempfile

import e2e_harness
from e2e_harness import (
    check, paths, base_env, run, reports, one_report, stat, scenario_with, jsonl_rows, long_loop,
    read_utf8_json_lines)
from e2e_compare import row_key


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


def gpu_stepped_aside(env: dict, line: str, gpu_state: str) -> dict:
    """Runs the scenario with `env`: GPU collection must step aside with one line holding
    `line`, the report's collection.gpu be `gpu_state`, and the rows be host-only."""
    with tempfile.TemporaryDirectory() as out:
        res = scenario_with(out, **env)
        gpu_off_line(res.stderr, line)
        rep = one_report(out)
        check(rep["collection"]["gpu"] == gpu_state, str(rep["collection"]))
        host_only_report(rep, 20)
        return rep


def case_subscribe_refused() -> None:
    gpu_stepped_aside({"GPUACCT_SIM_FAULTS": "subscribe_refused"}, "another CUPTI client",
                      "other_subscriber")
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


def case_untimed_records() -> None:
    # Real CUPTI may deliver a finished kernel's record with 0 timestamps mid-run ("no timing
    # information could be collected for lack of device memory": cupti_activity.h,
    # cuptiActivityGetNextRecord).  That kernel's time is missing from its step: data loss,
    # not a skipped bad record (the library before counted it as cupti_records_incomplete,
    # severity error, and the report claimed no data loss).
    every = 7
    with tempfile.TemporaryDirectory() as out:
        truth_path = os.path.join(out, "truth.json")
        scenario_with(out, GPUACCT_SIM_FAULTS=f"untimed_every={every}",
                      GPUACCT_SIM_TRUTH=truth_path)
        rep = one_report(out)
        with open(truth_path) as f:
            truth = json.load(f)
        untimed = truth["kernels_total"] // every  # data_bound: kernels are its only GPU ops
        check(rep["data_loss"] is True, f"data_loss must be set: {rep['stats']}")
        check(stat(rep, "cupti_records_untimed") == untimed,
              f"{stat(rep, 'cupti_records_untimed')} untimed records counted, {untimed} made")
        check(stat(rep, "cupti_records_incomplete") == 0, str(rep["stats"]))
        # Each untimed kernel (1 ms in data_bound) is compute missing from the rows, no more.
        kernel_ns = truth["params"]["kernel_ns"]
        rows = rep["steps"]
        check(len(rows) == truth["num_steps"], f"{len(rows)} rows")
        got = sum(r["categories"]["compute"] for r in rows)
        want = sum(t["expected_ns"]["compute"] for t in truth["steps"]) - untimed * kernel_ns
        check(got == want, f"compute {got} ns, expected {want} ns")
        print(f"ok: {untimed} untimed kernel records counted as data loss; compute short by "
              f"exactly their {untimed * kernel_ns} ns")


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
    """A job killed with SIGKILL mid-run (the OOM killer, a hard time limit) leaves its step
    stream and its recording as <base>.gpuacct.tmp.<pid>: `gpuacct analyze` of the recording and
    `gpuacct report` of the stream give every step finished before the kill, the same rows the
    live run streamed, each the step the driver ran (5 kernels of 1 ms after 10 ms of data),
    none invented, and say what was cut."""
    cli = os.path.join(e2e_harness.BUILD, "bin", "gpuacct")
    check(os.path.exists(cli), f"missing build output {cli}")
    with tempfile.TemporaryDirectory() as out:
        rc, _ = long_loop(out, signal.SIGKILL, rows=12, GPUACCT_RECORD="1")
        check(rc == -signal.SIGKILL, f"exit status {rc}")
        check(not reports(out), "no report can exist after SIGKILL")
        path, rows = jsonl_rows(out)
        check(path is not None and len(rows) >= 12, "JSONL rows survive SIGKILL")
        check([r["step_index"] for r in rows] == list(range(len(rows))), "rows in order")
        tmp = glob.glob(os.path.join(out, "*.gpuacct.tmp.*"))
        check(len(tmp) == 1, f"the killed recording: {os.listdir(out)}")

        # The recording, up to its last whole chunk.
        res = run([cli, "analyze", tmp[0], "--out", os.path.join(out, "re")], dict(os.environ))
        check("the recording was not finished" in res.stderr, f"no line on the cut:\n{res.stderr}")
        again = glob.glob(os.path.join(out, "re", "*.report.json"))
        check(len(again) == 1, f"no re-analysed report: {res.stderr}")
        with open(again[0]) as f:
            offline = json.load(f)
        check(stat(offline, "inputs_cut_off") == 1 and offline["data_loss"] is True,
              str(offline["stats"]))
        check(offline["cut_off"]["input"] == "recording", str(offline.get("cut_off")))
        got = offline["steps"]
        # The recording reaches the disk before the rows of each watermark are streamed: it
        # has every streamed row, and at most the rows of the watermark the kill interrupted.
        check([row_key(r) for r in got[:len(rows)]] == [row_key(r) for r in rows],
              f"`analyze` of the killed recording differs from the streamed rows "
              f"({len(got)} vs {len(rows)} rows)")
        check(len(got) <= len(rows) + 3, f"{len(got)} rows from the recording, {len(rows)} streamed")
        for r in got:  # the truth: every step the driver ran is 5 launches of a 1 ms kernel
            check(r["kernels"] == 5 and r["launches"] == 5 and
                  abs(r["categories"]["compute"] - 5_000_000) < 50_000, f"row {r}")

        # The stream: every row, with the one C++ summary.
        res = run([cli, "report", path], dict(os.environ))
        check("no closing summary line" in res.stderr, f"no line on the cut:\n{res.stderr}")
        warm = sum(1 for r in rows if r["warmup"])
        check(f"gpuacct - {len(rows) - warm} steps (+{warm} warm-up left out)" in res.stdout,
              f"`gpuacct report` of the stream with {len(rows)} rows:\n{res.stdout}")
        check("data loss: inputs whose writer was killed" in res.stdout, res.stdout)
        res = run([cli, "analyze", path, "--no-files", "--json"], dict(os.environ))
        streamed = json.loads(res.stdout)
        check([row_key(r) for r in streamed["steps"]] == [row_key(r) for r in rows],
              "`analyze` of the stream differs from its rows")
        check(streamed["summary"]["rows"] == len(rows) - warm, str(streamed["summary"]))
        print(f"ok: SIGKILL left {len(rows)} streamed rows; `analyze` of the cut recording gives "
              f"{len(got)} (the streamed ones and {len(got) - len(rows)} more), `report` of the "
              f"stream summarises all {len(rows)}")


def case_planted_links() -> None:
    """GPUACCT_OUTPUT_DIR a sticky world-writable directory (a shared /tmp) and the output
    names predictable: another user plants <base>.report.json, <base>.steps.jsonl and
    <base>.gpuacct as links to a file of ours (fs.protected_symlinks off) and <base>.report.json
    as a file of their own.
    The library never writes through a link or into another user's file: the victim is
    untouched, the planted names too, every output goes to a fresh name, one line each on
    stderr.  Before, the report replaced the victim and the stream truncated it."""
    with tempfile.TemporaryDirectory(prefix="gpuacct_e2e_") as top:
        out = os.path.join(top, "shared")
        os.mkdir(out)
        os.chmod(out, 0o1777)
        victim = os.path.join(top, "victim.txt")
        planted = {"job.report.json": victim, "job.steps.jsonl": victim, "job.gpuacct": victim}
        for runs in range(2):
            with open(victim, "w") as f:
                f.write("precious")
            for name, target in planted.items():
                os.symlink(target, os.path.join(out, name))
            theirs = os.path.join(out, "job-1.report.json")
            if runs == 1 and os.geteuid() == 0:  # a file another user owns, beside the link
                with open(theirs, "w") as f:
                    f.write("theirs")
                os.chown(theirs, 65534, 65534)
            res = scenario_with(out, GPUACCT_RECORD="1", GPUACCT_OUTPUT_PATTERN="job")
            with open(victim) as f:
                check(f.read() == "precious", "the victim was written through a planted link")
            for name in planted:
                check(os.path.islink(os.path.join(out, name)), f"the planted {name} was replaced")
            fresh = "job-2" if runs == 1 and os.geteuid() == 0 else "job-1"
            lines = [l for l in res.stderr.splitlines() if "not followed or written" in l]
            check(len(lines) == 3, f"one line per planted output expected:\n{res.stderr}")
            for ext in (".report.json", ".steps.jsonl", ".gpuacct"):
                stem = fresh if ext == ".report.json" else "job-1"
                path = os.path.join(out, stem + ext)
                check(os.path.isfile(path) and not os.path.islink(path), f"no {path}: {os.listdir(out)}")
                check(any(l.endswith(f"writing {path} instead") for l in lines),
                      f"no line names {path}:\n{res.stderr}")
            with open(os.path.join(out, fresh + ".report.json")) as f:
                rep = json.load(f)
            check(len(rep["steps"]) == 20, f"{len(rep['steps'])} steps in the report")
            if fresh == "job-2":
                with open(theirs) as f:
                    check(f.read() == "theirs", "another user's file was replaced")
            for name in os.listdir(out):
                os.remove(os.path.join(out, name))
        print("ok: planted links and another user's file left alone; report, stream and "
              "recording under fresh names, one line each")


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
    gpu_stepped_aside({"GPUACCT_CUPTI_LIBRARY": "/nonexistent/libcupti.so.13"},
                      "CUPTI not found (", "no_cupti")
    print("ok: CUPTI missing -> one line, host-only report")


def case_real_cupti() -> None:
    real = "/usr/local/cuda/lib64/libcupti.so.13"
    check(os.path.exists(real), f"{real} missing")
    rep = gpu_stepped_aside({"GPUACCT_CUPTI_LIBRARY": real}, "cuptiSubscribe failed",
                            "cupti_failed")
    check(rep["collection"]["cupti_version"] >= 130000, str(rep["collection"]))
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
        cli = os.path.join(e2e_harness.BUILD, "bin", "gpuacct")
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


def case_latin1_names() -> None:
    """Bytes that are not UTF-8 from outside never cost a report: a program started under a
    Latin-1 file name (argv[0] = b"scen\\xe9narios", which also reaches the command line and
    the main module's name in native call sites), writing into a Latin-1 directory, with and
    without a recording.  Every output is strict UTF-8 JSON, the byte reads "\\xE9", the stream
    has its trailer, nothing is left behind, and `analyze` of the recording agrees."""
    _, _, sim_bin, _ = paths()
    cli = os.path.join(e2e_harness.BUILD, "bin", "gpuacct")
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
