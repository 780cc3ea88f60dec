#!/usr/bin/env python3
"""Differential check of gpuacct's `hta_totals` against the real HTA on generated Kineto traces.

    /tmp/hta-venv/bin/python bench/hta_differential.py [--seed S] [--count N] [options]
    /tmp/hta-venv/bin/python bench/hta_differential.py --trace FILE.json   # one existing trace

A manual tool, like bench/hta_compare.sh: nothing in the build, ctest or CI runs it, and the
project never installs HTA (see the top of hta_compare.sh for the throwaway venv).  Run it with
the interpreter that can `import hta`; without one it says so in one line and exits 2.

For each seed it writes one small random Kineto trace (tens to a few hundred events: ProfilerStep
rows, cuda_runtime launches with correlation ids, kernels / memcpys / memsets / cuda_sync rows
with args device, stream, correlation; optional ac2g flows and gpu_user_annotation steps; see
`generate`), runs HTA on it in this process (TraceAnalysis + get_temporal_breakdown,
get_comm_comp_overlap, get_idle_time_breakdown) and `gpuacct analyze --json --no-files`, and
prints every hta_totals field that differs, with the seed.  docs/kineto_import.md ("HTA
cross-check", "Differential check") maps HTA's outputs to the fields and lists what was found.

Kernel names: gpuacct follows HTA 0.6.1's name classes; PyPI has only 0.5.0, whose classes
differ (e.g. "Stream Wait Event" is COMPUTATION in 0.5.0, OTHER in 0.6.1).  By default HTA's
get_kernel_type is replaced here by 0.6.1's rules (the regexes of hta/common/types.py at 0.6.1),
so that a difference is one of semantics, not of version; --hta-050-names keeps 0.5.0's.

Differences HTA has that gpuacct deliberately does not copy are labelled `known:` and not
counted as disagreements (tied starts on a stream, HTA's NaN where gpuacct writes 0, ...).
"""
import argparse
import json
import math
import os
import random
import re
import shutil
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


# ---------------------------------------------------------------------------------------------
# The generator.  Times are integer nanoseconds inside; written as microseconds with 0-3 decimals.

class Num:
    """A number written verbatim into the JSON (the generator chooses its decimals)."""

    def __init__(self, text):
        self.text = text


def us_text(ns, decimals):
    """ns as microseconds with exactly `decimals` decimals (ns must be a multiple of 10^(3-d));
    decimals -1 writes a JSON integer."""
    neg = ns < 0
    ns = abs(ns)
    whole, frac = divmod(ns, 1000)
    if decimals < 0:
        assert frac == 0
        s = str(whole)
    elif decimals == 0:
        assert frac == 0
        s = f"{whole}.0"
    else:
        assert frac % (10 ** (3 - decimals)) == 0
        s = f"{whole}.{frac // 10 ** (3 - decimals):0{decimals}d}"
    return ("-" if neg else "") + s


def dump_value(v):
    if isinstance(v, Num):
        return v.text
    if isinstance(v, dict):
        return "{" + ", ".join(f"{json.dumps(k)}: {dump_value(x)}" for k, x in v.items()) + "}"
    if isinstance(v, list):
        return "[" + ", ".join(dump_value(x) for x in v) + "]"
    return json.dumps(v)


COMPUTE_NAMES = [
    "void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<float>, "
    "at::detail::Array<char*, 1> >(int, at::native::FillFunctor<float>, at::detail::Array<char*, 1>)",
    "ampere_sgemm_128x64_nn",
    "sm80_xmma_gemm_f16f16_f16f32_f32_nn_n_tilesize96x64x32_stage4_warpsize2x2x1_tensor16x8x16_kernel",
    "void cudnn::bn_fw_tr_1C11_kernel_NCHW<float, float, int, 512, true, 1>(cudnnTensorStruct)",
    "triton_poi_fused_add_relu_0",
    "void at::native::reduce_kernel<512, 1, at::native::ReduceOp<float> >(at::native::ReduceOp<float>)",
]
NCCL_NAMES = [
    "ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevKernelArgsStorage<4096ul>)",
    "ncclKernel_AllGather_RING_LL_Sum_int8_t(ncclWorkElem)",
    "ncclDevKernel_SendRecv(ncclDevKernelArgsStorage<4096ul>)",
]
MEMCPY_NAMES = ["Memcpy HtoD (Pageable -> Device)", "Memcpy DtoH (Device -> Pinned)",
                "Memcpy DtoD (Device -> Device)"]
MEMSET_NAMES = ["Memset (Device)"]


