"""Comparisons of one run's outputs with each other: the step stream's summaries with the
report's, the live report with `gpuacct analyze` and `gpuacct timeline` of the run's recording
(shared with the differential fuzzer, tests/e2e/differential.py), and a flag given to
`analyze` against the recording's own setting.
"""

from __future__ import annotations

import glob
import json
import math
import os

import e2e_harness
from e2e_harness import check, run, one_report


def check_stream_summaries(out: str) -> str:
    """Every summary line of the run's step stream is the C++ summary of the rows before it,
    and the last one is the report's (tests/e2e/stream_summary_check.cc)."""
    streams = glob.glob(os.path.join(out, "*.steps.jsonl"))
    check(len(streams) == 1, f"expected one stream in {out}, found {os.listdir(out)}")
    checker = os.path.join(e2e_harness.BUILD, "tests", "e2e", "stream_summary_check")
    res = run([checker, streams[0]], os.environ.copy())
    with open(streams[0]) as f:
        last = json.loads(f.read().splitlines()[-1])
    rep = one_report(out)
    check(last.get("provisional") is False and last["summary"] == rep["summary"]
          and last["verdict"] == rep["verdict"], "the stream's last line is not the report's summary")
    return res.stdout.strip()


def row_key(r):
    return (r["step_index"], r["device"], r["warmup"], r["window_begin_ns"], r["window_end_ns"],
            r["launches"], r["kernels"], r["categories"])


def compare_pipelines(live: dict, offline: dict, tl, marks: str) -> None:
    """The live report against `gpuacct analyze` (offline) and `gpuacct timeline` (tl) of the
    same run's recording: the same rows, summary, verdict, counters and step detection, and one
    timeline step per row (step and device) with the row's window and walls (same_steps, and the
    differential fuzzer, tests/e2e/differential.py)."""
    events = tl["traceEvents"] if isinstance(tl, dict) else tl
    slices = sorted((e for e in events if e.get("cat") == "gpuacct_step"),
                    key=lambda e: e["args"]["step_index"])

    def key(r):
        return (r["step_index"], r["device"], r["window_begin_ns"], r["window_end_ns"],
                r["warmup"], r["launches"], r["categories"])
    live_rows = [key(r) for r in live["steps"]]
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
    # Change points are computed from the rows in the report stage (docs/change_points.md):
    # the same section live and offline.
    check("change_points" in live and live.get("change_points") == offline.get("change_points"),
          f"{marks}: change_points live {live.get('change_points')} offline "
          f"{offline.get('change_points')}")
    # The timeline has one step slice per row: process id = device (65535: host-only rows).
    rows = {(r["step_index"], r["device"]): r for r in live["steps"]}
    by_key = {(s_["args"]["step_index"], -1 if s_["pid"] == 65535 else s_["pid"]): s_
              for s_ in slices}
    check(len(slices) == len(by_key) and set(by_key) == set(rows),
          f"{marks}: timeline steps {sorted(by_key)} ({len(slices)} slices), live rows "
          f"{sorted(rows)}")
    if not rows:
        return
    # Relative times (absolute ns do not fit a double's precision in microseconds); a slice far
    # from the timeline's origin holds its time to the double's spacing there.
    origin_us = min(s_["ts"] for s_ in slices)
    begin0 = min(r["window_begin_ns"] for r in rows.values())
    for k, r in rows.items():
        s_ = by_key[k]
        a = s_["args"]
        tol = max(0.002, 2 * math.ulp(s_["ts"]))
        check(("warm-up" in s_["name"]) == r["warmup"]
              and abs(s_["ts"] - origin_us - (r["window_begin_ns"] - begin0) / 1e3) < tol
              and abs(s_["dur"] - r["duration_ns"] / 1e3) < 0.002
              and abs(a["compute_us"] - r["walls"]["compute"] / 1e3) < 0.002
              and abs(a["other_us"] - r["walls"]["other"] / 1e3) < 0.002,
              f"{marks}: timeline step {s_} differs from live row {r}")


def check_settings_override(cli: str, rec: str, out: str, live: dict, marks: str) -> None:
    """A flag given to `analyze` wins over the recording's own setting, and one line on stderr
    (and the report's accounting_settings section) says that it differs from the run's."""
    given = int(live["config"]["launch_latency_threshold_ns"]) // 1000 + 7
    res = run([cli, "analyze", rec, "--launch-latency-us", str(given), "--out",
               os.path.join(out, "flag")], dict(os.environ))
    notes = [l for l in res.stderr.splitlines() if "differ from the run's own" in l]
    check(len(notes) == 1 and "launch_latency_threshold_ns" in notes[0]
          and "host_pause" not in notes[0],
          f"{marks}: no one-line note of the overridden setting:\n{res.stderr}")
    with open(glob.glob(os.path.join(out, "flag", "*.report.json"))[0]) as f:
        rep = json.load(f)
    differ = rep.get("accounting_settings", {}).get("given_differ_from_run", {})
    check(rep["config"]["launch_latency_threshold_ns"] == given * 1000
          and rep["config"]["host_pause_threshold_ns"] == live["config"]["host_pause_threshold_ns"]
          and rep["config"]["warmup_steps"] == live["config"]["warmup_steps"]
          and differ.get("launch_latency_threshold_ns") == {
              "given": given * 1000, "run": live["config"]["launch_latency_threshold_ns"]},
          f"{marks}: the flag did not win alone: config {rep['config']}, section {differ}")
    print(f"ok: {marks}: --launch-latency-us {given} wins over the run's, one note: {notes[0]}")
