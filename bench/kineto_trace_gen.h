// A synthetic Kineto trace for the benchmarks, shaped like scripts/gen_big_kineto_trace.py's
// (and real Kineto): per launched op a cpu_op, a cuda_runtime, an ac2g flow pair and a kernel;
// a ProfilerStep every 2000 ops.  Written a chunk at a time (append_events), so a trace of any
// size can be streamed to a file without holding it.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <random>
#include <string>

#include "analysis/model/event_sink.h"

namespace gpuacct::bench {

class KinetoTraceGen {
 public:
  static std::string header() {
    return R"J({"schemaVersion": 1, "distributedInfo": {"rank": 0, "world_size": 2}, "traceEvents": [)J";
  }
  static std::string footer() { return "]}"; }
  uint64_t events() const { return n_; }

  // Appends the next op's events (5, or 6 at a step boundary) to `s`.
  void append_op(std::string& s) {
    if (i_ % 2000 == 0) {
      add(s, std::snprintf(
                 buf_, sizeof(buf_),
                 R"J({"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#%llu", "pid": 1, "tid": 2, "ts": %.3f, "dur": 18000.0, "args": {"External id": 1}})J",
                 static_cast<unsigned long long>(i_ / 2000), ts_));
    }
    const double cd = 5 + static_cast<double>(rng_() % 25000) / 1000.0;
    const auto corr = static_cast<unsigned long long>(corr_);
    add(s, std::snprintf(
               buf_, sizeof(buf_),
               R"J({"ph": "X", "cat": "cpu_op", "name": "aten::add", "pid": 1, "tid": 2, "ts": %.3f, "dur": %.3f, "args": {"External id": %llu, "Record function id": 0, "Sequence number": %llu, "Fwd thread id": 1, "Ev Idx": %llu}})J",
               ts_, cd, corr, corr, corr));
    add(s, std::snprintf(
               buf_, sizeof(buf_),
               R"J({"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 2, "ts": %.3f, "dur": 4.500, "args": {"External id": %llu, "cbid": 211, "correlation": %llu}})J",
               ts_ + 1, corr, corr));
    add(s, std::snprintf(
               buf_, sizeof(buf_),
               R"J({"ph": "s", "id": %llu, "pid": 1, "tid": 2, "ts": %.3f, "cat": "ac2g", "name": "ac2g"})J",
               corr, ts_ + 1));
    gpu_ = std::max(gpu_, ts_ + 7);
    const double gd = 2 + static_cast<double>(rng_() % 38000) / 1000.0;
    add(s, std::snprintf(
               buf_, sizeof(buf_),
               R"J({"ph": "X", "cat": "kernel", "name": "void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<float>, at::detail::Array<char*, 3> >(int, at::native::CUDAFunctor_add<float>, at::detail::Array<char*, 3>)", "pid": 0, "tid": 7, "ts": %.3f, "dur": %.3f, "args": {"External id": %llu, "queued": 0, "device": 0, "context": 1, "stream": 7, "correlation": %llu, "registers per thread": 32, "shared memory": 0, "blocks per SM": 0.59, "warps per SM": 2.37, "grid": [64, 1, 1], "block": [128, 1, 1], "est. achieved occupancy %%": 4}})J",
               gpu_, gd, corr, corr));
    add(s, std::snprintf(
               buf_, sizeof(buf_),
               R"J({"ph": "f", "id": %llu, "pid": 0, "tid": 7, "ts": %.3f, "cat": "ac2g", "name": "ac2g", "bp": "e"})J",
               corr, gpu_));
    gpu_ += gd;
    ts_ += cd + 3;
    ++corr_;
    ++i_;
  }

 private:
  void add(std::string& s, int len) {
    if (n_++) s += ",\n";
    s.append(buf_, static_cast<size_t>(len));
  }

  std::mt19937_64 rng_{1};
  double ts_ = 4458676522690.655, gpu_ = ts_ + 50;
  uint64_t corr_ = 1000, n_ = 0, i_ = 0;
  char buf_[1024];
};

// Counts the events an importer delivers, and nothing else: the importer's own cost.
struct CountingSink final : EventSink {
  uint64_t n = 0;
  void on_gpu_op(const GpuOp&) override { ++n; }
  void on_api_call(const HostApiCall&) override { ++n; }
  void on_range(const HostRange&) override { ++n; }
  void on_marker(const Marker&) override { ++n; }
};

}  // namespace gpuacct::bench