STABLE = False  # --stable-sort
WITH_CORR0 = False  # --with-corr0: some correlation ids 0 (gpuacct reads 0 as "none"; CUPTI never issues 0)


class Gen:
    """One random trace.  `feat` records which of the rarer shapes it holds (for the report)."""

    def __init__(self, seed):
        self.r = random.Random(seed)
        self.events = []
        self.corr = self.r.choice([1, 1, 100, 5000])
        self.feat = set()

    # -- time formatting ------------------------------------------------------------------
    def pick_decimals(self):
        m = self.dec_mode
        if m == "int":
            return -1
        if m == "d3":
            return 3
        if m == "intts":  # ts JSON integers, dur with decimals: HTA does not round at all
            return -1
        if m == "half":
            return self.r.choice([1, 3])
        return self.r.choice([-1, 0, 1, 2, 3])

    def q(self, ns, decimals):
        """Rounds ns to what `decimals` can write."""
        if decimals <= 0:
            return ns - ns % 1000
        step = 10 ** (3 - decimals)
        return ns - ns % step

    def span(self, ts_ns, dur_ns):
        """(ts Num, dur Num, ts_ns, dur_ns) with the trace's decimals; dur >= 0."""
        dt = self.pick_decimals()
        dd = dt if self.dec_mode == "int" else (self.r.choice([0, 1, 3]) if self.dec_mode == "intts"
                                                  else self.pick_decimals())
        ts_ns = self.q(ts_ns, dt)
        if self.dec_mode == "half" and self.r.random() < 0.5:
            # .5 edges: a start at X.5, or an end at X.5 / X.0 exactly
            ts_ns = ts_ns - ts_ns % 1000 + 500
            dt = max(dt, 1)
            if self.r.random() < 0.5:
                dur_ns = max(0, dur_ns - (ts_ns + dur_ns) % 1000 + self.r.choice([0, 500, 1000]))
        dur_ns = self.q(max(0, dur_ns), dd)
        return Num(us_text(ts_ns, dt)), Num(us_text(dur_ns, dd)), ts_ns, dur_ns

    # -- event writers --------------------------------------------------------------------
    def x(self, cat, name, pid, tid, ts_ns, dur_ns, args=None):
        ts, dur, ts_ns, dur_ns = self.span(ts_ns, dur_ns)
        ev = {"ph": "X", "cat": cat, "name": name, "pid": pid, "tid": tid, "ts": ts, "dur": dur}
        if args is not None:
            ev["args"] = args
        self.events.append((ts_ns, ev))
        return ts_ns, dur_ns

    def flow(self, ph, corr, pid, tid, ts_ns):
        ev = {"ph": ph, "id": corr, "pid": pid, "tid": tid, "ts": Num(us_text(self.q(ts_ns, 3), 3)),
              "cat": "ac2g", "name": "ac2g"}
        if ph == "f":
            ev["bp"] = "e"
        self.events.append((ts_ns, ev))

    def new_corr(self):
        self.corr += self.r.choice([1, 1, 1, 2, 7])
        return self.corr

    # -- the trace ------------------------------------------------------------------------
    def build(self):
        r = self.r
        self.dec_mode = r.choice(["int", "d3", "mixed", "mixed", "half", "half", "intts"])
        self.feat.add("dec:" + self.dec_mode)
        epoch_us = r.choice([0, 1000, 4458676522690, 1_700_000_000_000_000 + r.randrange(10**9)])
        if epoch_us > 10**15:
            self.feat.add("epoch")
        base = epoch_us * 1000 + r.randrange(1000) * 1000
        n_steps = r.choice([0, 1, 1, 2, 2, 3, 4, 6, 9])
        self.feat.add(f"steps:{n_steps}")
        n_dev = 1 if r.random() < 0.7 else 2
        stream_pool = [7, 13, 20, 24, 28, 3, 0]
        r.shuffle(stream_pool)
        dev_streams = {}
        shared_ids = n_dev == 2 and r.random() < 0.3
        for d in range(n_dev):
            k = r.randint(1, 3)
            ids = stream_pool[:k] if (shared_ids or d == 0) else stream_pool[3:3 + k]
            dev_streams[d] = list(ids)
        if shared_ids:
            self.feat.add("devices-share-stream-ids")
        elif n_dev == 2:
            self.feat.add("2-devices")
        comm_stream = {d: (r.choice(dev_streams[d]) if r.random() < 0.3 else 50 + d) for d in dev_streams}
        free = {}  # (device, stream) -> ns the stream is free
        p = {
            "overlap": r.choice([0, 0.05, 0.3]),
            "no_corr": r.choice([0, 0, 0.05, 0.2]),
            "no_launch": r.choice([0, 0, 0.05, 0.2]),
            "dup_cpu": r.choice([0] * 9 + [0.1]),
            "corr0": WITH_CORR0 and r.random() < 0.2,
            "sub_us": r.choice([0, 0.1, 0.4]),
            "flows": r.random() < 0.5,
            "flow_only": r.random() < 0.1,
            "gpu_steps": r.random() < 0.4,
            "tail": r.random() < 0.5,
            "head": r.random() < 0.3,
            "shuffle": r.choice(["sorted", "sorted", "shuffled", "chunks"]),
            "sync": r.choice([0, 0.1, 0.25]),
            "nccl": r.choice([0, 0.15, 0.4]),
            "graph": r.choice([0, 0, 0.1]),
            "step_twice": r.random() < 0.05,
        }
        for k, v in p.items():
            if v and k not in ("flows", "shuffle"):
                self.feat.add(k)
        self.p = p
        t = base
        step_ranges = []
        step_cat = "user_annotation" if r.random() < 0.8 else "cpu_op"  # older PyTorch: cpu_op

        def launches(t, n):
            for _ in range(n):
                t = self.one_launch(t, dev_streams, comm_stream, free)
            return t

        if p["head"]:
            t = launches(t, r.randint(1, 4))
        for k in range(n_steps):
            step_start = t + r.randrange(0, 20_000)
            gpu_first = max(free.values()) if free else step_start
            t = step_start + r.randrange(0, 5_000)
            if k == n_steps - 1 and r.random() < 0.3:
                # a launch at (or within a µs of) the last step's start: HTA keeps a launch only
                # when its rounded-up ts is below the step's rounded-up ts
                t = step_start + r.choice([0, 0, 400, 500, 999, 1000])
                self.feat.add("launch-at-last-step")
            t = launches(t, r.randint(2, 20))
            step_end = t + r.randrange(0, 30_000)
            step_ranges.append((k, step_start, step_end, gpu_first))
            self.x(step_cat, f"ProfilerStep#{k + 1}", 1, 1, step_start,
                   step_end - step_start, {"External id": 1000 + k})
            if p["step_twice"]:  # the same step name written twice
                self.x("cpu_op" if step_cat == "user_annotation" else "user_annotation",
                       f"ProfilerStep#{k + 1}", 1, 2, step_start + r.randrange(0, 2_000),
                       step_end - step_start, {"External id": 2000 + k})
            t = step_end
        if n_steps == 0 or p["tail"]:
            t = launches(t, r.randint(1 if n_steps else 3, 8))
        if p["gpu_steps"] and step_ranges:
            dev0 = 0
            for (k, s, e, gfirst) in step_ranges:
                gs = max(s + r.randrange(0, 40_000), gfirst) if r.random() < 0.8 else s + r.randrange(0, 3_000)
                self.x("gpu_user_annotation", f"ProfilerStep#{k + 1}", dev0, dev_streams[0][0], gs,
                       r.randrange(1_000, 400_000), {"External id": 1000 + k})
        # cpu ops around (HTA's CPU rows; gpuacct ignores them)
        for _ in range(r.randint(0, 6)):
            self.x("cpu_op", r.choice(["aten::mm", "aten::add_", "aten::empty"]), 1, 1,
                   base + r.randrange(0, max(1, t - base + 1)), r.randrange(0, 50_000), {"External id": 7})
        return self.finish()

    def gpu_start(self, key, launch_ns):
        r = self.r
        prev = self.free_of(key)
        start = max(launch_ns + r.randrange(0, 20_000), prev + r.choice([0, 0, r.randrange(0, 50_000)]))
        if prev > 0 and r.random() < self.p["overlap"]:
            start = prev - r.randrange(0, 30_000)
            self.feat.add("overlap-seen")
        return start

    def free_of(self, key):
        return self.free.get(key, 0)

    def gpu_dur(self):
        r = self.r
        u = r.random()
        if u < self.p["sub_us"]:
            return r.randrange(0, 1000)
        if u < self.p["sub_us"] + 0.05:
            return 0
        return r.randrange(1_000, r.choice([20_000, 200_000, 800_000]))

    def one_launch(self, t, dev_streams, comm_stream, free):
        r = self.r
        self.free = free
        p = self.p
        u = r.random()
        dev = r.choice(list(dev_streams))
        launch_dur = r.randrange(1_000, 12_000)
        corr = 0 if (p["corr0"] and r.random() < 0.3) else self.new_corr()
        if u < p["sync"]:
            self.one_sync(t, dev, dev_streams, corr, free)
            return t + launch_dur + r.randrange(0, 10_000)
        if u < p["sync"] + p["graph"]:
            kind, name, rt = "kernel", None, "cudaGraphLaunch"
        elif u < p["sync"] + p["graph"] + p["nccl"]:
            kind, name, rt = "kernel", r.choice(NCCL_NAMES), "cudaLaunchKernel"
        else:
            v = r.random()
            if v < 0.75:
                kind, name, rt = "kernel", r.choice(COMPUTE_NAMES), "cudaLaunchKernel"
            elif v < 0.9:
                kind, name, rt = "gpu_memcpy", r.choice(MEMCPY_NAMES), "cudaMemcpyAsync"
            else:
                kind, name, rt = "gpu_memset", r.choice(MEMSET_NAMES), "cudaMemsetAsync"
        has_launch = r.random() >= p["no_launch"]
        if has_launch:
            lts, _ = self.x("cuda_runtime", rt, 1, 1, t, launch_dur, {"cbid": 211, "correlation": corr})
            if r.random() < p["dup_cpu"]:
                # a second CPU row with the same correlation id (a driver call)
                self.x("cuda_driver", "cuLaunchKernel", 1, 1, t + r.randrange(-2_000, 30_000), 2_000,
                       {"cbid": 307, "correlation": corr})
                self.feat.add("dup-cpu-seen")
        else:
            self.feat.add("no-launch-seen")
        ops = r.randint(2, 4) if rt == "cudaGraphLaunch" else 1
        for _ in range(ops):
            if name is None or rt == "cudaGraphLaunch":
                nm = r.choice(COMPUTE_NAMES)
            else:
                nm = name
            if nm in NCCL_NAMES:
                stream = comm_stream[dev]
            else:
                stream = r.choice(dev_streams[dev])
            key = (dev, stream)
            start = self.gpu_start(key, t)
            dur = self.gpu_dur()
            args = {"device": dev, "stream": stream}
            with_corr = r.random() >= p["no_corr"]
            if with_corr:
                args["correlation"] = corr
            else:
                self.feat.add("no-corr-seen")
            args["External id"] = corr + 3
            s, d = self.x(kind, nm, dev, stream, start, dur, args)
            free[key] = max(self.free_of(key), s + d)
            if p["flows"] and has_launch and (with_corr or p["flow_only"]):
                if not with_corr:
                    self.feat.add("flow-only-seen")
                self.flow("s", corr, 1, 1, t)
                self.flow("f", corr, dev, stream, s)
        return t + launch_dur + r.randrange(0, 15_000)

    def one_sync(self, t, dev, dev_streams, corr, free):
        r = self.r
        kind = r.choice(["Stream Sync", "Stream Sync", "Stream Wait Event", "Context Sync", "Event Sync"])
        rt = {"Stream Sync": "cudaStreamSynchronize", "Stream Wait Event": "cudaStreamWaitEvent",
              "Context Sync": "cudaDeviceSynchronize", "Event Sync": "cudaEventSynchronize"}[kind]
        stream = r.choice(dev_streams[dev])
        until = max(free.get((dev, stream), 0), t + 2_000)
        dur = until - t if kind != "Stream Wait Event" else r.randrange(500, 5_000)
        self.x("cuda_runtime", rt, 1, 1, t, dur + 1_000, {"cbid": 131, "correlation": corr})
        args = {"cuda_sync_kind": kind}
        if kind in ("Stream Sync", "Stream Wait Event") or (kind == "Event Sync" and r.random() < 0.3):
            args["stream"] = stream
            tid = stream
        else:
            args["stream"] = -1
            tid = -1
        if self.r.random() >= self.p["no_corr"]:
            args["correlation"] = corr
        args["device"] = dev
        args["context"] = 1
        self.x("cuda_sync", kind, dev, tid, t + r.randrange(0, 1_000), dur, args)
        self.feat.add("sync-seen")

    def finish(self):
        r = self.r
        evs = self.events
        if self.p["shuffle"] == "sorted":
            evs.sort(key=lambda e: e[0])
        elif self.p["shuffle"] == "shuffled":
            r.shuffle(evs)
            self.feat.add("out-of-order")
        else:
            evs.sort(key=lambda e: e[0])
            n = len(evs)
            for _ in range(3):
                a = r.randrange(0, n)
                b = min(n, a + r.randint(2, 10))
                evs[a:b] = list(reversed(evs[a:b]))
            self.feat.add("out-of-order")
        body = [e for _, e in evs]
        body.append({"name": "process_name", "ph": "M", "ts": Num("0"), "pid": 0, "tid": 0,
                     "args": {"name": "python"}})
        return ('{"schemaVersion": 1,\n "distributedInfo": {"backend": "nccl", "rank": 0, "world_size": 1},\n'
                ' "traceEvents": [\n  ' + ",\n  ".join(dump_value(e) for e in body) + "\n ]\n}\n")


