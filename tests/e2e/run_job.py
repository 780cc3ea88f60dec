#!/usr/bin/env python3
"""Simulated multi-rank jobs: N rank processes of tests/e2e/job_driver on the simulated device
and the fake NCCL (tests/sim/fake_nccl), with libgpuacct.so injected by the fake driver as in
run_e2e.py.  One ctest per case:  run_job.py --build <build dir> <case> [--keep DIR]

  hosts       8 ranks on 2 simulated hosts (h0: ranks 0-3, clock -5 ms; h1: ranks 4-7, +5 ms)
              with +-50 us of per-rank clock jitter
  straggler   8 ranks; rank 2 waits 15 ms for data every step (the others 2 ms)
  straggler_nvtx
              the same with steps and data waits marked through NVTX instead of the C API
  slow_link   8 ranks; rank 5's link is 2x slower (every rank's transfers take twice as long)
  slow_gpu    8 ranks; rank 6's kernels take 1.3x as long
  tp          8 ranks in tensor-parallel pairs (4 TP communicators) and 2 data-parallel
              communicators of 4, with --mix: several communicators per rank
  no_plugin   8 ranks, no NCCL profiler plugin (the library's fallback path)
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

What every case checks: every rank exits 0 and writes its report (its rank, planted hostname,
job id, step count); the truth file is consistent across ranks (each (comm, seq) seen by every
rank, one true end for all, end = latest true start + transfer); the library's
<base>.collectives.csv rows against the truth: when it writes them, and required (every rank,
plugin identity) where the library is NCCL's plugin in the job (it exports ncclProfiler_vN).
The cases add their own.

Output (--keep DIR, else a temporary directory): DIR/reports/ (every rank's gpuacct files),
DIR/truth/rank<R>.jsonl (each rank's truth), DIR/truth.jsonl (all of them), DIR/job.json (the
planted job: ranks, hosts, offsets, knobs), DIR/logs/rank<R>.{out,err}.  tests/e2e/README.md
and tests/sim/fake_nccl/README.md describe the truth lines.
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import random
import subprocess
import sys
import tempfile
import time

BUILD = ""
LIBRARY = ""
RANK_TIMEOUT_S = 120
JOB_ID = "simjob42"
MS = 1_000_000


class Fail(Exception):
    pass


def check(cond: bool, msg: str) -> None:
    if not cond:
        raise Fail(msg)


def paths():
    lib = LIBRARY or os.path.join(BUILD, "inject", "libgpuacct.so")
    sim_lib = os.path.join(BUILD, "sim", "lib")
    driver = os.path.join(BUILD, "tests", "e2e", "job_driver")
    recorder = os.path.join(sim_lib, "test", "libsimnccl_recording_profiler.so")
    for p in (lib, sim_lib, driver, recorder):
        check(os.path.exists(p), f"missing build output {p}")
    return lib, sim_lib, driver, recorder


def exported_profiler_versions(lib: str) -> set:
    """The ncclProfiler_vN tables the library exports (nm -D), as NCCL would find them."""
    res = subprocess.run(["nm", "-D", "--defined-only", lib], stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True, check=False)
    check(res.returncode == 0, f"nm -D {lib} failed: {res.stderr}")
    found = set()
    for line in res.stdout.splitlines():
        name = line.split()[-1] if line.split() else ""
        if name.startswith("ncclProfiler_v") and name[14:].isdigit():
            found.add(int(name[14:]))
    return found


# ---- one job --------------------------------------------------------------------------------------

def plan(nranks: int, hosts: int, offsets_ms=None, jitter_us: int = 0, seed: int = 7):
    """Rank -> (hostname, planted clock offset ns): ranks split evenly over the hosts; ranks of
    one host share its offset, plus a seeded per-rank jitter in [-jitter, +jitter]."""
    rng = random.Random(seed)
    per_host = nranks // hosts
    out = []
    for r in range(nranks):
        h = min(r // per_host, hosts - 1)
        off = int((offsets_ms[h] if offsets_ms else 0) * MS)
        if jitter_us:
            off += rng.randint(-jitter_us, jitter_us) * 1000
        out.append((f"simhost{h}", off))
    return out


def run_job(out: str, nranks: int, layout, *, steps: int = 30, plugin: str = "",
            api: int = 5, rank_args=None, rank_env=None, common_args=(), inject=True) -> dict:
    """Starts the ranks together and waits for all; returns the job description written to
    out/job.json.  rank_args / rank_env: rank -> extra arguments / environment."""
    lib, sim_lib, driver, _ = paths()
    for d in ("reports", "truth", "logs"):
        os.makedirs(os.path.join(out, d), exist_ok=True)
    base = time.time_ns()  # the ranks' common true clock starts here
    nnodes = len({h for h, _ in layout})
    clean = {k: v for k, v in os.environ.items()
             if not k.startswith(("GPUACCT_", "CUDA_INJECTION", "NVTX_INJECTION", "LD_PRELOAD",
                                  "NCCL_", "RANK", "WORLD_SIZE", "LOCAL_RANK", "SLURM_"))}
    procs = []
    job = {"nranks": nranks, "steps": steps, "clock_base_ns": base, "plugin": plugin,
           "profiler_api": api, "ranks": []}
    for r in range(nranks):
        host, offset = layout[r]
        env = dict(clean)
        env.update(
            LD_LIBRARY_PATH=sim_lib, CUDA_INJECTION64_PATH=lib if inject else "none",
            GPUACCT_OUTPUT_DIR=os.path.join(out, "reports"), GPUACCT_QUIET="1",
            GPUACCT_JOB_ID=JOB_ID, RANK=str(r), WORLD_SIZE=str(nranks),
            LOCAL_RANK=str(r - [h for h, _ in layout].index(host)),
            GPUACCT_SIM_HOSTNAME=host, GPUACCT_SIM_CLOCK_BASE_NS=str(base),
            GPUACCT_SIM_CLOCK_OFFSET_NS=str(offset),
            GPUACCT_SIM_NCCL_RENDEZVOUS=os.path.join(out, "rendezvous.bin"),
            GPUACCT_SIM_NCCL_TRUTH=os.path.join(out, "truth", f"rank{r}.jsonl"),
            GPUACCT_SIM_NCCL_PROFILER_API=str(api), GPUACCT_SIM_NCCL_TIMEOUT_S="60")
        if plugin:
            env["NCCL_PROFILER_PLUGIN"] = plugin
        env.update((rank_env or {}).get(r, {}))
        args = [driver, f"--steps={steps}", f"--nnodes={nnodes}", *common_args,
                *((rank_args or {}).get(r, []))]
        job["ranks"].append({"rank": r, "host": host, "clock_offset_ns": offset, "args": args[1:],
                             "env": {k: v for k, v in env.items()
                                     if k.startswith(("GPUACCT_SIM", "NCCL_"))}})
        so = open(os.path.join(out, "logs", f"rank{r}.out"), "w")
        se = open(os.path.join(out, "logs", f"rank{r}.err"), "w")
        procs.append((subprocess.Popen(args, env=env, stdout=so, stderr=se), so, se))
    # A rank that fails makes the others wait at their next collective: stop them at once
    # (its own error is the one to read) instead of after the rendezvous timeout.
    deadline = time.monotonic() + RANK_TIMEOUT_S
    codes = {}
    while len(codes) < nranks:
        for r, (p, _, _) in enumerate(procs):
            if r not in codes and p.poll() is not None:
                codes[r] = p.returncode
        failed = any(c != 0 for c in codes.values())
        if failed or time.monotonic() > deadline:
            for r, (p, _, _) in enumerate(procs):
                if r not in codes:
                    p.kill()
                    p.wait()
                    codes[r] = "killed" if failed else "timeout"
        time.sleep(0.01)
    failures = []
    for r, (p, so, se) in enumerate(procs):
        so.close()
        se.close()
        if codes[r] != 0:
            with open(os.path.join(out, "logs", f"rank{r}.err")) as f:
                failures.append(f"rank {r} exited {codes[r]}: {f.read()[-2000:]}")
    with open(os.path.join(out, "job.json"), "w") as f:
        json.dump(job, f, indent=1)
    check(not failures, "\n".join(failures))
    merge_truth(out, nranks)
    return job


def merge_truth(out: str, nranks: int) -> None:
    lines = []
    for r in range(nranks):
        with open(os.path.join(out, "truth", f"rank{r}.jsonl")) as f:
            lines.extend(f.read().splitlines())
    with open(os.path.join(out, "truth.jsonl"), "w") as f:
        f.write("\n".join(lines) + "\n")


def load_truth(out: str) -> list:
    with open(os.path.join(out, "truth.jsonl")) as f:
        return [json.loads(line) for line in f if line.strip()]


def rank_reports(out: str, nranks: int) -> dict:
    """rank -> its report; each rank exactly one."""
    found = {}
    for path in glob.glob(os.path.join(out, "reports", "gpuacct_*.json")):
        with open(path) as f:
            rep = json.load(f)
        r = rep["run"]["rank"]
        check(r not in found, f"two reports for rank {r}")
        found[r] = rep
    check(sorted(found) == list(range(nranks)),
          f"reports for ranks {sorted(found)}, expected 0..{nranks - 1}")
    return found


# ---- shared checks ----------------------------------------------------------------------------------

def check_truth(truth: list, job: dict) -> dict:
    """Cross-rank consistency of the fake NCCL's truth; returns (comm, kind, seq) -> rows.
    A row's "rank" is its rank in the communicator, "process_rank" the job's rank."""
    n = job["nranks"]
    comms = [t for t in truth if t["kind"] == "comm"]
    check(sorted({c["process_rank"] for c in comms}) == list(range(n)),
          f"communicator lines from ranks {sorted({c['process_rank'] for c in comms})}")
    for c in comms:
        planted = job["ranks"][c["process_rank"]]["clock_offset_ns"]
        check(c["clock_offset_ns"] == planted,
              f"rank {c['process_rank']}: clock offset {c['clock_offset_ns']}, planted {planted}")
    groups = {}
    for t in truth:
        if t["kind"] in ("coll", "p2p"):
            groups.setdefault((t["comm"], t["kind"], t["seq"]), []).append(t)
            check(t["gpu_start_ns"] - t["true_gpu_start_ns"] == t["clock_offset_ns"]
                  and t["gpu_end_ns"] - t["true_gpu_end_ns"] == t["clock_offset_ns"],
                  f"local and true times differ by other than the offset: {t}")
    check(groups, "no collectives in the truth")
    for key, rows in groups.items():
        size = rows[0]["nranks"]
        check(sorted(r["rank"] for r in rows) == list(range(size)),
              f"{key}: ranks {sorted(r['rank'] for r in rows)} of {size}")
        ends = {r["true_gpu_end_ns"] for r in rows}
        check(len(ends) == 1, f"{key}: true ends differ across ranks: {ends}")
        latest = max(r["true_gpu_start_ns"] for r in rows)
        last = [r["rank"] for r in rows if r["true_gpu_start_ns"] == latest]
        for r in rows:
            check(r["true_gpu_end_ns"] == latest + r["transfer_ns"],
                  f"{key} rank {r['rank']}: end != latest start + transfer")
            check(r["last_rank"] in last, f"{key}: last_rank {r['last_rank']}, latest {last}")
            check(r["wait_ns"] == latest - r["true_gpu_start_ns"], f"{key}: wait_ns wrong")
    return groups


def check_reports(out: str, job: dict) -> dict:
    reps = rank_reports(out, job["nranks"])
    for r, rep in reps.items():
        run = rep["run"]
        host = job["ranks"][r]["host"]
        check(run.get("hostname") == host, f"rank {r}: hostname {run.get('hostname')!r}, planted "
                                           f"{host!r}")
        check(run.get("world_size") == job["nranks"], f"rank {r}: world_size {run.get('world_size')}")
        check(str(run.get("job_id")) == JOB_ID, f"rank {r}: job_id {run.get('job_id')!r}")
        steps = [s for s in rep["steps"] if s["device"] == 0]
        check(len(steps) == job["steps"], f"rank {r}: {len(steps)} steps, ran {job['steps']}")
    return reps


def per_step(rep: dict, category: str) -> float:
    """Mean ns per step of one category of the report's step rows."""
    rows = [s for s in rep["steps"] if s["device"] == 0]
    return sum(s["categories"][category] for s in rows) / len(rows)


