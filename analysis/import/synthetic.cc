#include "analysis/import/synthetic.h"

#include <algorithm>
#include <random>
#include <vector>

namespace gpuacct {

StatusOr<SyntheticSpec> SyntheticSpec::preset(const std::string& name) {
  SyntheticSpec s;
  if (name == "demo") {
    // A realistic mix where every wall shows: an input pipeline too slow (data-bound by
    // design), CPU-side augmentation outside the loader, a tail of tiny kernels the host
    // cannot launch fast enough, and an all-reduce longer than the compute left to hide it.
    s.steps = 24;
    s.kernels_per_step = 120;
    s.kernel_ns = 90'000;
    s.launch_cost_ns = 9'000;
    s.data_wait_ns = 6'000'000;
    s.cpu_work_ns = 1'500'000;
    s.h2d_ns = 700'000;
    s.h2d_pageable = true;
    s.collective_ns = 8'000'000;
    s.tiny_kernels_per_step = 150;
    s.tiny_kernel_ns = 3'000;
    s.host_pause_ns = 400'000;
    s.flops_per_step = 4.2e12;  // what the model declares with gpuacct_set_step_flops
  } else if (name == "data_bound") {
    s.data_wait_ns = 30'000'000;
    s.kernels_per_step = 50;
    s.kernel_ns = 200'000;
  } else if (name == "launch_bound") {
    s.data_wait_ns = 0;
    s.h2d_ns = 0;
    s.kernels_per_step = 2000;
    s.kernel_ns = 5'000;
    s.launch_cost_ns = 12'000;
  } else if (name == "comm_bound") {
    s.data_wait_ns = 0;
    s.collective_ns = 20'000'000;
    s.kernels_per_step = 40;
    s.kernel_ns = 150'000;
  } else if (name == "copy_bound") {
    s.data_wait_ns = 0;
    s.h2d_ns = 15'000'000;
    s.h2d_pageable = true;
  } else if (name == "balanced") {
    s.data_wait_ns = 300'000;
    s.kernels_per_step = 100;
    s.kernel_ns = 300'000;
  } else if (name == "bench") {
    s.steps = 1000;
    s.kernels_per_step = 1000;
    s.kernel_ns = 20'000;
    s.launch_cost_ns = 8'000;
    s.data_wait_ns = 1'000'000;
    s.collective_ns = 3'000'000;
    s.shuffle_batch = 4096;
    s.jitter = 0.1;
  } else {
    return Status::Error("unknown synthetic preset '" + name +
                         "' (known: demo, data_bound, launch_bound, comm_bound, copy_bound, "
                         "balanced, bench)");
  }
  return s;
}

namespace {

// Buffers events and delivers them in shuffled batches with conservative watermarks, the way
// a live source (CUPTI buffers) would.
class Delivery {
 public:
  Delivery(const SyntheticSpec& spec, EventSink& sink)
      : spec_(spec), sink_(sink), rng_(spec.seed) {}

  void gpu(const GpuOp& op) {
    if (!shuffled()) return sink_.on_gpu_op(op);
    batch_.gpu_ops.push_back(op);
    note(op.end);
  }
  void api(const HostApiCall& c) {
    if (!shuffled()) return sink_.on_api_call(c);
    batch_.api_calls.push_back(c);
    note(c.end);
  }
  void range(const HostRange& r) {
    if (!shuffled()) return sink_.on_range(r);
    batch_.ranges.push_back(r);
    note(r.end);
  }
  void marker(const Marker& m) {
    if (!shuffled()) return sink_.on_marker(m);
    batch_.markers.push_back(m);
    note(m.ts);
  }
  void finish(TimeNs end) {
    if (!shuffled()) return;
    flush();
    sink_.on_watermark(end + 1);
  }