def generate(seed):
    g = Gen(seed)
    text = g.build()
    return text, sorted(g.feat)


# ---------------------------------------------------------------------------------------------
# HTA, in this process (its import takes seconds: once for all traces).

def install_061_names():
    """HTA 0.6.1's kernel classes (hta/common/types.py there) in place of 0.5.0's."""
    import hta.analyzers.breakdown_analysis as ba
    import hta.analyzers.communication_analysis as ca
    from hta.utils.utils import KernelType

    comm = re.compile(r"(^nccl.*)|(^hip)|(^hccl)|(.*ncclKernel.*)")
    memory = re.compile(r"(^(hip)?Memcpy)|(^(hip)?Memset)|(^dma)")
    not_compute = re.compile(r"(^nccl)|(.*Memcpy)|(.*Memset)|(.*dma)|(^.*Sync)|(^Stream Wait Event)|"
                             r"(cuda.*LaunchKernel)|(^runFunction)|(^hip)")

    def get_kernel_type_061(name):
        if comm.match(name):
            return KernelType.COMMUNICATION.name
        if memory.match(name):
            return KernelType.MEMORY.name
        if not not_compute.match(name):
            return KernelType.COMPUTATION.name
        return KernelType.OTHER.name

    ba.get_kernel_type = get_kernel_type_061
    ca.get_kernel_type = get_kernel_type_061
    return get_kernel_type_061


