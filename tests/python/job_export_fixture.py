"""A `gpuacct job --export DIR` directory made from a few parameters, for the gpuacct.job tests.

The tables follow docs/job_view.md (*Formats*, `gpuacct job --export`) column for column: the
step-rows CSV header of analysis/report/report.cc (step_rows_csv, asserted by
analysis/accounting/taxonomy_test.cc) and the rows-file columns of collective_rows.h, with the
job columns around them, and `rank` twice in job_collectives.csv (the job rank, then the rank in
the communicator), as the format says.

The job: synchronous data parallel.  Every rank works its own time in a step (the sum of its
walls before waiting); the step ends for everyone when the last rank arrives, so each rank
waits (its exposed communication) for the slowest; the last arrival made the others wait
(late_ns: its lead over the second slowest).  Each rank's step ends a little after the last
arrival (a random tail of host time), so step times differ between ranks and hosts.  One
rank, `straggler`, gets `straggler_data_ns` more data wait in every step after warm-up: the
planted straggler.

Nothing here is an expected answer: the tests compute those from `JobExport.steps` and
`JobExport.collectives` (the generated rows, as Python values) on their own.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Dict, List, Optional

from conftest import WALLS

STEP_ROW_COLUMNS = (
    "step_index,step_number,device,warmup,window_begin_ns,window_end_ns,duration_ns,"
    "compute_ns,comm_exposed_ns,copy_input_ns,copy_other_ns,data_wait_ns,launch_gap_ns,"
    "host_other_ns,wall_compute_ns,wall_communication_ns,wall_data_ns,wall_launch_ns,"
    "wall_other_ns,comm_total_ns,comm_overlapped_ns,gpu_busy_ns,kernels,copies,launches,"
    "flops,tokens,samples,sampled,sm_active_pct,tensor_active_pct,dram_pct,compute_sol_pct,"
    "memory_sol_pct").split(",")
# The hardware counter columns (docs/counters.md): doubles, empty without samples.
COUNTER_COLUMNS = ("sm_active_pct", "tensor_active_pct", "dram_pct", "compute_sol_pct",
                   "memory_sol_pct")
STEPS_HEADER = ["job", "host", "rank"] + STEP_ROW_COLUMNS + [
    "clock_offset_ns", "job_step_ns", "waited_ns", "late_ns"]
ROWS_FILE_COLUMNS = (
    "step_index,comm,seq,collective,bytes,datatype,algo,proto,rank,nranks,device,stream,"
    "host_enqueue_ns,gpu_start_ns,gpu_end_ns,source").split(",")
COLLECTIVES_HEADER = ["job", "host", "rank"] + ROWS_FILE_COLUMNS + [
    "arrival_ns", "last_rank", "wait_ns", "transfer_ns", "busbw_gbs"]
# The same columns as the dataset names them (the second `rank` is comm_rank).
COLLECTIVES_COLUMNS = COLLECTIVES_HEADER[:11] + ["comm_rank"] + COLLECTIVES_HEADER[12:]

# (collective, bytes or None, comm) of each step; the comm hash starts with zeros on purpose
# (it is a string, never a number).
STEP_COLLECTIVES = (
    ("AllReduce", 64 << 20, "00c2f0a11d2e4b7a"),
    ("AllReduce", 512, "00c2f0a11d2e4b7a"),
    ("AllGather", 3 << 20, "9f2c0a11d2e4b7aa"),
    ("ReduceScatter", 3 << 20, "9f2c0a11d2e4b7aa"),
    ("Broadcast", None, "9f2c0a11d2e4b7aa"),  # size unknown: empty bytes and busbw
)


@dataclass
class JobExport:
    directory: Path
    job: str
    ranks: int
    hosts: int
    straggler: int
    host_pattern: str = "node{}.cluster-a"
    steps: List[Dict[str, Any]] = field(default_factory=list)
    collectives: List[Dict[str, Any]] = field(default_factory=list)

    def host_of(self, rank: int) -> str:
        return host_name(rank, self.ranks, self.hosts, self.host_pattern)


def host_name(rank: int, ranks: int, hosts: int, pattern: str = "node{}.cluster-a") -> str:
    return pattern.format(rank // (ranks // hosts))


def _csv_value(v: Any) -> str:
    if v is None:
        return ""
    if isinstance(v, float):
        return repr(v)  # shortest text that reads back as the same double
    return str(v)


def write_csv(path: Path, header: List[str], columns: List[str], rows: List[Dict[str, Any]],
              comments: bool = False) -> None:
    lines = []
    if comments:
        lines.append('# gpuacct.job_export/1 {"note":"comment lines around the table"}')
    lines.append(",".join(header))
    lines += [",".join(_csv_value(r[c]) for c in columns) for r in rows]
    if comments:
        lines.append('# end {"rows":%d}' % len(rows))
    path.write_text("\n".join(lines) + "\n")


def _bus_factor(collective: str, n: int) -> float:
    # nccl-tests' bus bandwidth factors (facts, not code): allreduce 2(n-1)/n, allgather and
    # reducescatter (n-1)/n, broadcast 1.
    if collective == "AllReduce":
        return 2.0 * (n - 1) / n
    if collective in ("AllGather", "ReduceScatter"):
        return (n - 1) / n
    return 1.0


def make_job_export(directory: Path, *, ranks: int = 4, hosts: int = 2, steps: int = 12,
                    warmup: int = 2, straggler: int = 3, straggler_data_ns: int = 30_000_000,
                    job: str = "42", seed: int = 7, comments: bool = False,
                    with_collectives: bool = True,
                    host_pattern: str = "node{}.cluster-a") -> JobExport:
    assert ranks % hosts == 0
    rng = random.Random(seed)
    out = JobExport(directory=directory, job=job, ranks=ranks, hosts=hosts, straggler=straggler,
                    host_pattern=host_pattern)
    per_host = ranks // hosts
    t = 1_000_000_000
    seq: Dict[str, int] = {}
    for s in range(steps):
        is_warm = s < warmup
        walls: List[Dict[str, int]] = []
        for r in range(ranks):
            w = {"compute": 80_000_000 + rng.randrange(4_000_000),
                 "communication": 3_000_000 + rng.randrange(1_000_000),
                 "data": 2_000_000 + rng.randrange(2_000_000),
                 "launch": 400_000 + rng.randrange(200_000),
                 "other": 1_000_000 + rng.randrange(500_000)}
            if is_warm:
                w["compute"] += 50_000_000  # warm-up steps are slow for everyone
            if r == straggler and not is_warm:
                w["data"] += straggler_data_ns
            walls.append(w)
        own = [sum(w.values()) for w in walls]
        job_step = max(own)
        last = own.index(job_step)
        second = max(o for i, o in enumerate(own) if i != last)
        for r in range(ranks):
            waited = job_step - own[r]
            w = dict(walls[r])
            w["communication"] += waited  # waiting for the last rank is exposed communication
            tail = rng.randrange(300_000)  # each rank's step ends a little after the last arrival
            w["other"] += tail
            data_wait = w["data"] - w["data"] // 4
            out.steps.append({
                "job": job, "host": out.host_of(r), "rank": r,
                "step_index": s, "step_number": s, "device": r % per_host,
                "warmup": 1 if is_warm else 0, "window_begin_ns": t,
                "window_end_ns": t + job_step + tail, "duration_ns": job_step + tail,
                "compute_ns": w["compute"], "comm_exposed_ns": w["communication"],
                "copy_input_ns": w["data"] // 4, "copy_other_ns": 0, "data_wait_ns": data_wait,
                "launch_gap_ns": w["launch"], "host_other_ns": w["other"],
                **{f"wall_{k}_ns": w[k] for k in WALLS},
                "comm_total_ns": w["communication"], "comm_overlapped_ns": 0,
                "gpu_busy_ns": w["compute"] + w["communication"] + w["data"] // 4,
                "kernels": 200 + rng.randrange(5), "copies": 4, "launches": 210,
                "flops": float(rng.randrange(1, 10**6)) * 1.5e6 + 0.25,
                "tokens": float(rng.randrange(1, 10**6)) + 0.5, "samples": 0.0,
                "sampled": 1,
                # counters on even ranks only: the others' columns are empty (NULL)
                **{c: (rng.randrange(0, 10001) / 100.0 if r % 2 == 0 else None)
                   for c in COUNTER_COLUMNS},
                "clock_offset_ns": (r - 1) * 1_500_000 - 700,
                "job_step_ns": job_step, "waited_ns": waited,
                "late_ns": job_step - second if r == last else 0,
            })
        if with_collectives:
            for kind, size, comm in STEP_COLLECTIVES:
                seq[comm] = seq.get(comm, 0) + 1
                arrival = [t + rng.randrange(50_000_000) for _ in range(ranks)]
                if not is_warm:
                    arrival[straggler] += straggler_data_ns
                last_arrival = max(arrival)
                last_rank = arrival.index(last_arrival)
                transfer = 200_000 + (size or 0) // 100 + rng.randrange(100_000)
                for r in range(ranks):
                    own_transfer = transfer + rng.randrange(20_000)  # kernels end apart
                    busbw = (None if size is None else
                             size / own_transfer * _bus_factor(kind, ranks))  # bytes/ns = GB/s
                    out.collectives.append({
                        "job": job, "host": out.host_of(r), "rank": r,
                        "step_index": s, "comm": comm, "seq": seq[comm], "collective": kind,
                        "bytes": size, "datatype": "bf16", "algo": "RING", "proto": "SIMPLE",
                        "comm_rank": r, "nranks": ranks, "device": r % per_host, "stream": 13,
                        "host_enqueue_ns": arrival[r] - 20_000,
                        "gpu_start_ns": arrival[r], "gpu_end_ns": last_arrival + own_transfer,
                        "source": "nccl_plugin", "arrival_ns": arrival[r],
                        "last_rank": last_rank, "wait_ns": last_arrival - arrival[r],
                        "transfer_ns": own_transfer, "busbw_gbs": busbw,
                    })
        t += job_step + 1_000_000
    directory.mkdir(parents=True, exist_ok=True)
    write_csv(directory / "job_steps.csv", STEPS_HEADER, STEPS_HEADER, out.steps, comments)
    write_csv(directory / "job_collectives.csv", COLLECTIVES_HEADER, COLLECTIVES_COLUMNS,
              out.collectives, comments)
    return out


def rewrite_column(path: Path, column: str, fn: Optional[Any] = None, drop: bool = False,
                   row: Optional[int] = None) -> None:
    """Breaks a table: drops `column`, or replaces its value (in data row `row`, else all)."""
    lines = path.read_text().splitlines()
    hi = next(i for i, ln in enumerate(lines) if not ln.startswith("#"))
    header = lines[hi].split(",")
    ci = header.index(column)
    for i in range(hi, len(lines)):
        if lines[i].startswith("#"):
            continue
        cells = lines[i].split(",")
        if drop:
            del cells[ci]
        elif i > hi and (row is None or i - hi == row) and fn is not None:
            cells[ci] = fn(cells[ci])
        lines[i] = ",".join(cells)
    path.write_text("\n".join(lines) + "\n")