 private:
  bool shuffled() const { return spec_.shuffle_batch > 0; }
  void note(TimeNs t) {
    if (t < min_end_) min_end_ = t;
    if (batch_.size() >= static_cast<size_t>(spec_.shuffle_batch)) flush();
  }
  void flush() {
    // Like CUPTI: records of one thread (API calls) and of one stream (ops) stay in order,
    // but the sources are interleaved at random, and ops arrive in completion order across
    // streams only roughly.
    std::vector<std::vector<GpuOp>> streams;
    std::vector<uint64_t> stream_keys;
    for (const GpuOp& op : batch_.gpu_ops) {
      const uint64_t key = (uint64_t{op.device} << 32) | op.stream;
      size_t k = 0;
      while (k < stream_keys.size() && stream_keys[k] != key) ++k;
      if (k == stream_keys.size()) {
        stream_keys.push_back(key);
        streams.emplace_back();
      }
      streams[k].push_back(op);
    }
    std::vector<size_t> pos(streams.size(), 0);
    size_t api_pos = 0;
    size_t left = batch_.gpu_ops.size() + batch_.api_calls.size();
    while (left > 0) {
      const size_t pick = static_cast<size_t>(rng_() % (streams.size() + 1));
      const size_t chunk = 1 + static_cast<size_t>(rng_() % 64);
      if (pick == streams.size()) {
        for (size_t c = 0; c < chunk && api_pos < batch_.api_calls.size(); ++c, --left) {
          sink_.on_api_call(batch_.api_calls[api_pos++]);
        }
      } else {
        auto& st = streams[pick];
        for (size_t c = 0; c < chunk && pos[pick] < st.size(); ++c, --left) {
          sink_.on_gpu_op(st[pos[pick]++]);
        }
      }
    }
    for (const auto& e : batch_.ranges) sink_.on_range(e);
    for (const auto& e : batch_.markers) sink_.on_marker(e);
    // Events still to come end no earlier than the smallest end in the *next* batch; being
    // conservative, promise only what ended before this batch's earliest end.
    if (min_end_ != kMax) sink_.on_watermark(min_end_);
    batch_.clear();
    min_end_ = kMax;
  }