def run_hta(trace_dir, names_061):
    """HTA's numbers for the one trace in trace_dir, as hta_totals fields (floats as HTA gives
    them; NaN kept), plus what `compare` needs to label HTA's known quirks (streams with tied
    starts, repeated rows, ops whose launch is missing, ...)."""
    from hta.trace_analysis import TraceAnalysis
    from hta.utils.utils import merge_kernel_intervals, get_kernel_type, KernelType

    kind_of = names_061 or get_kernel_type
    a = TraceAnalysis(trace_dir=trace_dir)
    rank = a.t.get_ranks()[0]
    out = {}
    tb = a.get_temporal_breakdown(visualize=False).iloc[0]
    out["kernel_time_us"] = tb["kernel_time(us)"]
    out["idle_us"] = tb["idle_time(us)"]
    out["compute_us"] = tb["compute_time(us)"]
    out["non_compute_us"] = tb["non_compute_time(us)"]
    out["idle_pct"] = tb["idle_time_pctg"]
    out["compute_pct"] = tb["compute_time_pctg"]
    out["non_compute_pct"] = tb["non_compute_time_pctg"]
    ov = a.get_comm_comp_overlap(visualize=False).iloc[0]
    out["comm_compute_overlap_pct"] = ov["comp_comm_overlap_pctg"]
    # |union(comm)| as HTA's overlap computes its denominator (its own functions, on its rows)
    df = a.t.get_trace(rank)
    sym = a.t.symbol_table.get_sym_table()
    gpu = df[df["stream"].ne(-1)].copy()
    out["gpu_ops_kept"] = len(gpu)
    types = gpu["name"].apply(lambda n: kind_of(sym[n]))
    comm = gpu[types.eq(KernelType.COMMUNICATION.name)].copy()
    if len(comm):
        m = merge_kernel_intervals(comm)
        out["comm_us"] = m["end"].sum() - m["ts"].sum()
    else:
        out["comm_us"] = 0
    steps = [k for k in a.t.symbol_table.get_sym_id_map() if "ProfilerStep" in k]
    out["last_profiler_step_dropped"] = len(steps) >= 2
    idle, _ = a.get_idle_time_breakdown(ranks=[rank], visualize=False)
    streams = {}
    for _, row in idle.iterrows():
        s = streams.setdefault(int(row["stream"]), {})
        s[row["idle_category"]] = (row["idle_time"], row["idle_time_ratio"])
    out["idle_by_stream"] = streams
    # streams with two idle-breakdown ops at the same start: HTA's unstable sort decides
    kcats = {a.t.symbol_table.get_sym_id_map().get(c, -1000) for c in ("kernel", "gpu_memcpy", "gpu_memset")}
    ops = gpu[gpu["cat"].isin(kcats)]
    out["tie_streams"] = sorted(int(s) for s, g in ops.groupby("stream")
                                if g.drop_duplicates("index")["ts"].duplicated().any())
    # GPU rows HTA holds twice: one per CPU row with the row's correlation id (an inner merge)
    out["dup_streams"] = sorted(int(s) for s, g in ops.groupby("stream") if g["index"].duplicated().any())
    # GPU ops with a correlation id whose launch is not in the trace: HTA's index_correlation is
    # 0 for them, which its idle breakdown joins to the row *numbered* 0 (the trace's first event)
    # and takes that event's ts as the launch time.
    orphan = ops["index_correlation"].eq(0) if "index_correlation" in ops else ops["ts"].ne(ops["ts"])
    out["orphan_streams"] = sorted(int(x) for x in ops.loc[orphan, "stream"].unique()) if 0 in df.index else []
    out["dup_rows"] = bool(gpu["index"].duplicated().any())

    # A union with an op that ends before it starts once rounded ([s, s-1]) and another op at
    # the same start s depends on which of the two HTA's unstable sort puts first.
    # HTA's repeated rows (above) count such an op once per copy.
    def order_dependent(rows):
        neg = set(rows.loc[rows["dur"] < 0, "ts"])
        return any(rows["ts"].eq(t).sum() > 1 for t in neg)

    out["union_tie"] = {
        "all": order_dependent(gpu),
        "compute": order_dependent(gpu[types.eq(KernelType.COMPUTATION.name)]),
        "comm": order_dependent(comm),
    }
    # HTA rounds only when pandas read `ts` as float64 (some ts not a JSON integer, or missing)
    with open(os.path.join(trace_dir, os.listdir(trace_dir)[0])) as f:
        evs = json.load(f)["traceEvents"]
    no_round = all(isinstance(e.get("ts"), int) for e in evs)
    dev_of = {}
    for e in evs:
        a_ = e.get("args") or {}
        if e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset") and "stream" in a_:
            dev_of.setdefault(a_["stream"], set()).add(a_.get("device"))
    # GPU ops correlated only by their ac2g flow (no args.correlation): gpuacct takes the flow's id
    flow_ends = {(e.get("pid"), e.get("tid"), e.get("ts")) for e in evs
                 if e.get("ph") == "f" and e.get("cat") in ("ac2g", "async_cpu_to_gpu")}
    out["flow_only"] = any(e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset") and
                           "correlation" not in (e.get("args") or {}) and
                           (e.get("pid"), e.get("tid"), e.get("ts")) in flow_ends for e in evs)
    out["multi_device_streams"] = sorted(s for s, d in dev_of.items() if len(d) > 1)
    # A correlation id on several CPU rows: HTA takes the launch time of the last of them (its
    # index_correlation is written once per match, the last write stays), gpuacct the earliest.
    cpu_corr = {}
    for e in evs:
        c = (e.get("args") or {}).get("correlation")
        if e.get("cat") in ("cuda_runtime", "cuda_driver") and isinstance(c, int) and "dur" in e:
            cpu_corr[c] = cpu_corr.get(c, 0) + 1
    out["shared_corr_streams"] = sorted({
        (e.get("args") or {}).get("stream") for e in evs
        if e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset") and
        cpu_corr.get((e.get("args") or {}).get("correlation"), 0) > 1})
    # An "Event Sync" / "Context Sync" row is one of HTA's GPU rows by its name alone; with a
    # stream and no correlation id (Kineto writes neither), its last-step filter matches it to
    # every CPU row without a correlation id: kept whatever its start, once per such row.
    out["named_sync_nocorr"] = any(
        e.get("cat") == "cuda_sync" and e.get("name") in ("Event Sync", "Context Sync") and
        isinstance((e.get("args") or {}).get("stream"), int) and e["args"]["stream"] >= 0 and
        "correlation" not in e["args"] for e in evs)
    out["float_times"] = no_round and any(isinstance(e.get("dur"), float) and not e["dur"].is_integer()
                                          for e in evs)
    return out