def wall(rep: dict, name: str) -> float:
    """Mean ns per step of one wall (data, launch, communication, compute, other)."""
    rows = [s for s in rep["steps"] if s["device"] == 0]
    return sum(s["walls"][name] for s in rows) / len(rows)


def truth_steps(out: str, groups: dict) -> dict:
    """rank -> host enqueue time of each of its collectives -> the step whose host range holds
    it (-1: none)."""
    step_lines = [t for t in load_truth(out) if t["kind"] == "step"]
    steps = {}
    for rows in groups.values():
        for t in rows:
            rank = t["process_rank"]
            inside = [x["step"] for x in step_lines if x["rank"] == rank
                      and x["host_begin_ns"] <= t["host_enqueue_ns"] < x["host_end_ns"]]
            steps.setdefault(rank, {})[t["host_enqueue_ns"]] = inside[0] if inside else -1
    return steps


def check_collectives_files(out: str, groups: dict, job: dict, plugin_rows: bool = False) -> int:
    """Compares the library's <base>.collectives.csv files (docs/job_view.md), when it writes
    them, with the truth: each file complete (its trailer; every instance of its rank in a
    row) and each row the truth's instance with the same GPU start (within 1 us): same type,
    bytes (collectives), GPU end (within 1 us), and with plugin identity the same comm (and
    seq, for collectives).
    plugin_rows: every rank must have written its file with plugin identity (the library is
    NCCL's plugin in this job).  Returns how many rows matched."""
    files = sorted(glob.glob(os.path.join(out, "reports", "*.collectives.csv")))
    if plugin_rows:
        check(len(files) == job["nranks"], f"{len(files)} collectives files for "
                                           f"{job['nranks']} ranks of a job with the plugin")
    steps = truth_steps(out, groups)
    by_rank = {}  # the job's rank -> its collectives of every communicator
    for rows in groups.values():
        for t in rows:
            by_rank.setdefault(t["process_rank"], []).append(t)
    matched = 0
    for path in files:
        with open(path) as f:
            lines = f.read().splitlines()
        check(lines and lines[0].startswith("# gpuacct.collectives/1 "), f"{path}: no header")
        check(lines[-1].startswith("# end "), f"{path}: no trailer (cut off)")
        header = json.loads(lines[0].split(" ", 2)[2])
        rank = header["rank"]
        plugin_identity = header.get("identity") == "nccl_plugin"
        check(plugin_identity or not plugin_rows,
              f"{path}: identity {header.get('identity')!r} in a job with the plugin")
        cols = lines[1].split(",")
        seen = set()
        for line in lines[2:-1]:
            row = dict(zip(cols, line.split(",")))
            start = int(row["gpu_start_ns"])
            t = next((x for x in by_rank.get(rank, []) if abs(x["gpu_start_ns"] - start) <= 1000),
                     None)
            check(t is not None, f"{path}: no collective of rank {rank} starts at {start}: {line}")
            where = f"{path} (comm {t['comm']}, {t['kind']} seq {t['seq']})"
            check(row["collective"] == t["collective"], f"{where}: type {row['collective']}")
            # Bytes: known from the plugin's events (a p2p row: one of its group's messages),
            # possibly unknown (empty) with another identity, never wrong.
            sizes = {t["bytes"]} if t["kind"] == "coll" else {o["bytes"] for o in t["ops"]}
            check((row["bytes"] == "" and not plugin_identity) or
                  (row["bytes"] != "" and int(row["bytes"]) in sizes),
                  f"{where}: bytes {row['bytes']!r}, true {sorted(sizes)}")
            # The step: the one whose host range holds the enqueue (-1 = none given).
            step = steps.get(rank, {}).get(t["host_enqueue_ns"])
            check(int(row["step_index"]) in (-1, step),
                  f"{where}: step {row['step_index']}, enqueued in step {step}")
            check(abs(int(row["gpu_end_ns"]) - t["gpu_end_ns"]) <= 1000,
                  f"{where}: gpu_end {row['gpu_end_ns']}, true {t['gpu_end_ns']}")
            # With plugin identity the comm is NCCL's and a collective's seq too; NCCL's p2p
            # events carry no sequence number, so a p2p row's seq is the writer's own count.
            if plugin_identity:
                check(row["comm"] == t["comm"], f"{where}: row names comm {row['comm']}")
                check(t["kind"] == "p2p" or int(row["seq"]) == t["seq"],
                      f"{where}: row names seq {row['seq']}")
            seen.add((t["comm"], t["kind"], t["seq"]))
            matched += 1
        want = {(t["comm"], t["kind"], t["seq"]) for t in by_rank.get(rank, [])}
        check(seen == want, f"{path}: {len(want - seen)} collectives of rank {rank} have no row")
    return matched