  static constexpr TimeNs kMax = INT64_MAX;
  const SyntheticSpec& spec_;
  EventSink& sink_;
  std::mt19937_64 rng_;
  EventBatch batch_;
  TimeNs min_end_ = kMax;
};

}  // namespace

uint64_t generate_synthetic(const SyntheticSpec& spec, NameTable& names, EventSink& sink) {
  std::mt19937_64 rng(spec.seed);
  std::uniform_real_distribution<double> uni(1.0 - spec.jitter, 1.0 + spec.jitter);
  auto jit = [&](TimeNs v) {
    return v <= 0 ? 0 : std::max<TimeNs>(1, static_cast<TimeNs>(static_cast<double>(v) * uni(rng)));
  };

  const NameId n_launch = names.intern("cudaLaunchKernel");
  const NameId n_memcpy = names.intern("cudaMemcpyAsync");
  const NameId n_sync = names.intern("cudaStreamSynchronize");
  const NameId n_step = names.intern("train_step");
  const NameId n_data = names.intern("enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__");
  const NameId n_h2d = names.intern("Memcpy HtoD (Pageable -> Device)");
  const NameId n_coll = names.intern("ncclDevKernel_AllReduce_Sum_f32_RING_LL");
  const NameId n_tiny = names.intern("optimizer_foreach_add_kernel");
  std::vector<NameId> kernel_names;
  const char* bases[] = {"ampere_sgemm_128x64_tn", "vectorized_elementwise_kernel", "reduce_kernel",
                         "softmax_warp_forward", "layer_norm_kernel"};
  for (const char* b : bases) kernel_names.push_back(names.intern(b));

  Delivery out(spec, sink);
  const uint32_t thread = 1;
  uint64_t corr = 1;
  uint64_t events = 0;
  TimeNs t = spec.start_ns;
  const int ndev = std::max(spec.devices, 1);
  std::vector<TimeNs> free0(static_cast<size_t>(ndev), t), free1(static_cast<size_t>(ndev), t);

  auto launch = [&](int dev, uint32_t stream, std::vector<TimeNs>& free, GpuOpKind kind,
                    NameId name, TimeNs dur, CopyDir dir, CollectiveType coll, bool pageable) {
    HostApiCall c;
    c.start = t;
    c.end = t + jit(spec.launch_cost_ns);
    c.correlation_id = corr++;
    c.thread = thread;
    c.kind = kind == GpuOpKind::kKernel ? HostApiKind::kLaunch : HostApiKind::kCopy;
    c.name = kind == GpuOpKind::kKernel ? n_launch : n_memcpy;
    GpuOp op;
    op.start = std::max(free[static_cast<size_t>(dev)], c.start + jit(spec.launch_latency_ns));
    op.end = op.start + dur;
    op.correlation_id = c.correlation_id;
    op.device = static_cast<uint16_t>(dev);
    op.stream = stream;
    op.kind = kind;
    op.name = name;
    op.copy_dir = dir;
    op.collective = coll;
    if (pageable) {
      op.flags = kGpuOpPageable;
      // A pageable copy blocks the host until it is done.
      c.end = std::max(c.end, op.end);
    }
    free[static_cast<size_t>(dev)] = op.end;
    out.api(c);
    out.gpu(op);
    events += 2;
    t = c.end;
  };

  // cudaStreamSynchronize on every stream of every device: the host waits for all work.
  auto sync_all = [&] {
    TimeNs done = t;
    for (int dev = 0; dev < ndev; ++dev) {
      done = std::max({done, free0[static_cast<size_t>(dev)], free1[static_cast<size_t>(dev)]});
    }
    HostApiCall sync;
    sync.start = t;
    sync.end = done + 2'000;
    sync.thread = thread;
    sync.kind = HostApiKind::kSync;
    sync.name = n_sync;
    sync.correlation_id = corr++;
    out.api(sync);
    ++events;
    t = sync.end;
  };

  for (int step = 0; step < spec.steps; ++step) {
    const TimeNs step_begin = t;
    if (spec.emit_steps && spec.use_markers) {
      Marker m;
      m.ts = step_begin;
      m.kind = MarkerKind::kStepBoundary;
      m.number = step;
      m.thread = thread;
      m.name = n_step;
      out.marker(m);
      ++events;
    }
    if (spec.flops_per_step > 0) {
      Marker m;
      m.ts = t;
      m.kind = MarkerKind::kStepFlops;
      m.value = spec.flops_per_step;
      m.thread = thread;
      out.marker(m);
      ++events;
    }
    if (spec.data_wait_ns > 0) {
      HostRange r;
      r.start = t;
      t += jit(spec.data_wait_ns);
      r.end = t;
      r.kind = RangeKind::kData;
      r.thread = thread;
      r.name = n_data;
      out.range(r);
      ++events;
    }
    if (spec.cpu_work_ns > 0) t += jit(spec.cpu_work_ns);  // e.g. augmentation on the host
    for (int dev = 0; dev < ndev; ++dev) {
      if (spec.h2d_ns > 0) {
        launch(dev, 7, free0, GpuOpKind::kMemcpy, n_h2d, jit(spec.h2d_ns), CopyDir::kH2D,
               CollectiveType::kNone, spec.h2d_pageable);
      }
    }
    for (int k = 0; k < spec.kernels_per_step; ++k) {
      for (int dev = 0; dev < ndev; ++dev) {
        launch(dev, 7, free0, GpuOpKind::kKernel,
               kernel_names[static_cast<size_t>(k) % kernel_names.size()], jit(spec.kernel_ns),
               CopyDir::kNone, CollectiveType::kNone, false);
        if (spec.collective_ns > 0 && k == spec.kernels_per_step / 2) {
          // The collective waits for the gradients computed so far (stream 7's work).
          free1[static_cast<size_t>(dev)] =
              std::max(free1[static_cast<size_t>(dev)], free0[static_cast<size_t>(dev)]);
          launch(dev, 13, free1, GpuOpKind::kKernel, n_coll, jit(spec.collective_ns),
                 CopyDir::kNone, CollectiveType::kAllReduce, false);
        }
      }
    }
    if (spec.tiny_kernels_per_step > 0) {
      // The optimizer waits for the gradients (all streams), then runs many tiny kernels the
      // host cannot launch as fast as the GPU finishes them.
      sync_all();
    }
    for (int k = 0; k < spec.tiny_kernels_per_step; ++k) {
      for (int dev = 0; dev < ndev; ++dev) {
        launch(dev, 7, free0, GpuOpKind::kKernel, n_tiny, jit(spec.tiny_kernel_ns), CopyDir::kNone,
               CollectiveType::kNone, false);
      }
    }
    if (spec.host_pause_ns > 0) t += jit(spec.host_pause_ns);
    sync_all();
    if (spec.emit_steps && !spec.use_markers) {
      HostRange r;
      r.start = step_begin;
      r.end = t;
      r.kind = RangeKind::kStep;
      r.number = step;
      r.thread = thread;
      r.name = n_step;
      out.range(r);
      ++events;
    }
  }
  if (spec.emit_steps && spec.use_markers) {
    Marker m;  // closes the last step
    m.ts = t;
    m.kind = MarkerKind::kStepBoundary;
    m.number = spec.steps;
    m.thread = thread;
    m.name = n_step;
    out.marker(m);
    ++events;
  }
  out.finish(t);
  return events;
}

}  // namespace gpuacct
