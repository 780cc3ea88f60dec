#!/usr/bin/env python3
"""Generate a synthetic PyTorch-profiler (Kineto) Chrome trace of any size, streamed to disk.

The event mix and field layout follow real Kineto traces (tests/data/kineto/): per launched
op a cpu_op, a cuda_runtime launch, an ac2g flow pair and the kernel (with the usual args), plus
ProfilerStep#N / DataLoader user annotations, memcpys, memsets and NCCL all-reduce kernels on a
second stream.  Used by bench/kineto_import_bench.cc and docs/kineto_import.md for throughput and
memory measurements.  Never commit the output.

  scripts/gen_big_kineto_trace.py --events 20000000 -o /tmp/big.json      # ~7 GB
  scripts/gen_big_kineto_trace.py --events 3000000 -o /tmp/big.json.gz    # gzip by extension
"""
import argparse
import gzip
import io
import random
import sys

KERNELS = [
    "void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<float>, "
    "at::detail::Array<char*, 3> >(int, at::native::CUDAFunctor_add<float>, at::detail::Array<char*, 3>)",
    "ampere_sgemm_128x64_tn",
    "void cudnn::bn_bw_1C11_kernel_new<float, float, float2, 32, true, 1>(float, float, float, float, "
    "cudnnTensorStruct, float const*, cudnnTensorStruct, float const*, cudnnTensorStruct, float*)",
    "void at::native::reduce_kernel<512, 1, at::native::ReduceOp<float, at::native::MeanOps<float, "
    "float>, unsigned int, float, 4> >(at::native::ReduceOp<float, at::native::MeanOps<float, float>, "
    "unsigned int, float, 4>)",
    "sm80_xmma_gemm_f32f32_f32f32_f32_tn_n_tilesize128x128x8_stage3_warpsize2x2x1_ffma_aligna4_alignc4_execute_kernel_trt",
]
OPS = ["aten::add", "aten::mm", "aten::native_batch_norm", "aten::mean", "aten::relu_", "aten::copy_"]
NCCL = "ncclKernel_AllReduce_RING_LL_Sum_float(ncclWorkElem)"

