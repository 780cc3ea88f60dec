"""Simulated multi-rank jobs on the fake NCCL (tests/sim/fake_nccl): starting the rank
processes of tests/e2e/job_driver with libgpuacct.so injected, reading the fake's truth, the
checks every case shares, and the comparison of the library's <base>.collectives.csv rows with
the truth.  The cases are in run_job.py; other tests may import this module (configure() first).
"""

from __future__ import annotations

import glob
import json
import os
import random
import subprocess
import time

from e2e_harness import Fail, check  # noqa: F401  (re-exported: run_job, job_view_checks)

BUILD = ""  # configure()
LIBRARY = ""
RANK_TIMEOUT_S = 120
JOB_ID = "simjob42"
MS = 1_000_000
# The fake NCCL's order of a plan's profiler events and its kernel launch
# (GPUACCT_SIM_NCCL_EVENT_ORDER): NCCL's own, "launch_first", unless a case or
# run_job.py --event-order says "events_first".
EVENT_ORDER = "launch_first"
# The host time the fake NCCL charges per collective / send / receive call
# (GPUACCT_SIM_NCCL_CALL_COST_NS); None: the fake's default (2 us).  0 makes a plan's profiler
# events and the next plan's launch fall on one nanosecond, as a coarse clock would.
CALL_COST_NS = None


def configure(build: str, library: str = "", event_order: str = "launch_first",
              call_cost_ns=None) -> None:
    """The build directory (and optionally another libgpuacct.so) the jobs use, the fake
    NCCL's event order (launch_first: NCCL's; events_first) and host cost per call."""
    global BUILD, LIBRARY, EVENT_ORDER, CALL_COST_NS
    check(event_order in ("launch_first", "events_first"), f"event order {event_order!r}")
    BUILD, LIBRARY, EVENT_ORDER = os.path.abspath(build), library, event_order
    CALL_COST_NS = call_cost_ns


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
    """Rank -> (hostname, planted clock offset ns): ranks split evenly over the hosts.  Ranks of
    one host read one CLOCK_REALTIME, so they share its offset exactly: the host's entry of
    offsets_ms plus a seeded per-host jitter in [-jitter, +jitter] us, drawn once per host."""
    rng = random.Random(seed)
    per_host = nranks // hosts
    host_offset = []
    for h in range(hosts):
        off = int((offsets_ms[h] if offsets_ms else 0) * MS)
        if jitter_us:
            off += rng.randint(-jitter_us, jitter_us) * 1000
        host_offset.append(off)
    out = []
    for r in range(nranks):
        h = min(r // per_host, hosts - 1)
        out.append((f"simhost{h}", host_offset[h]))
    return out


def run_job(out: str, nranks: int, layout, *, steps: int = 30, plugin: str = "",
            api: int = 5, rank_args=None, rank_env=None, common_args=(), inject=True,
            rank_dirs: bool = False, pattern: str = "") -> dict:
    """Starts the ranks together and waits for all; returns the job description written to
    out/job.json.  rank_args / rank_env: rank -> extra arguments / environment.  rank_dirs:
    each rank writes its outputs into its own folder out/reports/rank<R> (else all into
    out/reports); pattern: GPUACCT_OUTPUT_PATTERN (else the library's default)."""
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
           "profiler_api": api, "event_order": EVENT_ORDER, "ranks": []}
    for r in range(nranks):
        host, offset = layout[r]
        env = dict(clean)
        env.update(
            LD_LIBRARY_PATH=sim_lib, CUDA_INJECTION64_PATH=lib if inject else "none",
            GPUACCT_OUTPUT_DIR=os.path.join(out, "reports", f"rank{r}") if rank_dirs
            else os.path.join(out, "reports"), GPUACCT_QUIET="1",
            GPUACCT_JOB_ID=JOB_ID, RANK=str(r), WORLD_SIZE=str(nranks),
            LOCAL_RANK=str(r - [h for h, _ in layout].index(host)),
            GPUACCT_SIM_HOSTNAME=host, GPUACCT_SIM_CLOCK_BASE_NS=str(base),
            GPUACCT_SIM_CLOCK_OFFSET_NS=str(offset),
            GPUACCT_SIM_NCCL_RENDEZVOUS=os.path.join(out, "rendezvous.bin"),
            GPUACCT_SIM_NCCL_TRUTH=os.path.join(out, "truth", f"rank{r}.jsonl"),
            GPUACCT_SIM_NCCL_PROFILER_API=str(api), GPUACCT_SIM_NCCL_TIMEOUT_S="60",
            GPUACCT_SIM_NCCL_EVENT_ORDER=EVENT_ORDER)
        if CALL_COST_NS is not None:
            env["GPUACCT_SIM_NCCL_CALL_COST_NS"] = str(CALL_COST_NS)
        if plugin:
            env["NCCL_PROFILER_PLUGIN"] = plugin
        if pattern:
            env["GPUACCT_OUTPUT_PATTERN"] = pattern
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
    summarize_truth(out, job)
    return job


