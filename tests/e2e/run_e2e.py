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
  no_cupti, real_cupti, nocuda, record, enable_off, planted_links
                                    fault and lifecycle cases
  latin1_names                      bytes that are not UTF-8 in argv[0] and the output path
  same_steps                        live = analyze = timeline on one run's recording
  same_steps_recorded_settings      the same with GPUACCT_WARMUP_STEPS=0 and both thresholds
                                    changed: analyze takes them from the recording; a flag given
                                    wins and says so
  late_gpu_records                  GPU records delivered 3.1 s late: every step still exact
  late_graph_records                graph launches whose kernels come 3.1 s late: the rows of the
                                    same program with records on time
  first_mark                        the first mark (it starts the library) keeps its time
  declared_work                     work declared per step (gpuacct_set_step_work, varying):
                                    rows, summary and cost.work match the planted sums, live =
                                    step stream = `gpuacct analyze` of the recording
  sampled                           GPUACCT_SAMPLE=5: traced rows = a full run's, the others
                                    host-side only, the summary says what was sampled
  thread_ids_system, thread_ids_pthread, thread_ids_pthread_nostacks
                                    each step on a new thread (pthread ids reused), exact, with
                                    SYSTEM thread ids and with them refused

The cases are in e2e_cases_truth.py and e2e_cases_faults.py; the simulated program and its
environment in e2e_harness.py, the expected values in e2e_oracle.py, the comparisons of one
run's outputs in e2e_compare.py.  The names other tests use (run_e2e.base_env, run_e2e.Fail,
run_e2e.compare_pipelines, run_e2e.BUILD, ...) are all here.
"""

from __future__ import annotations

import argparse
import os
import sys

import e2e_harness
from e2e_harness import (
    SIM_DEVICE_MEMORY, PRELOADED_SCENARIOS, FIRST_MARK_TOL_NS, Fail, run_case_main, check, paths,
    base_env, run, reports, one_report, stat, scenario_with, wait_for, jsonl_rows, long_loop,
    read_utf8_json_lines)
from e2e_oracle import TOL, BANDS, expected_verdict, planted_work, expected_work
from e2e_compare import check_stream_summaries, row_key, compare_pipelines, check_settings_override
from e2e_cases_faults import (
    gpu_off_line, host_only_report, case_subscribe_refused, case_drop, case_buffer_refused,
    case_untimed_records, case_pool_cap, case_fork, case_sigterm, case_sigkill,
    case_planted_links, case_busy, case_bad_env, case_no_cupti, case_real_cupti, case_nocuda,
    case_enable_off, case_record, case_latin1_names)
from e2e_cases_truth import (
    case_scenario, case_thread_ids, case_first_mark, case_declared_work, case_same_steps,
    case_late_gpu_records, case_late_graph_records, case_held_buffers, case_sampled)

# Every name this file had before its helpers and cases moved out: other tests use them
# (run_e2e.base_env, run_e2e.compare_pipelines, from run_e2e import Fail, check, ...).
__all__ = [
    "SIM_DEVICE_MEMORY", "PRELOADED_SCENARIOS", "FIRST_MARK_TOL_NS", "Fail", "run_case_main",
    "check", "paths", "base_env", "run", "reports", "one_report", "stat", "scenario_with",
    "wait_for", "jsonl_rows", "long_loop", "read_utf8_json_lines", "TOL", "BANDS",
    "expected_verdict", "planted_work", "expected_work", "check_stream_summaries", "row_key",
    "compare_pipelines", "check_settings_override", "gpu_off_line", "host_only_report",
    "case_subscribe_refused", "case_drop", "case_buffer_refused", "case_untimed_records",
    "case_pool_cap", "case_fork",
    "case_sigterm", "case_sigkill", "case_planted_links", "case_busy", "case_bad_env",
    "case_no_cupti", "case_real_cupti", "case_nocuda", "case_enable_off", "case_record",
    "case_latin1_names", "case_scenario", "case_thread_ids", "case_first_mark",
    "case_declared_work", "case_same_steps", "case_late_gpu_records", "case_late_graph_records",
    "case_held_buffers", "case_sampled"
]


CASES = {
    "subscribe_refused": case_subscribe_refused, "drop": case_drop,
    "buffer_refused": case_buffer_refused, "untimed_records": case_untimed_records,
    "pool_cap": case_pool_cap, "fork": case_fork,
    "sigterm": case_sigterm, "sigkill": case_sigkill, "busy": case_busy, "bad_env": case_bad_env,
    "no_cupti": case_no_cupti, "real_cupti": case_real_cupti, "nocuda": case_nocuda,
    "planted_links": case_planted_links,
    "record": case_record, "enable_off": case_enable_off, "same_steps": case_same_steps,
    "declared_work": case_declared_work,
    "late_gpu_records": case_late_gpu_records,
    "late_graph_records": case_late_graph_records,
    "held_buffers": case_held_buffers,
    "first_mark": case_first_mark,
    # The recording carries the thread ids the live run resolved.
    "same_steps_pthread_ids": lambda: case_same_steps(
        GPUACCT_SIM_FAULTS="error:cuptiSetThreadIdType"),
    # The recording carries the run's accounting settings: analyze and timeline use them.
    "same_steps_recorded_settings": lambda: case_same_steps(
        GPUACCT_WARMUP_STEPS="0", GPUACCT_LAUNCH_LATENCY_US="12", GPUACCT_HOST_PAUSE_US="40"),
    "thread_ids_system": lambda: case_thread_ids(pthread_ids=False, stacks=True),
    "thread_ids_pthread": lambda: case_thread_ids(pthread_ids=True, stacks=True),
    "thread_ids_pthread_nostacks": lambda: case_thread_ids(pthread_ids=True, stacks=False),
    "latin1_names": case_latin1_names,
    "sampled": case_sampled,
}


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", required=True)
    ap.add_argument("--library", default="", help="libgpuacct.so to test (default: the build's)")
    ap.add_argument("case")
    a = ap.parse_args()
    # The library records its own path only when absolute.
    e2e_harness.BUILD = os.path.abspath(a.build)
    e2e_harness.LIBRARY = os.path.abspath(a.library) if a.library else ""
    if a.case.startswith("scenario:"):
        _, name, marks, *rest = a.case.split(":", 3)
        extra = dict(kv.split("=", 1) for kv in rest[0].split(",")) if rest else {}
        return e2e_harness.run_case(a.case, lambda: case_scenario(name, marks, extra))
    if a.case not in CASES:
        ap.error(f"unknown case {a.case!r}")
    return e2e_harness.run_case(a.case, CASES[a.case])


if __name__ == "__main__":
    sys.exit(main())