PID, TID, DEV, STREAM, COMM_STREAM = 2910249, 2919752, 0, 7, 40


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--events", type=int, default=1_000_000, help="approximate number of trace events")
    ap.add_argument("-o", "--out", required=True, help="output path; .gz => gzip")
    ap.add_argument("--gzip", action="store_true", help="gzip even without a .gz suffix")
    ap.add_argument("--level", type=int, default=1, help="gzip level (default 1: fast)")
    ap.add_argument("--ops-per-step", type=int, default=2000, help="launched ops per ProfilerStep")
    ap.add_argument("--seed", type=int, default=1)
    a = ap.parse_args()
    rnd = random.Random(a.seed)
    use_gz = a.gzip or a.out.endswith(".gz")
    raw = open(a.out, "wb")
    f = gzip.GzipFile(fileobj=raw, mode="wb", compresslevel=a.level) if use_gz else raw
    out = io.TextIOWrapper(f, encoding="utf-8", write_through=False)
    out.write('{\n  "schemaVersion": 1,\n  "deviceProperties": [{"id": 0, "name": "NVIDIA A100-SXM4-80GB", '
              '"totalGlobalMem": 85899345920, "computeMajor": 8, "computeMinor": 0, "maxThreadsPerBlock": 1024, '
              '"numSms": 108}],\n  "distributedInfo": {"backend": "nccl", "rank": 0, "world_size": 2},\n'
              '  "traceEvents": [\n')
    ts = 4458676522690.655  # us, like real Kineto (large, with ns decimals)
    gpu_t = ts + 50.0
    corr = 1000
    ext = 1
    n = 0
    step = 0
    first = True
    buf = []

    def emit(s):
        nonlocal first, n
        buf.append(s if first else ",\n" + s)
        first = False
        n += 1

    while n < a.events:
        step_start = ts
        step_ops = a.ops_per_step
        # ProfilerStep and a DataLoader wait at the start of the step
        emit('{"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#%d", "pid": %d, "tid": %d, '
             '"ts": %.3f, "dur": %.3f, "args": {"External id": %d}}' % (step, PID, TID, ts, step_ops * 9.0, ext))
        ext += 1
        dl = rnd.uniform(50, 500)
        emit('{"ph": "X", "cat": "user_annotation", "name": "enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__", '
             '"pid": %d, "tid": %d, "ts": %.3f, "dur": %.3f, "args": {"External id": %d}}' % (PID, TID, ts + 1, dl, ext))
        ext += 1
        ts += dl + 2
        for i in range(step_ops):
            if n >= a.events:
                break
            op = OPS[i % len(OPS)]
            cpu_dur = rnd.uniform(5, 30)
            emit('{"ph": "X", "cat": "cpu_op", "name": "%s", "pid": %d, "tid": %d, "ts": %.3f, "dur": %.3f, '
                 '"args": {"External id": %d, "Record function id": 0, "Sequence number": %d, "Fwd thread id": 1, '
                 '"Ev Idx": %d}}' % (op, PID, TID, ts, cpu_dur, ext, ext, ext))
            lts = ts + cpu_dur * 0.4
            kind = i % 50
            if kind == 7:
                name, rt, cat = "Memcpy HtoD (Pinned -> Device)", "cudaMemcpyAsync", "gpu_memcpy"
            elif kind == 13:
                name, rt, cat = "Memset (Device)", "cudaMemsetAsync", "gpu_memset"
            elif kind == 29:
                name, rt, cat = NCCL, "cudaLaunchKernel", "kernel"
            else:
                name, rt, cat = KERNELS[i % len(KERNELS)], "cudaLaunchKernel", "kernel"
            emit('{"ph": "X", "cat": "cuda_runtime", "name": "%s", "pid": %d, "tid": %d, "ts": %.3f, "dur": %.3f, '
                 '"args": {"External id": %d, "cbid": 211, "correlation": %d}}' % (rt, PID, TID, lts, 4.5, ext, corr))
            emit('{"ph": "s", "id": %d, "pid": %d, "tid": %d, "ts": %.3f, "cat": "ac2g", "name": "ac2g"}'
                 % (corr, PID, TID, lts))
            gdur = rnd.uniform(2, 40) if cat != "gpu_memcpy" else rnd.uniform(5, 80)
            gpu_t = max(gpu_t, lts + 6) + rnd.uniform(0, 4)
            stream = COMM_STREAM if name == NCCL else STREAM
            if cat == "kernel":
                emit('{"ph": "X", "cat": "kernel", "name": "%s", "pid": %d, "tid": %d, "ts": %.3f, "dur": %.3f, '
                     '"args": {"External id": %d, "queued": 0, "device": %d, "context": 1, "stream": %d, '
                     '"correlation": %d, "registers per thread": 32, "shared memory": 0, "blocks per SM": 0.59, '
                     '"warps per SM": 2.37, "grid": [64, 1, 1], "block": [128, 1, 1], '
                     '"est. achieved occupancy %%": 4}}' % (name, DEV, stream, gpu_t, gdur, ext, DEV, stream, corr))
            else:
                emit('{"ph": "X", "cat": "%s", "name": "%s", "pid": %d, "tid": %d, "ts": %.3f, "dur": %.3f, '
                     '"args": {"External id": %d, "device": %d, "context": 1, "stream": %d, "correlation": %d, '
                     '"bytes": %d, "memory bandwidth (GB/s)": 12.5}}'
                     % (cat, name, DEV, stream, gpu_t, gdur, ext, DEV, stream, corr, 4096 * (i + 1)))
            emit('{"ph": "f", "id": %d, "pid": %d, "tid": %d, "ts": %.3f, "cat": "ac2g", "name": "ac2g", "bp": "e"}'
                 % (corr, DEV, stream, gpu_t))
            if stream == STREAM:
                gpu_t += gdur
            ts += cpu_dur + rnd.uniform(1, 10)
            corr += 1
            ext += 1
            if len(buf) >= 4096:
                out.write("".join(buf))
                buf.clear()
        ts = max(ts, step_start + 1)
        step += 1
    out.write("".join(buf))
    out.write('\n  ],\n  "traceName": "synthetic", "displayTimeUnit": "ms", "baseTimeNanoseconds": 1700000000000000000\n}\n')
    out.flush()
    out.close()
    print("wrote %s: %d events, %d steps" % (a.out, n, step), file=sys.stderr)


if __name__ == "__main__":
    main()