def merge_truth(out: str, nranks: int) -> None:
    lines = []
    for r in range(nranks):
        with open(os.path.join(out, "truth", f"rank{r}.jsonl")) as f:
            lines.extend(f.read().splitlines())
    with open(os.path.join(out, "truth.jsonl"), "w") as f:
        f.write("\n".join(lines) + "\n")


def summarize_truth(out: str, job: dict) -> dict:
    """Per step and rank, on the true clock: the step's host range, the time its collectives
    waited for a later rank (sum of wait_ns of those enqueued in the step) and how many of them
    it arrived last at (ties count for each latest rank).  Written to DIR/truth_summary.json:
    the expected side of the job view's per-rank step numbers."""
    truth = load_truth(out)
    steps = truth_steps(out, check_truth(truth, job))
    per = {}  # (step, rank) -> summary
    for t in truth:
        if t["kind"] == "step":
            per[(t["step"], t["rank"])] = {"rank": t["rank"], "true_begin_ns": t["true_host_begin_ns"],
                                           "true_end_ns": t["true_host_end_ns"], "waited_ns": 0,
                                           "last_arrivals": 0}
    for t in truth:
        if t["kind"] in ("coll", "p2p"):
            s = per.get((steps[t["process_rank"]][t["host_enqueue_ns"]], t["process_rank"]))
            if s is not None:
                s["waited_ns"] += t["wait_ns"]
                s["last_arrivals"] += 1 if t["wait_ns"] == 0 else 0
    out_steps = []
    for step in sorted({k[0] for k in per}):
        ranks = [per[(step, r)] for r in range(job["nranks"]) if (step, r) in per]
        out_steps.append({"step": step, "true_begin_ns": min(x["true_begin_ns"] for x in ranks),
                          "true_end_ns": max(x["true_end_ns"] for x in ranks), "ranks": ranks})
    summary = {"schema": "simjob.truth_summary/1",
               "ranks": [{"rank": x["rank"], "host": x["host"],
                          "clock_offset_ns": x["clock_offset_ns"]} for x in job["ranks"]],
               "steps": out_steps}
    with open(os.path.join(out, "truth_summary.json"), "w") as f:
        json.dump(summary, f, indent=1)
    return summary


def load_truth(out: str) -> list:
    with open(os.path.join(out, "truth.jsonl")) as f:
        return [json.loads(line) for line in f if line.strip()]


def output_files(out: str, suffix: str) -> list:
    """The ranks' output files ending in `suffix` (<base>.report.json, .collectives.csv, ...):
    in out/reports, or in its per-rank folders (run_job rank_dirs)."""
    return sorted(glob.glob(os.path.join(out, "reports", "*" + suffix)) +
                  glob.glob(os.path.join(out, "reports", "*", "*" + suffix)))


def rank_reports(out: str, nranks: int) -> dict:
    """rank -> its report; each rank exactly one."""
    found = {}
    for path in output_files(out, ".report.json"):
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
        device = min((s["device"] for s in rep["steps"]), default=0)  # --device-per-local-rank
        steps = [s for s in rep["steps"] if s["device"] == device]
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


def p2p_pair_comm(comm_hex: str, rank: int, peer: int, func: str) -> str:
    """The rows' comm of a p2p transfer (docs/job_view.md, Identity): FNV-1a 64 of b"p2p", the
    communicator hash (8 bytes little-endian) and sender and receiver ranks (4 bytes each)."""
    sender, receiver = (rank, peer) if func.lower().startswith("send") else (peer, rank)
    key = (b"p2p" + int(comm_hex, 16).to_bytes(8, "little") +
           (sender & 0xFFFFFFFF).to_bytes(4, "little") + (receiver & 0xFFFFFFFF).to_bytes(4, "little"))
    h = 0xcbf29ce484222325
    for byte in key:
        h = ((h ^ byte) * 0x100000001b3) & 0xFFFFFFFFFFFFFFFF
    return f"{h:016x}"