# ---- cases ----------------------------------------------------------------------------------------

def case_hosts(out: str) -> None:
    lib, _, _, _ = paths()
    layout = plan(8, 2, offsets_ms=[-5, 5], jitter_us=50)
    job = run_job(out, 8, layout, steps=30, plugin=lib)
    truth = load_truth(out)
    groups = check_truth(truth, job)
    reps = check_reports(out, job)
    offsets = sorted({o for _, o in layout})
    check(len(offsets) == 8 and max(offsets) - min(offsets) > 9 * MS,
          f"planted offsets not spread as asked: {offsets}")
    # Each report is on its rank's own (planted) clock: its step begins are the truth's local
    # ones, while the true begins are one instant for all ranks -- so the reports of the two
    # hosts disagree by the offsets (what the job view's clock alignment must undo).
    true_begins = {}
    for r, rep in reps.items():
        steps = sorted((t for t in truth if t["kind"] == "step" and t["rank"] == r),
                       key=lambda t: t["step"])
        check(len(steps) == 30, f"rank {r}: {len(steps)} step lines in the truth")
        rows = sorted((x for x in rep["steps"] if x["device"] == 0), key=lambda x: x["step_index"])
        for row, t in zip(rows, steps):
            check(abs(row["host_begin_ns"] - t["host_begin_ns"]) <= 10_000,
                  f"rank {r} step {t['step']}: report begins {row['host_begin_ns']}, the rank's "
                  f"clock said {t['host_begin_ns']}")
            true_begins.setdefault(t["step"], set()).add(t["true_host_begin_ns"])
    check(all(len(v) == 1 for v in true_begins.values()),
          "ranks with the same work began a step at different true times")
    apart = [reps[4]["steps"][i]["host_begin_ns"] - reps[0]["steps"][i]["host_begin_ns"]
             for i in range(30)]
    want = layout[4][1] - layout[0][1]
    check(all(abs(a - want) <= 10_000 for a in apart),
          f"rank 4 vs rank 0 step begins {apart[:3]}..., planted offsets {want} apart")
    matched = check_collectives_files(out, groups, job,
                                      plugin_rows=bool(exported_profiler_versions(lib)))
    print(f"hosts: {len(groups)} collective instances, offsets {offsets}; reports of rank 0 and "
          f"4 disagree by {want / MS:.3f} ms on every step; {matched} collectives rows matched")