# ---------------------------------------------------------------------------------------------
# gpuacct

def run_gpuacct(gpuacct, path):
    p = subprocess.run([gpuacct, "analyze", "--json", "--no-files", path], capture_output=True, text=True)
    if p.returncode != 0:
        raise RuntimeError(f"gpuacct exit {p.returncode}: {p.stderr.strip()[:300]}")
    return json.loads(p.stdout)["hta_totals"]


# ---------------------------------------------------------------------------------------------
# The comparison

SCALARS = ["kernel_time_us", "idle_us", "compute_us", "non_compute_us", "idle_pct", "compute_pct",
           "non_compute_pct", "comm_us", "comm_compute_overlap_pct", "last_profiler_step_dropped",
           "gpu_ops_kept"]
CATS = [("host_wait", "host_wait"), ("kernel_wait", "kernel_wait"), ("other", "other")]


def is_nan(v):
    return isinstance(v, float) and math.isnan(v)


def compare(h, g):
    """[(field, hta, gpuacct, label)]: label '' for a disagreement, 'known: ...' otherwise."""
    diffs = []

    def add(field, hv, gv, known=""):
        if isinstance(hv, float) and not is_nan(hv) and float(hv).is_integer() and isinstance(gv, int):
            hv = int(hv)
        if hv == gv:
            return
        if (is_nan(hv) or (isinstance(hv, float) and math.isinf(hv))) and gv == 0:
            known = "same: HTA NaN or inf (x/0), gpuacct 0"
        if h.get("named_sync_nocorr") and not known:
            known = "known: an Event/Context Sync row with a stream and no correlation id (HTA keeps it)"
        if h.get("flow_only") and not known:
            known = "known: ops correlated by their ac2g flow only (gpuacct correlates them, HTA does not)"
        if h.get("float_times") and not known:
            known = "known: HTA did not round (every ts an integer)"
        diffs.append((field, hv, gv, known))

    ut = h.get("union_tie", {})
    tie_note = ("known: an op of negative rounded length tied with another start or repeated by HTA "
                "(HTA's unstable sort / inner merge)")
    depends = {  # which unions a field depends on
        "kernel_time_us": ["all"], "idle_us": ["all"], "idle_pct": ["all"],
        "compute_us": ["compute"], "compute_pct": ["compute"],
        "non_compute_us": ["all", "compute"], "non_compute_pct": ["all", "compute"],
        "comm_us": ["comm"], "comm_compute_overlap_pct": ["comm", "compute"],
    }
    for f in SCALARS:
        gv = g.get(f)
        hv = h.get(f)
        if f == "gpu_ops_kept":
            # gpuacct's count; HTA duplicates a GPU row for each CPU row with its correlation id
            if hv != gv:
                add(f, hv, gv, "info: row count" + (" (HTA's duplicated rows)" if h.get("dup_rows") else "") +
                    (" (ops correlated by a flow)" if h.get("flow_only") else ""))
            continue
        add(f, hv, gv, tie_note if any(ut.get(u) for u in depends.get(f, [])) else "")
    # idle breakdown, per stream (HTA keys by stream number only, across devices)
    gs = {}
    for s in g.get("idle_by_stream", []):
        e = gs.setdefault(s["stream"], {"n": 0})
        e["n"] += 1
        for c, _ in CATS:
            e[c] = e.get(c, 0) + s[c + "_us"]
            e[c + "_ratio"] = s[c + "_ratio"]
    hs = h["idle_by_stream"]
    for stream in sorted(set(gs) | set(hs)):
        ge = gs.get(stream)
        he = hs.get(stream, {})
        tie = stream in h.get("tie_streams", [])
        for c, _ in CATS:
            hv, hr = he.get(c, (0, 0.0))
            gv = ge.get(c, 0) if ge else None
            gr = ge.get(c + "_ratio", 0.0) if ge else None
            known = "known: tied starts (HTA's unstable sort)" if tie and not STABLE else ""
            if stream in h.get("multi_device_streams", []):
                known = "known: HTA merges the streams of one number on all devices"
            elif stream in h.get("orphan_streams", []):
                known = "known: HTA takes the first event's ts as the launch of an op whose launch is missing"
            elif stream in h.get("dup_streams", []) or stream in h.get("shared_corr_streams", []):
                known = ("known: a correlation id on several CPU rows (HTA repeats the GPU row per "
                         "CPU row, and times its launch by the last)")
            add(f"idle[{stream}].{c}_us", hv if not is_nan(hv) else 0, gv, known)
            if ge and ge["n"] == 1:
                add(f"idle[{stream}].{c}_ratio", hr, gr, known)
    return diffs


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seed", type=int, default=1, help="first seed (default 1)")
    ap.add_argument("--count", type=int, default=100, help="number of seeds (default 100)")
    ap.add_argument("--trace", help="compare this one trace instead of generated ones")
    ap.add_argument("--gpuacct", default=os.path.join(ROOT, "build", "bin", "gpuacct"))
    ap.add_argument("--keep", help="write the traces that disagree (seed<S>.json) into this folder")
    ap.add_argument("--write", help="only write the trace of --seed to this file and exit")
    ap.add_argument("--hta-050-names", action="store_true",
                    help="keep HTA 0.5.0's kernel name classes (default: 0.6.1's, as gpuacct)")
    ap.add_argument("--with-corr0", action="store_true",
                    help="let some launches have correlation id 0 (off: CUPTI never issues 0, and "
                         "gpuacct's model reads 0 as none)")
    ap.add_argument("--stable-sort", action="store_true",
                    help="make HTA's sorts stable (pandas kind='stable'): tied starts then keep "
                         "HTA's row order, which is file order when no step is dropped -- gpuacct's "
                         "order; checks that what is labelled 'tied starts' is only that")
    ap.add_argument("--show-known", action="store_true", help="print the known differences too")
    args = ap.parse_args()

    global WITH_CORR0, STABLE
    WITH_CORR0 = args.with_corr0
    STABLE = args.stable_sort
    if args.write:
        text, feat = generate(args.seed)
        with open(args.write, "w") as f:
            f.write(text)
        print(f"seed {args.seed}: {args.write} ({' '.join(feat)})")
        return 0
    try:
        import logging
        import warnings
        warnings.filterwarnings("ignore")
        import hta.trace_analysis  # noqa: F401
        logging.getLogger("hta").setLevel(logging.CRITICAL)
        logging.getLogger().setLevel(logging.CRITICAL)
    except Exception as e:  # noqa: BLE001
        print(f"hta_differential.py: HTA is not importable by {sys.executable} ({type(e).__name__}: {e}); "
              "see the top of bench/hta_compare.sh", file=sys.stderr)
        return 2
    if not os.access(args.gpuacct, os.X_OK):
        print(f"hta_differential.py: no gpuacct binary at {args.gpuacct} (build gpuacct_cli or pass --gpuacct)",
              file=sys.stderr)
        return 2
    import importlib.metadata as md
    names_061 = None if args.hta_050_names else install_061_names()
    if args.stable_sort:
        import pandas as pd
        unstable = pd.DataFrame.sort_values

        def sort_values_stable(self, *a, **kw):
            kw.setdefault("kind", "stable")
            return unstable(self, *a, **kw)

        pd.DataFrame.sort_values = sort_values_stable
    print(f"HTA {md.version('HolisticTraceAnalysis')} (kernel classes: "
          f"{'0.5.0' if args.hta_050_names else '0.6.1, as gpuacct'}"
          f"{'; stable sorts' if args.stable_sort else ''}); gpuacct {args.gpuacct}")
    work = tempfile.mkdtemp(prefix="hta_diff.")
    cases = ["file"] if args.trace else list(range(args.seed, args.seed + args.count))
    n_bad = n_known = n_err = n_run = 0
    label_traces = {}  # label -> traces showing it
    try:
        for seed in cases:
            d = os.path.join(work, f"s{seed}")
            os.makedirs(d)
            path = os.path.join(d, "rank0.json")
            if args.trace:
                shutil.copyfile(args.trace, path)
                feat = []
            else:
                text, feat = generate(seed)
                with open(path, "w") as f:
                    f.write(text)
            n_run += 1
            try:
                h = run_hta(d, names_061)
            except Exception as e:  # noqa: BLE001  HTA fails on some inputs (no GPU row kept, ...)
                n_err += 1
                print(f"seed {seed}: HTA failed ({type(e).__name__}: {str(e)[:120]})")
                shutil.rmtree(d)
                continue
            try:
                g = run_gpuacct(args.gpuacct, path)
            except Exception as e:  # noqa: BLE001
                n_bad += 1
                print(f"seed {seed}: gpuacct failed ({e})")
                continue
            diffs = compare(h, g)
            real = [x for x in diffs if not x[3]]
            known = [x for x in diffs if x[3].startswith("known")]
            for lab in {x[3] for x in known}:
                label_traces[lab] = label_traces.get(lab, 0) + 1
            if real:
                n_bad += 1
            elif known:
                n_known += 1
            shown = diffs if args.show_known else real
            if shown:
                print(f"{args.trace if args.trace else f'seed {seed}'}: [{' '.join(feat)}]")
                for field, hv, gv, label in shown:
                    print(f"  {field}: HTA {hv} gpuacct {gv}{'  (' + label + ')' if label else ''}")
            if real and args.keep:
                os.makedirs(args.keep, exist_ok=True)
                shutil.copyfile(path, os.path.join(args.keep, f"seed{seed}.json"))
            shutil.rmtree(d)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print(f"{n_run} traces: {n_bad} disagree, {n_known} differ only in known ways, "
          f"{n_err} HTA could not analyse, {n_run - n_bad - n_known - n_err} identical")
    for lab, n in sorted(label_traces.items(), key=lambda x: -x[1]):
        print(f"  {n:4d} traces: {lab}")
    return 1 if n_bad else 0


if __name__ == "__main__":
    sys.exit(main())
