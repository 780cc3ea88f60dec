#!/usr/bin/env python3
"""Outputs under hostile conditions -- a full disk, simulated with the LD_PRELOAD shim
enospc_shim.c (no root, no tmpfs needed), or a file name too long to create: nothing is lost
without saying so, nothing incomplete gets a final name, the job runs on.

Each ctest runs one case:  run_diskfull.py --build <build dir> <case>

  library_report           the report cannot be written: "no report: ... No space left on
                           device", never "report written to"; no file, no temporary left
  library_stream_full      the step stream fills up for good: whole lines only, every lost row
                           counted in the report (stream_rows_lost, data_loss)
  library_stream_recovers  no space at first, then space again: the header is rewritten and a
                           gap line says which rows are missing
  library_recording_full   GPUACCT_RECORD=1 and the recording fills up: abandoned, said on
                           stderr, counted (recordings_abandoned); no .gpuacct, no .tmp left
  library_recording_header the recording's first write fails and later ones succeed: the file
                           (without its header) must never get the final name
  library_long_pattern     GPUACCT_OUTPUT_PATTERN gives a file name over NAME_MAX: one warning
                           line, the default pattern, a report (it was lost)
  cli_outputs              gpuacct analyze / timeline / synth on a full disk: exit 1, the
                           reason, no file under the final name and no temporary left
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import re
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "e2e"))
import e2e_harness  # noqa: E402  (BUILD, LIBRARY: the build every helper reads)
import run_e2e  # noqa: E402  (helpers: paths, base_env, run, reports, stat, Fail, check)
from run_e2e import check, stat  # noqa: E402

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

SHIM = ""
STEPS = 20  # rows of the data_bound scenario (one device)


def shim_env(out: str, match: str, nbytes: int = 0, recover_after: int | None = None,
             **extra: str) -> dict:
    env = run_e2e.base_env(out, GPUACCT_QUIET="0", **extra)
    env.update(LD_PRELOAD=SHIM, ENOSPC_SHIM_MATCH=match, ENOSPC_SHIM_BYTES=str(nbytes))
    if recover_after is not None:
        env["ENOSPC_SHIM_RECOVER_AFTER"] = str(recover_after)
    return env


def scenario(env: dict):
    _, _, sim_bin, _ = run_e2e.paths()
    return run_e2e.run([os.path.join(sim_bin, "sim_scenario_data_bound"), "--marks=capi"], env)


def no_temporaries(out: str) -> None:
    left = [f for f in os.listdir(out) if ".tmp" in f]
    check(not left, f"temporary files left behind: {left}")


def stream_lines(out: str):
    streams = glob.glob(os.path.join(out, "*.steps.jsonl"))
    check(len(streams) == 1, f"expected one stream, found {os.listdir(out)}")
    with open(streams[0]) as f:
        text = f.read()
    check(text.endswith("\n"), "the stream ends in a partial line")
    return [json.loads(line) for line in text.splitlines()]  # every line whole JSON


def one_report(out: str, res) -> dict:
    found = run_e2e.reports(out)
    check(len(found) == 1, f"expected one report, found {os.listdir(out)}\n{res.stderr}")
    with open(found[0]) as f:
        return json.load(f)


def case_library_report() -> None:
    with tempfile.TemporaryDirectory(prefix="gpuacct_diskfull_") as out:
        res = scenario(shim_env(out, ".json.tmp."))
        lines = [l for l in res.stderr.splitlines() if l.startswith("gpuacct:")]
        check(any("no report: cannot write" in l and "No space left on device" in l
                  for l in lines), f"no clear line about the lost report:\n{res.stderr}")
        check(not any("report written to" in l for l in lines),
              f"claims a report was written:\n{res.stderr}")
        check(not run_e2e.reports(out), f"a report exists: {os.listdir(out)}")
        check("verdict:" in res.stderr, "the terminal summary must still be printed")
        no_temporaries(out)
        print("ok: no report, said so; the summary on stderr is kept")


def case_library_stream_full() -> None:
    with tempfile.TemporaryDirectory(prefix="gpuacct_diskfull_") as out:
        res = scenario(shim_env(out, ".steps.jsonl", nbytes=3000))
        lines = stream_lines(out)
        rows = [l for l in lines if "step_index" in l]
        check(lines[0].get("schema") == "gpuacct.steps/1", f"no header: {lines[0]}")
        check(0 < len(rows) < STEPS, f"{len(rows)} rows fit in 3000 bytes?")
        check([r["step_index"] for r in rows] == list(range(len(rows))), "rows out of order")
        rep = one_report(out, res)
        lost = stat(rep, "stream_rows_lost")
        check(lost == STEPS - len(rows), f"{lost} rows counted lost, {STEPS - len(rows)} missing")
        check(rep["data_loss"] is True, "data_loss must be set")
        check("cannot write" in res.stderr and ".steps.jsonl" in res.stderr, res.stderr)
        check("data loss: per-step stream rows" in res.stderr, "the summary must say it")
        print(f"ok: {len(rows)} whole rows, {lost} lost and counted")


def case_library_stream_recovers() -> None:
    # No space at first (header and the first rows fail), then space again after 5 failures.
    with tempfile.TemporaryDirectory(prefix="gpuacct_diskfull_") as out:
        res = scenario(shim_env(out, ".steps.jsonl", nbytes=0, recover_after=5))
        lines = stream_lines(out)
        check(lines[0].get("schema") == "gpuacct.steps/1", f"header missing: {lines[0]}")
        gap = lines[1].get("gap")
        check(gap is not None, f"no gap line after the header: {lines[1]}")
        check(gap["rows_lost"] == 5 and gap["first_step_index"] == 0
              and gap["last_step_index"] == 4, f"gap {gap}")
        check("No space left on device" in gap["error"], str(gap))
        rows = [l for l in lines if "step_index" in l]
        check([r["step_index"] for r in rows] == list(range(5, STEPS)), "rows after the gap")
        check("summary" in lines[-1], "the trailer is the last line")
        rep = one_report(out, res)
        check(stat(rep, "stream_rows_lost") == 5 and rep["data_loss"] is True, str(rep["stats"]))
        check("can be written again; 5 step rows were lost" in res.stderr, res.stderr)
        # gpuacct.load counts the gap (it is not merged into the header).
        sys.path.insert(0, os.path.join(REPO, "python_shim"))
        from gpuacct.results import load
        run = load(glob.glob(os.path.join(out, "*.steps.jsonl"))[0])
        check(run.rows_lost == 5 and run.data_loss and "gap" not in run.report,
              f"gpuacct.load: rows_lost {run.rows_lost}, header {run.report}")
        print("ok: header rewritten, gap of 5 rows marked, stream resumed")


def case_library_recording_full() -> None:
    with tempfile.TemporaryDirectory(prefix="gpuacct_diskfull_") as out:
        res = scenario(shim_env(out, ".gpuacct.tmp.", nbytes=20000, GPUACCT_RECORD="1"))
        check(not glob.glob(os.path.join(out, "*.gpuacct")), f"recording kept: {os.listdir(out)}")
        no_temporaries(out)
        check("the recording is abandoned" in res.stderr
              and "No space left on device" in res.stderr, res.stderr)
        rep = one_report(out, res)
        check(stat(rep, "recordings_abandoned") == 1 and rep["data_loss"] is True,
              str(rep["stats"]))
        check("data loss: recordings abandoned" in res.stderr, "the summary must say it")
        check(len(rep["steps"]) == STEPS, "the accounting itself is complete")
        print("ok: recording abandoned, said and counted; report complete")


def case_library_recording_header() -> None:
    # The first write fails, every later one succeeds: a file without its header must never be
    # renamed to the final name (it was, with stdio's unchecked header write).
    with tempfile.TemporaryDirectory(prefix="gpuacct_diskfull_") as out:
        res = scenario(shim_env(out, ".gpuacct.tmp.", nbytes=0, recover_after=1,
                                GPUACCT_RECORD="1"))
        check(not glob.glob(os.path.join(out, "*.gpuacct")), f"recording kept: {os.listdir(out)}")
        no_temporaries(out)
        rep = one_report(out, res)
        check(stat(rep, "recordings_abandoned") == 1, str(rep["stats"]))
        print("ok: a recording that missed a write never gets its name")


def case_library_long_pattern() -> None:
    with tempfile.TemporaryDirectory(prefix="gpuacct_outputs_") as out:
        env = run_e2e.base_env(out, GPUACCT_OUTPUT_PATTERN="r{rank}_" + "x" * 300)
        res = scenario(env)
        lines = [l for l in res.stderr.splitlines() if "GPUACCT_OUTPUT_PATTERN" in l]
        check(len(lines) == 1 and "too long" in lines[0] and len(lines[0]) < 300,
              f"one short warning expected:\n{res.stderr}")
        rep = one_report(out, res)  # under the default name gpuacct_<host>_<pid>_rank0.json
        check(len(rep["steps"]) == STEPS, "report incomplete")
        print("ok: over-long pattern -> one warning, default name, report written")


def case_library_metrics_full() -> None:
    """The live metrics file (GPUACCT_PROM_DIR) on a full disk: one line, the metrics off, no
    file and no temporary left in the directory; the report has every step."""
    with tempfile.TemporaryDirectory(prefix="gpuacct_diskfull_") as out:
        prom = os.path.join(out, "prom")
        os.mkdir(prom)
        res = scenario(shim_env(out, ".prom.tmp.", GPUACCT_PROM_DIR=prom,
                                GPUACCT_PROM_PERIOD_MS="10"))
        lines = [l for l in res.stderr.splitlines() if "GPUACCT_PROM_DIR" in l]
        check(len(lines) == 1 and "No space left on device" in lines[0]
              and "live metrics (GPUACCT_PROM_DIR) are off" in lines[0],
              f"expected one line about the metrics:\n{res.stderr}")
        check(not os.listdir(prom), f"left in the metrics directory: {os.listdir(prom)}")
        rep = one_report(out, res)
        check(len(rep["steps"]) == STEPS, f"{len(rep['steps'])} rows in the report")
        no_temporaries(out)
        print("ok: one line, metrics off, nothing left behind; the report is whole")


def case_cli_outputs() -> None:
    cli = os.path.join(e2e_harness.BUILD, "bin", "gpuacct")
    sample = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "examples",
                          "data", "sample.gpuacct")
    with tempfile.TemporaryDirectory(prefix="gpuacct_diskfull_") as out:
        env = {k: v for k, v in os.environ.items() if not k.startswith("ENOSPC_")}
        env.update(LD_PRELOAD=SHIM, ENOSPC_SHIM_MATCH=out, ENOSPC_SHIM_BYTES="2000")
        for cmd in ([cli, "analyze", sample, "--out", out],
                    [cli, "timeline", sample, "-o", os.path.join(out, "t.json")],
                    [cli, "synth", "--preset", "demo", "-o", os.path.join(out, "s.gpuacct")]):
            res = run_e2e.run(cmd, env, expect_rc=None)
            check(res.returncode == 1, f"{cmd[1]} exited {res.returncode}\n{res.stderr}")
            check("No space left on device" in res.stderr, f"{cmd[1]}: {res.stderr}")
            check(not os.listdir(out), f"{cmd[1]} left {os.listdir(out)}")
        # A long run (40,000 steps, about 1 GB) stops at the first failed write: one line,
        # where it stopped, nothing left (it went on generating in memory until the OOM killer
        # came, leaving its .tmp).
        res = run_e2e.run([cli, "synth", "--preset", "demo", "--steps", "40000", "-o",
                           os.path.join(out, "long.gpuacct")], env, expect_rc=None)
        lines = res.stderr.strip().splitlines()
        check(res.returncode == 1 and len(lines) == 1 and "No space left on device" in lines[0],
              f"synth --steps 40000 exited {res.returncode}\n{res.stderr}")
        stopped = re.search(r"stopped at step (\d+) of 40000; nothing written", lines[0])
        check(stopped is not None and int(stopped.group(1)) < 1000, lines[0])  # a batch or two
        check(not os.listdir(out), f"synth --steps 40000 left {os.listdir(out)}")
        print("ok: analyze, timeline and synth fail cleanly on a full disk")


CASES = {
    "library_report": case_library_report,
    "library_stream_full": case_library_stream_full,
    "library_stream_recovers": case_library_stream_recovers,
    "library_recording_full": case_library_recording_full,
    "library_recording_header": case_library_recording_header,
    "library_long_pattern": case_library_long_pattern,
    "library_metrics_full": case_library_metrics_full,
    "cli_outputs": case_cli_outputs,
}


def main() -> int:
    global SHIM
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", required=True)
    ap.add_argument("--shim", required=True)
    ap.add_argument("case", choices=sorted(CASES))
    a = ap.parse_args()
    e2e_harness.BUILD = os.path.abspath(a.build)
    SHIM = os.path.abspath(a.shim)
    return e2e_harness.run_case(a.case, CASES[a.case])


if __name__ == "__main__":
    sys.exit(main())