def case_straggler(out: str, marks: str = "capi") -> None:
    lib, _, _, _ = paths()
    job = run_job(out, 8, plan(8, 2), plugin=lib, rank_args={2: ["--data-ms=15"]},
                  common_args=[f"--marks={marks}"])
    groups = check_truth(load_truth(out), job)
    reps = check_reports(out, job)
    firsts = [rows for (c, k, s), rows in groups.items() if s % 2 == 0]
    check(all(next(x for x in rows if x["rank"] == 0)["last_rank"] == 2 for rows in firsts),
          "rank 2 is not the last to arrive at every step's first AllReduce")
    straggler = reps[2]
    data = wall(straggler, "data")
    check(data >= 14 * MS, f"straggler: data wall {data / MS:.2f} ms per step, planted 15")
    check(wall(straggler, "communication") < 5 * MS,
          f"straggler: communication wall {wall(straggler, 'communication') / MS:.2f} ms per step")
    check(straggler["verdict"]["bound"] == "data",
          f"straggler verdict {straggler['verdict']['bound']!r}")
    for r, rep in reps.items():
        if r == 2:
            continue
        comm = wall(rep, "communication")
        check(comm >= 12 * MS, f"rank {r}: communication wall {comm / MS:.2f} ms per step: the "
                               "13 ms wait for the straggler should show")
        check(wall(rep, "data") < 3 * MS, f"rank {r}: data wall {wall(rep, 'data') / MS:.2f} ms")
        check(rep["verdict"]["bound"] == "communication",
              f"rank {r}: verdict {rep['verdict']['bound']!r}, expected communication")
    matched = check_collectives_files(out, groups, job,
                                      plugin_rows=bool(exported_profiler_versions(lib)))
    peers = min(wall(reps[r], "communication") for r in reps if r != 2)
    print(f"straggler: rank 2 data wall {data / MS:.2f} ms/step, communication wall "
          f"{wall(straggler, 'communication') / MS:.2f}; its peers' communication walls >= "
          f"{peers / MS:.2f} ms/step; {matched} collectives rows matched")


