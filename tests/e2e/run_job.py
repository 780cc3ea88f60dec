#!/usr/bin/env python3
"""Simulated multi-rank jobs: N rank processes of tests/e2e/job_driver on the simulated device
and the fake NCCL (tests/sim/fake_nccl), with libgpuacct.so injected by the fake driver as in
run_e2e.py.  One ctest per case:  run_job.py --build <build dir> <case> [--keep DIR]

  hosts       8 ranks on 2 simulated hosts (h0: ranks 0-3, clock -5 ms; h1: ranks 4-7, +5 ms)
              with +-50 us of per-host clock jitter (ranks of a host share one clock)
  straggler   8 ranks on 2 hosts (as above); rank 2 waits 15 ms for data every step (the
              others 2 ms)
  straggler_nvtx
              the same with steps and data waits marked through NVTX instead of the C API
  slow_link   8 ranks; rank 5's link is 2x slower (every rank's transfers take twice as long),
              and the same job without it
  slow_link_every
              8 ranks; every rank's link 3x slower on every 10th step only, and the same job
              without it: the link blamed on those steps, the what-if the job without it
  balanced    8 ranks, nobody slow: no rank stands out, no link, what-if = job step
  straggler_share
              rank 2 waits 15 ms for data on 3 of every 5 steps: its share of last arrivals
              and its lateness against the truth
  rank_folders
              the straggler job, each rank's default outputs in its own folder (pattern
              "report"), and as an older library named its report (report.json)
  hosts_inferred
              8 ranks on 2 hosts, host names stripped: hosts from clock offsets, the device
              layout, both, or unknown
  slow_gpu    8 ranks; rank 6's kernels take 1.3x as long
  tp          8 ranks in tensor-parallel pairs (4 TP communicators) and 2 data-parallel
              communicators of 4, with --mix: several communicators per rank
  no_plugin   the straggler job without an NCCL profiler plugin (rows by kernel order)
  plugin_v3, plugin_v4, plugin_v5
              4 ranks with --mix (AllGather, ReduceScatter, Send/Recv too), libgpuacct.so as
              NCCL_PROFILER_PLUGIN, the fake NCCL knowing interface versions up to N
  rank_missing
              rank 0 of 2 alone: it fails (exit 4) within the 1 s rendezvous timeout, naming
              the missing rank and the collective; a rank that dies stops its job at once
  recording_v1 ... recording_v5
              the fake NCCL's own check: a recording plugin (every call it gets, as JSON lines)
              against the fake's truth, per interface version
  recording_limits
              a plugin asking only for Coll events, and one refusing init
  collectives_check
              the comparison of <base>.collectives.csv rows with the truth, on rows made from
              the truth (pass) and on wrong ones (each caught)
  bad_input   the straggler job's rank outputs copied and damaged (a rank missing, a rows file
              and a step stream cut, a rank of another job, a rank twice, nothing usable)
  p2p_single_rank
              one rank on a single-rank communicator, per step a group of two send/receive
              pairs to itself (tests/gpu's nccl_allreduce on one H200): two SendRecv kernels
              each carrying a send and a receive; every row timed, none unmatched, kernel_ops 2;
              its all-reduces are copies without a profiler event (NCCL's one-rank path): no
              rows
  p2p_group_shared_kernel
              2 ranks, per step a group of three ring send/receive pairs, run as kernels of 4
              and 2 operations (GPUACCT_SIM_NCCL_P2P_PER_PLAN=4): each row its kernel's times
              and count
  shared_kernel_grouped_ag_rs
              2 ranks, per step a group of an AllGather and a ReduceScatter fused into one
              (generic) kernel: both rows its times, kernel_ops 2

What every case checks: every rank exits 0 and writes its report (its rank, planted hostname,
job id, step count); the truth file is consistent across ranks (each (comm, seq) seen by every
rank, one true end for all, end = latest true start + transfer); the library's
<base>.collectives.csv rows against the truth: when it writes them, and required (every rank,
plugin identity) where the library is NCCL's plugin in the job (it exports ncclProfiler_vN).
The cases add their own, and every case but recording_*, collectives_check, tp and
rank_missing asserts the job view (`gpuacct job <reports> --json`) against the truth
(job_view_checks.py; docs/testing.md "Job view end to end").  Those jobs run with seeded timing
jitter (job_driver --jitter=0.03): compute and data durations vary per rank and step.

--event-order events_first: the fake NCCL starts a plan's profiler events before its kernel
launch instead of after it (NCCL's order, the default); ctest runs some cases both ways.

Output (--keep DIR, else a temporary directory): DIR/reports/ (every rank's gpuacct files),
DIR/truth/rank<R>.jsonl (each rank's truth), DIR/truth.jsonl (all of them),
DIR/truth_summary.json (per step and rank: true host range, time waited for later ranks, last
arrivals), DIR/job.json (the planted job: ranks, hosts, offsets, knobs),
DIR/logs/rank<R>.{out,err}.  tests/sim/fake_nccl/README.md describes the truth lines.

  job         a job of your own (nothing asserted but that it ran and its truth holds):
              run_job.py --build B job --keep DIR [--ranks 8] [--hosts 2] [--offsets-ms -5,5]
              [--jitter-us 50] [--steps 30] [--plugin library|none|recording] [--api 5]
              [--rank-args 'R:ARGS;R:ARGS'] [--rank-env 'R:VAR=VALUE,...;...']
              [--driver-args 'ARGS for every rank']
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

import job_view_checks as jv
import simjob
from simjob import (MS, Fail, check, check_collectives_files, check_reports, check_truth,
                    configure, exported_profiler_versions, load_truth, paths, per_step, plan,
                    run_job, truth_steps, wall, write_rows_file)

# The cases whose job view is asserted run with seeded timing jitter: every rank's compute and
# data durations vary by up to 3% per step (job_driver --jitter), so instances differ.
JITTER = ["--jitter=0.03", "--seed=11"]

# ---- cases ----------------------------------------------------------------------------------------

def case_hosts(out: str) -> None:
    lib, _, _, _ = paths()
    layout = plan(8, 2, offsets_ms=[-5, 5], jitter_us=50)
    job = run_job(out, 8, layout, steps=30, plugin=lib, common_args=JITTER)
    truth = load_truth(out)
    groups = check_truth(truth, job)
    reps = check_reports(out, job)
    offsets = sorted({o for _, o in layout})
    check(len(offsets) == 2 and max(offsets) - min(offsets) > 9 * MS,
          f"planted offsets not one per host, spread as asked: {offsets}")
    # Each report is on its rank's own (planted) clock: its step begins are the truth's local
    # ones, so against the true clock the reports of the two hosts disagree by the offsets (what
    # the job view's clock alignment must undo).
    skew = {}  # rank -> report's begin - true begin, per step
    for r, rep in reps.items():
        steps = sorted((t for t in truth if t["kind"] == "step" and t["rank"] == r),
                       key=lambda t: t["step"])
        check(len(steps) == 30, f"rank {r}: {len(steps)} step lines in the truth")
        rows = sorted((x for x in rep["steps"] if x["device"] == 0), key=lambda x: x["step_index"])
        for row, t in zip(rows, steps):
            check(abs(row["host_begin_ns"] - t["host_begin_ns"]) <= 10_000,
                  f"rank {r} step {t['step']}: report begins {row['host_begin_ns']}, the rank's "
                  f"clock said {t['host_begin_ns']}")
            skew.setdefault(r, []).append(row["host_begin_ns"] - t["true_host_begin_ns"])
    apart = [a - b for a, b in zip(skew[4], skew[0])]
    want = layout[4][1] - layout[0][1]
    check(all(abs(a - want) <= 10_000 for a in apart),
          f"rank 4 vs rank 0 step begins {apart[:3]}..., planted offsets {want} apart")
    matched = check_collectives_files(out, groups, job,
                                      plugin_rows=bool(exported_profiler_versions(lib)))
    clocks = jv.check_clocks(jv.ok_view(os.path.join(out, "reports")), job)
    print(f"hosts: {len(groups)} collective instances, offsets {offsets}; reports of rank 0 and "
          f"4 disagree by {want / MS:.3f} ms on every step; {matched} collectives rows matched; "
          f"job view: {clocks}")


def straggler_job(out: str, plugin: str, marks: str = "capi") -> dict:
    """8 ranks on 2 hosts (clocks -5 / +5 ms, +-50 us per host), jitter; rank 2 waits 15 ms for
    data every step, the others 2 ms."""
    return run_job(out, 8, plan(8, 2, offsets_ms=[-5, 5], jitter_us=50), plugin=plugin,
                   rank_args={2: ["--data-ms=15"]}, common_args=[f"--marks={marks}", *JITTER])


def truth_data_wait(out: str, rank: int) -> float:
    """Mean planted data wait per step of a rank (the truth's step lines)."""
    waits = [t["data_wait_ns"] for t in load_truth(out) if t["kind"] == "step" and t["rank"] == rank]
    return sum(waits) / len(waits)


def case_straggler(out: str, marks: str = "capi") -> None:
    lib, _, _, _ = paths()
    job = straggler_job(out, lib, marks)
    groups = check_truth(load_truth(out), job)
    reps = check_reports(out, job)
    firsts = [rows for (c, k, s), rows in groups.items() if s % 2 == 0]
    check(all(next(x for x in rows if x["rank"] == 0)["last_rank"] == 2 for rows in firsts),
          "rank 2 is not the last to arrive at every step's first AllReduce")
    straggler = reps[2]
    data = wall(straggler, "data")
    planted = truth_data_wait(out, 2)
    check(abs(data - planted) <= 0.1 * MS, f"straggler: data wall {data / MS:.2f} ms per step, "
                                           f"planted {planted / MS:.2f}")
    check(wall(straggler, "communication") < 5 * MS,
          f"straggler: communication wall {wall(straggler, 'communication') / MS:.2f} ms per step")
    check(straggler["verdict"]["bound"] == "data",
          f"straggler verdict {straggler['verdict']['bound']!r}")
    for r, rep in reps.items():
        if r == 2:
            continue
        comm = wall(rep, "communication")
        check(comm >= 11 * MS, f"rank {r}: communication wall {comm / MS:.2f} ms per step: the "
                               "~13 ms wait for the straggler should show")
        check(wall(rep, "data") < 3 * MS, f"rank {r}: data wall {wall(rep, 'data') / MS:.2f} ms")
        check(rep["verdict"]["bound"] == "communication",
              f"rank {r}: verdict {rep['verdict']['bound']!r}, expected communication")
    summary = json.load(open(os.path.join(out, "truth_summary.json")))
    for s in summary["steps"]:
        by = {x["rank"]: x for x in s["ranks"]}
        check(by[2]["waited_ns"] == 0 and by[2]["last_arrivals"] >= 1,
              f"step {s['step']}: the straggler waited or never came last: {by[2]}")
        check(all(by[r]["waited_ns"] >= 11 * MS for r in by if r != 2),
              f"step {s['step']}: a peer waited less than 11 ms: {s['ranks']}")
    matched = check_collectives_files(out, groups, job,
                                      plugin_rows=bool(exported_profiler_versions(lib)))
    peers = min(wall(reps[r], "communication") for r in reps if r != 2)
    view = jv.ok_view(os.path.join(out, "reports"))
    blamed = jv.check_late_rank(view, out, job, 2, "data")
    clocks = jv.check_clocks(view, job)
    print(f"straggler: rank 2 data wall {data / MS:.2f} ms/step, communication wall "
          f"{wall(straggler, 'communication') / MS:.2f}; its peers' communication walls >= "
          f"{peers / MS:.2f} ms/step; {matched} collectives rows matched; job view: {blamed}; "
          f"{clocks}")


def case_straggler_share(out: str) -> None:
    """Rank 2 waits 15 ms for data on 3 of every 5 steps only (2 ms on the others, as every
    other rank): it is the straggler, and the share of all-reduces it arrives last at and its
    lateness per step are the truth's within 2%."""
    import re
    lib, _, _, _ = paths()
    job = run_job(out, 8, plan(8, 2, offsets_ms=[-5, 5], jitter_us=50), plugin=lib,
                  rank_args={2: ["--data-ms=15", "--data-steps=3/5"]}, common_args=JITTER)
    check_truth(load_truth(out), job)
    check_reports(out, job)
    view = jv.ok_view(os.path.join(out, "reports"))
    steps = jv.summary_steps(out, 8)
    share, late = jv.truth_last_share(out, job, 2, steps)
    said = re.match(r"rank 2 arrives last at (\d+)% of all-reduces", view["headline"])
    jv.expect("headline", said is not None and "data wait" in view["headline"],
              f"headline {view['headline']!r}")
    me = jv.by_rank(view)[2]
    ar = {t["collective"]: t for t in view["collectives"]["by_type"]}["AllReduce"]
    got_share = me["last_arrivals"] / ar["instances"]
    jv.expect("last_share", jv.close(got_share, share, 0.02) and said is not None
              and abs(int(said.group(1)) - 100 * share) <= 1,
              f"rank 2 last at {got_share:.4f} of all-reduces ({said and said.group(1)}% in the "
              f"headline), truth {share:.4f}")
    jv.expect("lateness", jv.close(me["late_ms"] * MS, late, 0.02),
              f"rank 2 late {me['late_ms']:.4f} ms/step, truth {late / MS:.4f}")
    want_if = view["steps"]["job_step_ms_mean"] - me["late_ms"]
    jv.expect("what_if", abs(view["steps"]["what_if_step_ms_mean"] - want_if) < 1e-9,
              f"what-if {view['steps']['what_if_step_ms_mean']:.4f}, job step less rank 2's "
              f"lateness {want_if:.4f}")
    print(f"straggler_share: rank 2 last at {100 * got_share:.2f}% of all-reduces (truth "
          f"{100 * share:.2f}%), late {me['late_ms']:.4f} ms/step (truth {late / MS:.4f}); "
          f"what-if {view['steps']['what_if_step_ms_mean']:.3f} of "
          f"{view['steps']['job_step_ms_mean']:.3f} ms")


def case_rank_folders(out: str) -> None:
    """The straggler job with each rank writing its default outputs into its own folder
    (GPUACCT_OUTPUT_DIR=DIR/rank<R>) under the pattern "report": report.report.json,
    report.steps.jsonl, report.collectives.csv; and the same folders as a library that named
    its report <base>.json left them (report.json: a file named after its kind alone).  The job
    view matches the collectives in both (no rank twice), given the folder or the reports
    named one by one, and analyze of the step streams gives the same answer."""
    lib, _, _, _ = paths()
    job = run_job(out, 8, plan(8, 2, offsets_ms=[-5, 5], jitter_us=50), plugin=lib,
                  rank_args={2: ["--data-ms=15"]}, common_args=JITTER, rank_dirs=True,
                  pattern="report")
    groups = check_truth(load_truth(out), job)
    check_reports(out, job)
    check_collectives_files(out, groups, job, plugin_rows=True)
    reports = os.path.join(out, "reports")
    got = sorted(os.listdir(os.path.join(reports, "rank0")))
    check(got == ["report.collectives.csv", "report.report.json", "report.steps.jsonl"],
          f"rank 0's folder holds {got}")
    old = os.path.join(out, "old_names")
    shutil.copytree(reports, old)
    for r in range(8):
        os.rename(os.path.join(old, f"rank{r}", "report.report.json"),
                  os.path.join(old, f"rank{r}", "report.json"))
    told = []
    for name, args in (("folders", [reports]), ("old_names", [old]),
                       ("named", sorted(glob.glob(os.path.join(old, "rank*", "report.json"))))):
        rc, view, err = jv.job_view(*args)
        check(rc == 0, f"{name}: gpuacct job exited {rc}: {err[-300:]}")
        jv.expect(f"{name}_once", "twice" not in err and not view["problems"],
                  f"{name}: {err.strip()[-400:]}")
        jv.expect(f"{name}_method", view["method"] == "collectives",
                  f"{name}: method {view['method']}, notes {view['matching']['notes']}")
        told.append(f"{name}: " + jv.check_late_rank(view, out, job, 2, "data"))
    # analyze of the ranks' step streams: its job view is gpuacct job's (the same ranks).
    exe = os.path.join(simjob.BUILD, "bin", "gpuacct")
    streams = sorted(glob.glob(os.path.join(reports, "rank*", "report.steps.jsonl")))
    an = os.path.join(out, "analyzed")
    res = subprocess.run([exe, "analyze", *streams, "-o", an], stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True, timeout=120, check=False)
    check(res.returncode == 0, f"analyze exited {res.returncode}: {res.stderr[-300:]}")
    with open(os.path.join(an, "job.json")) as f:
        by_analyze = json.load(f)
    by_job = jv.ok_view(reports)
    for key in ("headline", "method", "steps", "collectives", "clocks", "link"):
        jv.expect("analyze_is_job", by_analyze[key] == by_job[key],
                  f"analyze and job differ in {key}: {str(by_analyze[key])[:200]} vs "
                  f"{str(by_job[key])[:200]}")
    print("rank_folders: " + "; ".join(told) + "; analyze of the streams = gpuacct job")


def strip_hostnames(src: str, dst: str) -> None:
    """A copy of the ranks' outputs whose run metadata names no host (as a profiler trace)."""
    shutil.copytree(src, dst)
    for path in glob.glob(os.path.join(dst, "**", "*"), recursive=True):
        if not os.path.isfile(path):
            continue
        with open(path) as f:
            text = f.read()
        with open(path, "w") as f:
            f.write(re.sub(r'"hostname": ?"simhost\d+"', '"hostname": ""', text))


def case_hosts_inferred(out: str) -> None:
    """8 ranks on 2 hosts whose outputs name no host: the hosts are inferred from the ranks'
    clock offsets (-5 / +5 ms), from their device layout (LOCAL_RANK devices 0-3 per host), or
    both -- 2 hosts, marked inferred, never 8; with neither (one clock, every rank on device
    0) the count is unknown."""
    lib, _, _, _ = paths()
    told = []
    for name, offsets, devices, want in (
            ("clocks_and_layout", [-5, 5], True, "clock offsets and the device layout"),
            ("clocks", [-5, 5], False, "clock offsets"),
            ("layout", None, True, "the device layout"),
            ("nothing", None, False, None)):
        d = os.path.join(out, name)
        job = run_job(d, 8, plan(8, 2, offsets_ms=offsets, jitter_us=50 if offsets else 0),
                      plugin=lib, steps=10,
                      common_args=[*JITTER, *(["--device-per-local-rank"] if devices else [])])
        check_truth(load_truth(d), job)
        check_reports(d, job)
        named = jv.ok_view(os.path.join(d, "reports"))
        jv.expect(f"{name}_hostnames", named["hosts"] == {"count": 2, "basis": "hostnames"},
                  f"{name}: with host names, hosts {named['hosts']}")
        stripped = os.path.join(d, "no_hostnames")
        strip_hostnames(os.path.join(d, "reports"), stripped)
        view = jv.ok_view(stripped)
        hosts = view["hosts"]
        if want is None:
            jv.expect(f"{name}_unknown", hosts == {"count": None, "basis": "unknown"}
                      and all(r["host"] == "unknown" for r in view["ranks"]),
                      f"{name}: hosts {hosts}, ranks' hosts {[r['host'] for r in view['ranks']]}")
            res = subprocess.run([os.path.join(simjob.BUILD, "bin", "gpuacct"), "job", stripped,
                                  "--no-files"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                 text=True, timeout=120, check=False)
            jv.expect(f"{name}_terminal", "on an unknown number of hosts" in res.stdout,
                      f"{name}: {res.stdout.splitlines()[:1]}")
            told.append(f"{name}: unknown")
            continue
        groups = sorted(sorted(h["ranks"]) for h in view["clocks"]["hosts"])
        jv.expect(f"{name}_count", hosts == {"count": 2, "basis": "inferred from " + want}
                  and groups == [[0, 1, 2, 3], [4, 5, 6, 7]]
                  and all(h["inferred"] for h in view["clocks"]["hosts"]),
                  f"{name}: hosts {hosts}, clocks {groups}")
        if offsets:
            planted = job["ranks"][4]["clock_offset_ns"] - job["ranks"][0]["clock_offset_ns"]
            got = jv.by_rank(view)[4]["clock_offset_ns"] - jv.by_rank(view)[0]["clock_offset_ns"]
            jv.expect(f"{name}_offset", abs(got - planted) <= 50_000,
                      f"{name}: inferred hosts {got} ns apart, planted {planted}")
        told.append(f"{name}: {hosts['count']} hosts {hosts['basis']}")
    print("hosts_inferred: " + "; ".join(told))


def case_bad_input(out: str) -> None:
    """The straggler job's real rank outputs, copied and damaged: a rank missing, a rows file
    and a step stream cut in the middle, a rank of another job, a rank twice."""
    lib, _, _, _ = paths()
    job = straggler_job(out, lib)
    check_reports(out, job)
    said = jv.check_bad_inputs(out, job, 2, "data")
    print("bad_input: " + "; ".join(said))


def case_slow_link(out: str) -> None:
    """Rank 5's link is 2x slower, so every transfer of the ring takes ~2x; the same job (same
    seed, layout and jitter) runs again without the slow link to compare the job views."""
    lib, _, _, _ = paths()
    layout = plan(8, 2, offsets_ms=[-5, 5], jitter_us=50)
    job = run_job(out, 8, layout, plugin=lib, common_args=JITTER,
                  rank_env={5: {"GPUACCT_SIM_NCCL_LINK_SLOWDOWN": "2"}})
    groups = check_truth(load_truth(out), job)
    reps = check_reports(out, job)
    for key, rows in groups.items():
        slow = next(x for x in rows if x["rank"] == 5)["link_bytes_per_us"]
        fast = next(x for x in rows if x["rank"] == 0)["link_bytes_per_us"]
        check(slow * 2 == fast, f"{key}: link {slow} vs {fast} bytes/us")
        moved = 2 * 7 / 8 * rows[0]["bytes"]
        want = 5000 + int(moved * 1000 / slow)
        check(all(x["transfer_ns"] == want for x in rows),
              f"{key}: transfer {rows[0]['transfer_ns']} ns, slow link gives {want}")
    # Every rank waits for the slow link alike: no rank looks different in its own report
    # (beyond the jitter's few hundred microseconds of waiting).
    walls = [wall(rep, "communication") for rep in reps.values()]
    check(max(walls) - min(walls) < 1.5 * MS, f"communication walls differ: {walls}")
    matched = check_collectives_files(out, groups, job,
                                      plugin_rows=bool(exported_profiler_versions(lib)))
    base = os.path.join(out, "baseline")
    base_job = run_job(base, 8, layout, plugin=lib, common_args=JITTER)
    check_truth(load_truth(base), base_job)
    # The link speed the fake planted (bytes/us -> GB/s) is the link's peak bus bandwidth.
    peak_gbs = next(iter(groups.values()))[0]["link_bytes_per_us"] / 1000
    for rows in groups.values():
        peak_gbs = max(peak_gbs, max(x["link_bytes_per_us"] for x in rows) / 1000)
    peak = ["--link-peak-gbs", f"{peak_gbs:g}"]
    slow_view = jv.ok_view(os.path.join(out, "reports"), *peak)
    base_view = jv.ok_view(os.path.join(base, "reports"), *peak)
    told = jv.check_slow_link(slow_view, base_view, out, base, job, peak_gbs)
    # Every step is slow: the link is blamed against the given reference (the job's own best is
    # as slow as the rest), and the job without the slow link is balanced.
    blamed = jv.check_link_blamed(slow_view, base_view, jv.summary_steps(out, 8))
    balanced = jv.check_balanced(base_view, "baseline")
    own = jv.ok_view(os.path.join(out, "reports"))
    jv.expect("own_reference", not own["link"]["blamed"],
              f"every step equally slow, no reference given: link {own['link']['blamed']}")
    print(f"slow_link: transfer {rows[0]['transfer_ns'] / MS:.3f} ms per 64 MiB AllReduce on 8 "
          f"ranks, communication walls {min(walls) / MS:.2f}-{max(walls) / MS:.2f} ms/step; "
          f"{matched} collectives rows matched; job view: {told}; {blamed}; {balanced}")


def case_slow_link_every(out: str) -> None:
    """The link 3x slower on every 10th step only (job_driver --link-slowdown): blamed on
    exactly those steps, against the job's own best and against the given reference; the
    what-if is the step of the same job without the slowdown within 5%."""
    lib, _, _, _ = paths()
    layout = plan(8, 2, offsets_ms=[-5, 5], jitter_us=50)
    job = run_job(out, 8, layout, plugin=lib,
                  common_args=[*JITTER, "--link-slowdown=3", "--link-slow-every=10"])
    groups = check_truth(load_truth(out), job)
    check_reports(out, job)
    steps = truth_steps(out, groups)
    for rows in groups.values():
        step = steps[rows[0]["process_rank"]][rows[0]["host_enqueue_ns"]]
        want = 50_000 // 3 if step % 10 == 9 else 50_000
        check(all(x["link_bytes_per_us"] == want for x in rows),
              f"step {step}: links {[x['link_bytes_per_us'] for x in rows]}, planted {want}")
    base = os.path.join(out, "baseline")
    base_job = run_job(base, 8, layout, plugin=lib, common_args=JITTER)
    check_truth(load_truth(base), base_job)
    slow_steps = [s for s in jv.summary_steps(out, 8) if s % 10 == 9]
    base_view = jv.ok_view(os.path.join(base, "reports"))
    told = []
    for extra in ((), ("--link-peak-gbs", "50")):
        told.append(jv.check_link_blamed(jv.ok_view(os.path.join(out, "reports"), *extra),
                                         base_view, slow_steps))
    told.append(jv.check_balanced(base_view, "baseline"))
    print(f"slow_link_every: slow steps {slow_steps}; own reference: {told[0]}; given "
          f"reference: {told[1]}; {told[2]}")


def case_balanced(out: str) -> None:
    """8 ranks on 2 hosts with jitter and nobody slow: no rank stands out, no link is blamed,
    and the what-if is the job step, with and without a reference bandwidth."""
    lib, _, _, _ = paths()
    job = run_job(out, 8, plan(8, 2, offsets_ms=[-5, 5], jitter_us=50), plugin=lib,
                  common_args=JITTER)
    check_truth(load_truth(out), job)
    check_reports(out, job)
    told = [jv.check_balanced(jv.ok_view(os.path.join(out, "reports"), *extra), name)
            for name, extra in (("own_reference", ()),
                                ("given_reference", ("--link-peak-gbs", "50")))]
    print("balanced: " + "; ".join(told))


def case_slow_gpu(out: str) -> None:
    """Rank 6's kernels take 1.3x as long: it arrives last at every AllReduce; its report shows
    more compute, the others wait in communication."""
    lib, _, _, _ = paths()
    job = run_job(out, 8, plan(8, 2, offsets_ms=[-5, 5], jitter_us=50), plugin=lib,
                  rank_args={6: ["--compute-scale=1.3"]}, common_args=JITTER)
    groups = check_truth(load_truth(out), job)
    reps = check_reports(out, job)
    check(all(next(x for x in rows if x["rank"] == 0)["last_rank"] == 6
              for (c, k, seq), rows in groups.items()),
          "rank 6 is not the last to arrive at every AllReduce")
    slow = wall(reps[6], "compute")
    planted = [t["compute_ns"] for t in load_truth(out) if t["kind"] == "step" and t["rank"] == 6]
    planted_mean = sum(planted) / len(planted)
    check(abs(slow - planted_mean) <= 0.1 * MS and planted_mean > 1.25 * 16 * MS,
          f"rank 6: compute {slow / MS:.2f} ms per step, planted {planted_mean / MS:.2f} "
          "(1.3 x 16 ms, jittered)")
    for r, rep in reps.items():
        if r != 6:
            check(wall(rep, "communication") >= wall(reps[6], "communication") + 3 * MS,
                  f"rank {r}: communication wall {wall(rep, 'communication') / MS:.2f} ms, the "
                  f"slow rank's {wall(reps[6], 'communication') / MS:.2f}")
    matched = check_collectives_files(out, groups, job,
                                      plugin_rows=bool(exported_profiler_versions(lib)))
    blamed = jv.check_late_rank(jv.ok_view(os.path.join(out, "reports")), out, job, 6, "compute")
    print(f"slow_gpu: rank 6 compute {slow / MS:.2f} ms/step, communication wall "
          f"{wall(reps[6], 'communication') / MS:.2f}; rank 0's {wall(reps[0], 'communication') / MS:.2f}"
          f"; {matched} collectives rows matched; job view: {blamed}")


def case_tp(out: str) -> None:
    """Several communicators: 8 ranks in tensor-parallel pairs (4 TP communicators) and 2
    data-parallel communicators of 4 (the ranks with the same position in their pair), --mix."""
    lib, _, _, _ = paths()
    job = run_job(out, 8, plan(8, 2, offsets_ms=[-5, 5]), steps=10, plugin=lib,
                  common_args=["--tp=2", "--mix"])
    truth = load_truth(out)
    groups = check_truth(truth, job)
    check_reports(out, job)
    comms = {}
    for t in truth:
        if t["kind"] == "comm":
            comms.setdefault(t["comm"], set()).add((t["process_rank"], t["rank"], t["nranks"]))
    sizes = sorted(len(v) for v in comms.values())
    check(sizes == [2, 2, 2, 2, 4, 4], f"communicator sizes {sizes}")
    for members in comms.values():
        check(sorted(m[1] for m in members) == list(range(len(members))), f"{members}")
    matched = check_collectives_files(out, groups, job,
                                      plugin_rows=bool(exported_profiler_versions(lib)))
    print(f"tp: {len(comms)} communicators, {len(groups)} instances; {matched} collectives rows "
          "matched")


def case_no_plugin(out: str) -> None:
    """The straggler job without a profiler plugin: the library's rows are numbered by kernel
    order, and the job view gives the same answer from them."""
    job = straggler_job(out, "none")
    truth = load_truth(out)
    groups = check_truth(truth, job)
    reps = check_reports(out, job)
    check(all(t["plugin_version"] == 0 for t in truth if t["kind"] == "comm"),
          "a plugin was loaded with NCCL_PROFILER_PLUGIN=none")
    for r, rep in reps.items():
        check(per_step(rep, "comm_exposed") > 0, f"rank {r}: no communication time at all")
    matched = check_collectives_files(out, groups, job)
    ids = jv.rows_identity(out)
    jv.expect("identity", ids == {"kernel_order"}, f"rows identity {ids}, expected kernel_order")
    blamed = jv.check_late_rank(jv.ok_view(os.path.join(out, "reports")), out, job, 2, "data")
    print(f"no_plugin: {matched} collectives rows matched the truth; identity {sorted(ids)}; "
          f"job view: {blamed}")


def case_plugin(out: str, version: int) -> None:
    lib, _, _, _ = paths()
    job = run_job(out, 4, plan(4, 2, offsets_ms=[-5, 5]), steps=10, plugin=lib, api=version,
                  common_args=["--mix", *JITTER])
    truth = load_truth(out)
    groups = check_truth(truth, job)
    check_reports(out, job)
    exported = {v for v in exported_profiler_versions(lib) if v <= version}
    want = max(exported) if exported else 0
    got = {t["plugin_version"] for t in truth if t["kind"] == "comm"}
    check(got == {want}, f"plugin version in use {got}; the library exports {sorted(exported)}, "
                         f"NCCL knows up to v{version}: expected v{want}")
    matched = check_collectives_files(out, groups, job, plugin_rows=want > 0)
    ids = jv.rows_identity(out)
    jv.expect("identity", ids == ({"nccl_plugin"} if want else {"kernel_order"}),
              f"rows identity {ids} with the plugin v{want} in use")
    types = jv.check_types(jv.ok_view(os.path.join(out, "reports")), out, job)
    print(f"plugin_v{version}: library exports {sorted(exported_profiler_versions(lib))}, "
          f"in use v{want}; {matched} collectives rows matched the truth; identity "
          f"{sorted(ids)}; job view: {types}")


def shared_kernel_job(out: str, nranks: int, args: list, rank_env=None, steps: int = 10) -> None:
    """A job with the library as NCCL's plugin whose operations share kernels: the rows against
    the truth (each its kernel's GPU times, kernel_ops = operations the kernel carried), no row
    unmatched, every operation of the truth timed."""
    lib, _, _, _ = paths()
    job = run_job(out, nranks, plan(nranks, 1), steps=steps, plugin=lib, api=5,
                  rank_env=rank_env, common_args=args)
    truth = load_truth(out)
    groups = check_truth(truth, job)
    reps = check_reports(out, job)
    matched = check_collectives_files(out, groups, job, plugin_rows=True)
    shared = [t for t in truth if t["kind"] in ("coll", "p2p") and t["kernel_ops"] > 1]
    check(shared, "no kernel of the job carried several operations: the case tests nothing")
    for r, rep in reps.items():
        unmatched = [s["value"] for s in rep["stats"] if s["name"] == "collectives_unmatched"]
        check(unmatched in ([], [0]), f"rank {r}: collectives_unmatched {unmatched}")
    rows = 0
    for r in range(nranks):
        for path in sorted(os.listdir(os.path.join(out, "reports"))):
            if not (path.endswith(".collectives.csv") and f"_rank{r}." in path):
                continue
            with open(os.path.join(out, "reports", path)) as f:
                lines = f.read().splitlines()
            cols = lines[1].split(",")
            check(cols[-1] == "kernel_ops", f"{path}: no kernel_ops column: {lines[1]}")
            for line in lines[2:-1]:
                row = dict(zip(cols, line.split(",")))
                check(int(row["gpu_start_ns"]) > 0 and int(row["gpu_end_ns"]) > 0,
                      f"{path}: a row without GPU times: {line}")
                rows += 1
    ops = sum(len(t["ops"]) if t["kind"] == "p2p" else 1 for t in truth
              if t["kind"] in ("coll", "p2p"))
    check(rows == ops, f"{rows} rows for {ops} operations")
    print(f"{os.path.basename(out) or out}: {rows} rows, all timed, {matched} matched the truth; "
          f"{len(shared)} truth lines on shared kernels")


def case_p2p_single_rank(out: str) -> None:
    shared_kernel_job(out, 1, ["--p2p-pairs=2"])
    truth = load_truth(out)
    check(not [t for t in truth if t["kind"] == "coll"],
          "a single-rank all-reduce ran as a kernel with profiler events")
    check(all(t["kernel_ops"] == 2 for t in truth if t["kind"] == "p2p"),
          "a SendRecv kernel without exactly a send and a receive")


def case_p2p_group_shared_kernel(out: str) -> None:
    shared_kernel_job(out, 2, ["--p2p-pairs=3"],
                      rank_env={r: {"GPUACCT_SIM_NCCL_P2P_PER_PLAN": "4"} for r in range(2)})


def case_shared_kernel_grouped_ag_rs(out: str) -> None:
    shared_kernel_job(out, 2, ["--grouped-ag-rs"])


def case_recording(out: str, version: int) -> None:
    """The fake NCCL against a plugin that records what it is told, for one interface version."""
    _, _, _, recorder = paths()
    n = 4
    rank_env = {r: {"GPUACCT_SIM_NCCL_RECORD": os.path.join(out, f"record{r}.jsonl")}
                for r in range(n)}
    job = run_job(out, n, plan(n, 2, offsets_ms=[-5, 5]), steps=5, plugin=recorder, api=version,
                  rank_env=rank_env, common_args=["--mix"], inject=False)
    truth = load_truth(out)
    check_truth(truth, job)
    for r in range(n):
        with open(os.path.join(out, f"record{r}.jsonl")) as f:
            rec = [json.loads(line) for line in f]
        check(rec[0]["ev"] == "init" and rec[0]["v"] == version, f"rank {r}: {rec[0]}")
        check(rec[-1] == {"ev": "finalize", "v": version}, f"rank {r}: last call {rec[-1]}")
        if version >= 4:
            check(rec[0]["comm"] == "9f2c0a11d2e4b7aa" and rec[0]["rank"] == r
                  and rec[0]["nranks"] == n, f"rank {r}: init {rec[0]}")
        mine = [t for t in truth if t.get("process_rank") == r and t["kind"] == "coll"]
        colls = [e for e in rec if e["ev"] == "start" and e["type"] == 2]
        check(len(colls) == len(mine), f"rank {r}: {len(colls)} Coll events, {len(mine)} in truth")
        ids = {e["id"]: e for e in rec if e["ev"] == "start"}
        stops = {e["id"]: e for e in rec if e["ev"] == "stop"}
        states = {e["id"]: e for e in rec if e["ev"] == "state"}
        for e, t in zip(colls, mine):
            check(e["seq"] == t["seq"], f"rank {r}: seq {e['seq']} vs {t['seq']}")
            if version == 1:
                check(e["traffic_bytes"] == t["bytes"] and e["func_id"] in (2, 3, 4),
                      f"rank {r}: v1 Coll {e}")
            else:
                check(e["func"] == t["collective"] and e["datatype"] == t["datatype"]
                      and e["count"] == t["count"], f"rank {r}: Coll {e} vs {t}")
            if version <= 3:
                check(e["comm"] == t["comm"], f"rank {r}: comm {e['comm']}")
            check(e["t"] == t["host_enqueue_ns"], f"rank {r}: Coll start {e['t']}, enqueue "
                                                  f"{t['host_enqueue_ns']}")
            check(stops[e["id"]]["t"] < t["gpu_end_ns"], f"rank {r}: Coll stopped at the GPU end")
            chans = [x for x in ids.values() if x["type"] == 64 and x["parent"] == e["id"]]
            if version < 3:
                check(not chans, f"rank {r}: KernelCh events before v3")
                continue
            check(len(chans) == 2, f"rank {r} seq {e['seq']}: {len(chans)} KernelCh events")
            for ch in chans:
                check(ch["id"] in stops, f"rank {r}: KernelCh {ch['id']} never stopped")
                check(ch["t"] >= t["gpu_start_ns"] and stops[ch["id"]]["t"] >= t["gpu_end_ns"],
                      f"rank {r}: KernelCh started before the kernel or stopped before its end")
                if version >= 4:
                    check(ch["ptimer"] == t["gpu_start_ns"]
                          and states[ch["id"]]["ptimer"] == t["gpu_end_ns"]
                          and states[ch["id"]]["state"] == 22,
                          f"rank {r}: KernelCh times {ch} {states.get(ch['id'])} vs {t}")
        p2p = [e for e in rec if e["ev"] == "start" and e["type"] == 4]
        check(len(p2p) == 2 * job["steps"], f"rank {r}: {len(p2p)} P2p events")
        peers = {(e.get("func", e.get("func_id")), e["peer"]) for e in p2p}
        want = ({("Send", (r + 1) % n), ("Recv", (r - 1) % n)} if version > 1
                else {(6, (r + 1) % n), (7, (r - 1) % n)})
        check(peers == want, f"rank {r}: p2p events {peers}, expected {want}")
        # The hierarchy: a Coll's parent is its Group (v1-v4) or its CollApi event (v5, with
        # the Group as parentGroup).
        for e in colls:
            parent = ids.get(e["parent"], {})
            if version == 5:
                check(parent.get("type") == 512 and ids[e["parent_group"]]["type"] == 1,
                      f"rank {r}: v5 Coll parents {parent}, group {e.get('parent_group')}")
            else:
                check(parent.get("type") == 1, f"rank {r}: Coll parent {parent}")
        if version == 5:
            apis = [e for e in rec if e["ev"] == "start" and e["type"] == 512]
            check(len(apis) == len(mine), f"rank {r}: {len(apis)} CollApi events")
    print(f"recording_v{version}: ok")


def case_recording_limits(out: str) -> None:
    """A plugin asking only for Coll events gets nothing else; one refusing init gets nothing
    more, and the job runs without it (as NCCL disables a plugin whose init fails)."""
    _, _, _, recorder = paths()
    n = 2
    for name, knob in (("mask", {"GPUACCT_SIM_NCCL_RECORD_MASK": "2"}),
                       ("refused", {"GPUACCT_SIM_NCCL_RECORD_REFUSE": "1"})):
        sub = os.path.join(out, name)
        rank_env = {r: {"GPUACCT_SIM_NCCL_RECORD": os.path.join(sub, f"record{r}.jsonl"), **knob}
                    for r in range(n)}
        job = run_job(sub, n, plan(n, 1), steps=3, plugin=recorder, rank_env=rank_env,
                      common_args=["--mix"], inject=False)
        truth = load_truth(sub)
        check_truth(truth, job)
        comms = sorted((t for t in truth if t["kind"] == "comm"), key=lambda t: t["process_rank"])
        for r in range(n):
            with open(os.path.join(sub, f"record{r}.jsonl")) as f:
                rec = [json.loads(line) for line in f]
            if name == "refused":
                check(rec == [{"ev": "init_refused", "v": 5}], f"rank {r}: {rec}")
                check(not comms[r]["plugin_initialised"], f"rank {r}: {comms[r]}")
            else:
                types = {e["type"] for e in rec if e["ev"] == "start"}
                check(types == {2}, f"rank {r}: event types {types}, asked for Coll only")
                colls = [t for t in truth if t["kind"] == "coll" and t["process_rank"] == r]
                check(sum(1 for e in rec if e["ev"] == "start") == len(colls),
                      f"rank {r}: Coll events and collectives differ")
    print("recording_limits: ok")


def case_collectives_check(out: str) -> None:
    """The comparison of collectives rows with the truth (used by the cases above once the
    library writes them): rows made from the truth pass; each kind of wrong row is caught."""
    _, _, _, recorder = paths()
    job = run_job(out, 2, plan(2, 2, offsets_ms=[-5, 5]), steps=3, plugin=recorder,
                  common_args=["--mix"], inject=False)
    groups = check_truth(load_truth(out), job)
    steps = truth_steps(out, groups)
    mine = {r: sorted((dict(t, step_index=steps[r][t["host_enqueue_ns"]])
                       for rows in groups.values() for t in rows if t["process_rank"] == r),
                      key=lambda t: t["gpu_start_ns"]) for r in range(2)}
    path = {r: os.path.join(out, "reports", f"gpuacct_x_rank{r}.collectives.csv") for r in mine}

    def write_all(change=None):
        for r, rows in mine.items():
            rows = [dict(t) for t in rows]
            if change and r == 1:
                rows = change(rows)
            write_rows_file(path[r], r, rows)

    write_all()
    n = check_collectives_files(out, groups, job)
    check(n == sum(len(v) for v in mine.values()), f"{n} rows matched")
    wrong = {
        "a row missing": lambda rows: rows[1:],
        "an end 2 us off": lambda rows: [dict(t, gpu_end_ns=t["gpu_end_ns"] + 2000) for t in rows],
        "a wrong seq": lambda rows: [dict(t, seq=t["seq"] + 1) if t["kind"] == "coll" else t
                                     for t in rows],
        "a wrong comm": lambda rows: [dict(t, comm="00000000000000aa") for t in rows],
        "wrong bytes": lambda rows: [dict(t, bytes=t["bytes"] // 2) for t in rows],
        "a wrong step": lambda rows: [dict(t, step_index=t["step_index"] + 1) for t in rows],
        "a wrong type": lambda rows: [dict(t, collective="AllReduce") for t in rows],
    }
    for what, change in wrong.items():
        write_all(change)
        try:
            check_collectives_files(out, groups, job)
        except Fail:
            continue
        raise Fail(f"rows with {what} passed the comparison")
    print(f"collectives_check: {n} rows made from the truth match; {len(wrong)} kinds of wrong "
          "rows caught")


def case_job(out: str, a) -> None:
    """A job as the command line describes it (for developing the job view)."""
    lib, _, _, recorder = paths()
    offsets = [float(x) for x in a.offsets_ms.split(",")] if a.offsets_ms else None
    check(offsets is None or len(offsets) == a.hosts, "--offsets-ms needs one value per host")
    plugin = {"library": lib, "none": "none", "recording": recorder}[a.plugin]
    rank_args = {}
    for item in filter(None, a.rank_args.split(";")):
        r, args = item.split(":", 1)
        rank_args[int(r)] = args.split()
    rank_env = {}
    for item in filter(None, a.rank_env.split(";")):
        r, pairs = item.split(":", 1)
        rank_env[int(r)] = dict(p.split("=", 1) for p in pairs.split(","))
    job = run_job(out, a.ranks, plan(a.ranks, a.hosts, offsets_ms=offsets, jitter_us=a.jitter_us),
                  steps=a.steps, plugin=plugin, api=a.api, rank_args=rank_args,
                  rank_env=rank_env, common_args=a.driver_args.split())
    groups = check_truth(load_truth(out), job)
    check_reports(out, job)
    matched = check_collectives_files(out, groups, job)
    print(f"job: {a.ranks} ranks, {len(groups)} collective instances, {matched} collectives "
          f"rows matched; written to {out}")


def case_rank_missing(out: str) -> None:
    """A rank that never comes: the others fail clearly within the timeout instead of hanging."""
    _, sim_lib, driver, _ = paths()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GPUACCT_", "NCCL_"))}
    env.update(LD_LIBRARY_PATH=sim_lib, CUDA_INJECTION64_PATH="none", RANK="0", WORLD_SIZE="2",
               GPUACCT_SIM_NCCL_RENDEZVOUS=os.path.join(out, "rendezvous.bin"),
               GPUACCT_SIM_NCCL_TIMEOUT_S="1")
    start = time.monotonic()
    res = subprocess.run([driver, "--steps=2"], env=env, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True, timeout=60, check=False)
    took = time.monotonic() - start
    check(res.returncode == 4, f"exit {res.returncode}, expected 4\n{res.stderr}")
    check("ranks [1] did not arrive within 1" in res.stderr and "AllReduce seq 0" in res.stderr,
          f"the message does not name the missing rank and the collective:\n{res.stderr}")
    check(took < 10, f"took {took:.1f} s with a 1 s timeout")
    # A rank that dies (here: a bad argument) stops the job at once, its error reported, the
    # others killed while they wait for it (the rendezvous timeout here is 60 s).
    start = time.monotonic()
    try:
        run_job(os.path.join(out, "job"), 4, plan(4, 1), steps=5, rank_args={1: ["--bogus"]},
                inject=False)
    except Fail as e:
        died = str(e)
    else:
        raise Fail("a job with a failing rank passed")
    took2 = time.monotonic() - start
    check("rank 1 exited 2" in died and "unknown argument --bogus" in died,
          f"the failure does not name the rank and its error:\n{died}")
    check(took2 < 10, f"the job with a dead rank took {took2:.1f} s")
    print(f"rank_missing: failed after {took:.1f} s: {res.stderr.strip().splitlines()[0]}; a "
          f"dead rank stopped its job after {took2:.1f} s")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--build", required=True)
    ap.add_argument("--library", default="", help="libgpuacct.so to test (default: the build's)")
    ap.add_argument("--keep", default="", help="write the job here and keep it")
    ap.add_argument("--event-order", choices=("launch_first", "events_first"),
                    default="launch_first",
                    help="the fake NCCL's order of a plan's profiler events and its kernel "
                         "launch (NCCL's: launch_first)")
    ap.add_argument("--call-cost-ns", type=int, default=None,
                    help="host time the fake NCCL charges per call (default 2000; 0: a plan's "
                         "events tie with the next plan's launch, as on a coarse clock)")
    ap.add_argument("case")
    job = ap.add_argument_group("the job case")
    job.add_argument("--ranks", type=int, default=8)
    job.add_argument("--hosts", type=int, default=2)
    job.add_argument("--offsets-ms", default="", help="per host, comma-separated")
    job.add_argument("--jitter-us", type=int, default=0)
    job.add_argument("--steps", type=int, default=30)
    job.add_argument("--plugin", choices=("library", "none", "recording"), default="library")
    job.add_argument("--api", type=int, default=5, help="newest profiler API the fake knows")
    job.add_argument("--rank-args", default="", help="R:ARGS;R:ARGS (job_driver arguments)")
    job.add_argument("--rank-env", default="", help="R:VAR=VALUE,VAR=VALUE;...")
    job.add_argument("--driver-args", default="", help="job_driver arguments for every rank")
    a = ap.parse_args()
    configure(a.build, a.library, a.event_order, a.call_cost_ns)
    cases = {"hosts": case_hosts, "straggler": case_straggler,
             "straggler_nvtx": lambda out: case_straggler(out, "nvtx"), "slow_link": case_slow_link,
             "slow_link_every": case_slow_link_every, "balanced": case_balanced,
             "straggler_share": case_straggler_share, "rank_folders": case_rank_folders,
             "hosts_inferred": case_hosts_inferred,
             "bad_input": case_bad_input,
             "slow_gpu": case_slow_gpu, "tp": case_tp,
             "no_plugin": case_no_plugin, "rank_missing": case_rank_missing,
             "recording_limits": case_recording_limits,
             "collectives_check": case_collectives_check,
             "p2p_single_rank": case_p2p_single_rank,
             "p2p_group_shared_kernel": case_p2p_group_shared_kernel,
             "shared_kernel_grouped_ag_rs": case_shared_kernel_grouped_ag_rs,
             "job": lambda out: case_job(out, a)}
    for v in (3, 4, 5):
        cases[f"plugin_v{v}"] = lambda out, v=v: case_plugin(out, v)
    for v in (1, 2, 3, 4, 5):
        cases[f"recording_v{v}"] = lambda out, v=v: case_recording(out, v)
    if a.case not in cases:
        print(f"unknown case {a.case!r}; cases: {', '.join(cases)}", file=sys.stderr)
        return 2
    jv.CASE = a.case
    start = time.monotonic()
    try:
        if a.keep:
            os.makedirs(a.keep, exist_ok=True)
            cases[a.case](a.keep)
        else:
            with tempfile.TemporaryDirectory(prefix="gpuacct_job_") as out:
                cases[a.case](out)
    except Fail as e:
        print(f"FAIL {a.case}: {e}", file=sys.stderr)
        return 1
    print(f"PASS {a.case} ({time.monotonic() - start:.1f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