def check_collectives_files(out: str, groups: dict, job: dict, plugin_rows: bool = False) -> int:
    """Compares the library's <base>.collectives.csv files (docs/job_view.md), when it writes
    them, with the truth: each file complete (its trailer; every instance of its rank in a
    row) and each row the truth's instance with the same GPU start (within 1 us): same type,
    bytes (collectives), GPU end (within 1 us), and with plugin identity the same comm (and
    seq, for collectives).
    plugin_rows: every rank must have written its file with plugin identity (the library is
    NCCL's plugin in this job).  Returns how many rows matched."""
    files = output_files(out, ".collectives.csv")
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
            # Several operations can share one kernel (a fused group's collectives): the one of
            # the row's type (and seq, for a plugin collective) among those starting there.
            cands = [x for x in by_rank.get(rank, []) if abs(x["gpu_start_ns"] - start) <= 1000]
            t = next((x for x in cands if x["collective"] == row["collective"] and
                      (x["kind"] == "p2p" or not plugin_identity or str(x["seq"]) == row["seq"])),
                     cands[0] if cands else None)
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
            if plugin_identity and t["kind"] == "p2p":
                # A transfer is named by its communicator and (sender, receiver): the same on
                # both ranks (docs/job_view.md, Identity), recomputed here from the spec.
                pairs = {p2p_pair_comm(t["comm"], t["rank"], o["peer"], o["func"])
                         for o in t["ops"]}
                check(row["comm"] in pairs, f"{where}: row names comm {row['comm']}, "
                                            f"expected one of {sorted(pairs)}")
            elif plugin_identity:
                check(row["comm"] == t["comm"], f"{where}: row names comm {row['comm']}")
                check(t["kind"] == "p2p" or int(row["seq"]) == t["seq"],
                      f"{where}: row names seq {row['seq']}")
            # How many operations the kernel carried: the plugin knows it (NCCL's Group of the
            # kernel plan); other identities may leave it unknown (empty), never wrong.
            if "kernel_ops" in row and "kernel_ops" in t:
                check((row["kernel_ops"] == "" and not plugin_identity) or
                      row["kernel_ops"] == str(t["kernel_ops"]),
                      f"{where}: kernel_ops {row['kernel_ops']!r}, the kernel ran "
                      f"{t['kernel_ops']} operation(s)")
            seen.add((t["comm"], t["kind"], t["seq"]))
            matched += 1
        want = {(t["comm"], t["kind"], t["seq"]) for t in by_rank.get(rank, [])}
        check(seen == want, f"{path}: {len(want - seen)} collectives of rank {rank} have no row")
    return matched


def write_rows_file(path: str, rank: int, rows: list, identity: str = "nccl_plugin") -> None:
    """A <base>.collectives.csv in the contract's format (docs/job_view.md) from truth rows."""
    cols = ("step_index,comm,seq,collective,bytes,datatype,algo,proto,rank,nranks,device,stream,"
            "host_enqueue_ns,gpu_start_ns,gpu_end_ns,source")
    lines = ["# gpuacct.collectives/1 " + json.dumps({"rank": rank, "identity": identity}), cols]
    for t in rows:
        comm = t["comm"] if t["kind"] != "p2p" else p2p_pair_comm(
            t["comm"], t["rank"], t["ops"][0]["peer"], t["ops"][0]["func"])
        lines.append(",".join(str(x) for x in (
            t.get("step_index", -1), comm, t["seq"], t["collective"], t["bytes"], t.get("datatype", ""), "RING",
            "SIMPLE", rank, t["nranks"], 0, t["stream"], t["host_enqueue_ns"], t["gpu_start_ns"],
            t["gpu_end_ns"], identity)))
    lines.append("# end " + json.dumps({"rows": len(rows), "rows_lost": 0}))
    with open(path, "w") as f:
        f.write("\n".join(lines) + "\n")