def case_slow_link(out: str) -> None:
    lib, _, _, _ = paths()
    job = run_job(out, 8, plan(8, 2), plugin=lib,
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
    # Every rank waits for the slow link alike: no rank looks different in its own report.
    walls = [wall(rep, "communication") for rep in reps.values()]
    check(max(walls) - min(walls) < 0.1 * MS, f"communication walls differ: {walls}")
    matched = check_collectives_files(out, groups, job,
                                      plugin_rows=bool(exported_profiler_versions(lib)))
    print(f"slow_link: transfer {rows[0]['transfer_ns'] / MS:.3f} ms per 64 MiB AllReduce on 8 "
          f"ranks, communication wall {walls[0] / MS:.2f} ms/step on every rank; {matched} "
          "collectives rows matched")


def case_slow_gpu(out: str) -> None:
    """Rank 6's kernels take 1.3x as long: it arrives last at every AllReduce; its report shows
    more compute, the others wait in communication."""
    lib, _, _, _ = paths()
    job = run_job(out, 8, plan(8, 2), plugin=lib, rank_args={6: ["--compute-scale=1.3"]})
    groups = check_truth(load_truth(out), job)
    reps = check_reports(out, job)
    check(all(next(x for x in rows if x["rank"] == 0)["last_rank"] == 6
              for (c, k, seq), rows in groups.items()),
          "rank 6 is not the last to arrive at every AllReduce")
    slow = wall(reps[6], "compute")
    check(abs(slow - 1.3 * 16 * MS) <= 0.1 * MS, f"rank 6: compute {slow / MS:.2f} ms per step, "
                                                  "planted 1.3 x 16 ms")
    for r, rep in reps.items():
        if r != 6:
            check(wall(rep, "communication") >= wall(reps[6], "communication") + 3 * MS,
                  f"rank {r}: communication wall {wall(rep, 'communication') / MS:.2f} ms, the "
                  f"slow rank's {wall(reps[6], 'communication') / MS:.2f}")
    matched = check_collectives_files(out, groups, job,
                                      plugin_rows=bool(exported_profiler_versions(lib)))
    print(f"slow_gpu: rank 6 compute {slow / MS:.2f} ms/step, communication wall "
          f"{wall(reps[6], 'communication') / MS:.2f}; rank 0's {wall(reps[0], 'communication') / MS:.2f}"
          f"; {matched} collectives rows matched")


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
    job = run_job(out, 8, plan(8, 2), plugin="none")
    truth = load_truth(out)
    groups = check_truth(truth, job)
    reps = check_reports(out, job)
    check(all(t["plugin_version"] == 0 for t in truth if t["kind"] == "comm"),
          "a plugin was loaded with NCCL_PROFILER_PLUGIN=none")
    for r, rep in reps.items():
        check(per_step(rep, "comm_exposed") > 0, f"rank {r}: no communication time at all")
    matched = check_collectives_files(out, groups, job)
    print(f"no_plugin: {matched} collectives rows matched the truth")


def case_plugin(out: str, version: int) -> None:
    lib, _, _, _ = paths()
    job = run_job(out, 4, plan(4, 2, offsets_ms=[-5, 5]), steps=10, plugin=lib, api=version,
                  common_args=["--mix"])
    truth = load_truth(out)
    groups = check_truth(truth, job)
    check_reports(out, job)
    exported = {v for v in exported_profiler_versions(lib) if v <= version}
    want = max(exported) if exported else 0
    got = {t["plugin_version"] for t in truth if t["kind"] == "comm"}
    check(got == {want}, f"plugin version in use {got}; the library exports {sorted(exported)}, "
                         f"NCCL knows up to v{version}: expected v{want}")
    matched = check_collectives_files(out, groups, job, plugin_rows=want > 0)
    print(f"plugin_v{version}: library exports {sorted(exported_profiler_versions(lib))}, "
          f"in use v{want}; {matched} collectives rows matched the truth")


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


def write_rows_file(path: str, rank: int, rows: list, identity: str = "nccl_plugin") -> None:
    """A <base>.collectives.csv in the contract's format (docs/job_view.md) from truth rows."""
    cols = ("step_index,comm,seq,collective,bytes,datatype,algo,proto,rank,nranks,device,stream,"
            "host_enqueue_ns,gpu_start_ns,gpu_end_ns,source")
    lines = ["# gpuacct.collectives/1 " + json.dumps({"rank": rank, "identity": identity}), cols]
    for t in rows:
        lines.append(",".join(str(x) for x in (
            t.get("step_index", -1), t["comm"], t["seq"], t["collective"], t["bytes"], t.get("datatype", ""), "RING",
            "LL", rank, t["nranks"], 0, t["stream"], t["host_enqueue_ns"], t["gpu_start_ns"],
            t["gpu_end_ns"], identity)))
    lines.append("# end " + json.dumps({"rows": len(rows), "rows_lost": 0}))
    with open(path, "w") as f:
        f.write("\n".join(lines) + "\n")


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
    global BUILD, LIBRARY
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--build", required=True)
    ap.add_argument("--library", default="", help="libgpuacct.so to test (default: the build's)")
    ap.add_argument("--keep", default="", help="write the job here and keep it")
    ap.add_argument("case")
    a = ap.parse_args()
    BUILD, LIBRARY = os.path.abspath(a.build), a.library
    cases = {"hosts": case_hosts, "straggler": case_straggler,
             "straggler_nvtx": lambda out: case_straggler(out, "nvtx"), "slow_link": case_slow_link,
             "slow_gpu": case_slow_gpu, "tp": case_tp,
             "no_plugin": case_no_plugin, "rank_missing": case_rank_missing,
             "recording_limits": case_recording_limits,
             "collectives_check": case_collectives_check}
    for v in (3, 4, 5):
        cases[f"plugin_v{v}"] = lambda out, v=v: case_plugin(out, v)
    for v in (1, 2, 3, 4, 5):
        cases[f"recording_v{v}"] = lambda out, v=v: case_recording(out, v)
    if a.case not in cases:
        print(f"unknown case {a.case!r}; cases: {', '.join(cases)}", file=sys.stderr)
        return 2
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
