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
  // The end of a step at host time `t`: nothing emitted later ends before it.
  void step_end(TimeNs t) {
    if (!shuffled() && spec_.step_watermarks) sink_.on_watermark(t);
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


// One synthetic run: the host thread's time `t`, each device's two streams (free0: compute and
// copies, free1: collectives), and the events delivered as they are made.  The random draws
// happen in a fixed order (the bundled sample and the goldens depend on it).
class SyntheticRun {
 public:
  SyntheticRun(const SyntheticSpec& spec, NameTable& names, EventSink& sink)
      : spec_(spec),
        rng_(spec.seed),
        uni_(1.0 - spec.jitter, 1.0 + spec.jitter),
        out_(spec, sink),
        t_(spec.start_ns),
        ndev_(std::max(spec.devices, 1)),
        free0_(static_cast<size_t>(ndev_), t_),
        free1_(static_cast<size_t>(ndev_), t_) {
    n_launch_ = names.intern("cudaLaunchKernel");
    n_memcpy_ = names.intern("cudaMemcpyAsync");
    n_sync_ = names.intern("cudaStreamSynchronize");
    n_step_ = names.intern("train_step");
    n_data_ = names.intern("enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__");
    n_h2d_ = names.intern("Memcpy HtoD (Pageable -> Device)");
    n_coll_ = names.intern("ncclDevKernel_AllReduce_Sum_f32_RING_LL");
    n_tiny_ = names.intern("optimizer_foreach_add_kernel");
    const char* bases[] = {"ampere_sgemm_128x64_tn", "vectorized_elementwise_kernel",
                           "reduce_kernel", "softmax_warp_forward", "layer_norm_kernel"};
    for (const char* b : bases) kernel_names_.push_back(names.intern(b));
  }

  uint64_t run(const std::function<bool(int)>& keep_going) {
    for (int step = 0; step < spec_.steps; ++step) {
      if (keep_going && !keep_going(step)) return events_;
      one_step(step);
      out_.step_end(t_);
    }
    if (spec_.emit_steps && spec_.use_markers) step_marker(spec_.steps);  // closes the last
    out_.finish(t_);
    return events_;
  }

 private:
  TimeNs jit(TimeNs v) {
    return v <= 0 ? 0
                  : std::max<TimeNs>(1, static_cast<TimeNs>(static_cast<double>(v) * uni_(rng_)));
  }

  struct Launch {
    GpuOpKind kind;
    NameId name;
    TimeNs dur;
    CopyDir dir = CopyDir::kNone;
    CollectiveType coll = CollectiveType::kNone;
    bool pageable = false;
  };

  void launch(int dev, uint32_t stream, std::vector<TimeNs>& free, const Launch& l) {
    HostApiCall c;
    c.start = t_;
    c.end = t_ + jit(spec_.launch_cost_ns);
    c.correlation_id = corr_++;
    c.thread = kThread;
    c.kind = l.kind == GpuOpKind::kKernel ? HostApiKind::kLaunch : HostApiKind::kCopy;
    c.name = l.kind == GpuOpKind::kKernel ? n_launch_ : n_memcpy_;
    GpuOp op;
    op.start = std::max(free[static_cast<size_t>(dev)], c.start + jit(spec_.launch_latency_ns));
    op.end = op.start + l.dur;
    op.correlation_id = c.correlation_id;
    op.device = static_cast<uint16_t>(dev);
    op.stream = stream;
    op.kind = l.kind;
    op.name = l.name;
    op.copy_dir = l.dir;
    op.collective = l.coll;
    if (l.pageable) {
      op.flags = kGpuOpPageable;
      c.end = std::max(c.end, op.end);  // a pageable copy blocks the host until it is done
    }
    free[static_cast<size_t>(dev)] = op.end;
    out_.api(c);
    out_.gpu(op);
    events_ += 2;
    t_ = c.end;
  }

  // cudaStreamSynchronize on every stream of every device: the host waits for all work.
  void sync_all() {
    TimeNs done = t_;
    for (size_t dev = 0; dev < static_cast<size_t>(ndev_); ++dev) {
      done = std::max({done, free0_[dev], free1_[dev]});
    }
    HostApiCall sync;
    sync.start = t_;
    sync.end = done + 2'000;
    sync.thread = kThread;
    sync.kind = HostApiKind::kSync;
    sync.name = n_sync_;
    sync.correlation_id = corr_++;
    out_.api(sync);
    ++events_;
    t_ = sync.end;
  }

  void step_marker(int number) {
    Marker m;
    m.ts = t_;
    m.kind = MarkerKind::kStepBoundary;
    m.number = number;
    m.thread = kThread;
    m.name = n_step_;
    out_.marker(m);
    ++events_;
  }

  // The host's part before the GPU work: the step mark, FLOPs, waiting for data, CPU work.
  void step_prologue(int step) {
    if (spec_.emit_steps && spec_.use_markers) step_marker(step);
    if (spec_.flops_per_step > 0) {
      Marker m;
      m.ts = t_;
      m.kind = MarkerKind::kStepFlops;
      m.value = spec_.flops_per_step;
      m.thread = kThread;
      out_.marker(m);
      ++events_;
    }
    const TimeNs shifted =
        spec_.shift_step >= 0 && step >= spec_.shift_step ? spec_.shift_data_wait_ns : 0;
    if (spec_.data_wait_ns > 0 || shifted > 0) {
      HostRange r;
      r.start = t_;
      t_ += jit(spec_.data_wait_ns) + shifted;
      r.end = t_;
      r.kind = RangeKind::kData;
      r.thread = kThread;
      r.name = n_data_;
      out_.range(r);
      ++events_;
    }
    if (spec_.cpu_work_ns > 0) t_ += jit(spec_.cpu_work_ns);  // e.g. augmentation on the host
  }

  // Input copies, the forward/backward kernels with the collective half-way, the optimizer.
  void step_gpu_work() {
    for (int dev = 0; dev < ndev_; ++dev) {
      if (spec_.h2d_ns > 0) {
        launch(dev, 7, free0_,
               {GpuOpKind::kMemcpy, n_h2d_, jit(spec_.h2d_ns), CopyDir::kH2D,
                CollectiveType::kNone, spec_.h2d_pageable});
      }
    }
    for (int k = 0; k < spec_.kernels_per_step; ++k) {
      for (int dev = 0; dev < ndev_; ++dev) {
        const size_t d = static_cast<size_t>(dev);
        launch(dev, 7, free0_,
               {GpuOpKind::kKernel, kernel_names_[static_cast<size_t>(k) % kernel_names_.size()],
                jit(spec_.kernel_ns)});
        if (spec_.collective_ns > 0 && k == spec_.kernels_per_step / 2) {
          // The collective waits for the gradients computed so far (stream 7's work).
          free1_[d] = std::max(free1_[d], free0_[d]);
          launch(dev, 13, free1_,
                 {GpuOpKind::kKernel, n_coll_, jit(spec_.collective_ns), CopyDir::kNone,
                  CollectiveType::kAllReduce});
        }
      }
    }
    if (spec_.tiny_kernels_per_step > 0) {
      // The optimizer waits for the gradients (all streams), then runs many tiny kernels the
      // host cannot launch as fast as the GPU finishes them.
      sync_all();
    }
    for (int k = 0; k < spec_.tiny_kernels_per_step; ++k) {
      for (int dev = 0; dev < ndev_; ++dev) {
        launch(dev, 7, free0_, {GpuOpKind::kKernel, n_tiny_, jit(spec_.tiny_kernel_ns)});
      }
    }
  }

  void one_step(int step) {
    const TimeNs step_begin = t_;
    step_prologue(step);
    step_gpu_work();
    if (spec_.host_pause_ns > 0) t_ += jit(spec_.host_pause_ns);
    if (spec_.spike_every > 0 && step % spec_.spike_every == spec_.spike_every - 1) {
      t_ += spec_.spike_host_ns;
    }
    sync_all();
    if (spec_.emit_steps && !spec_.use_markers) {
      HostRange r;
      r.start = step_begin;
      r.end = t_;
      r.kind = RangeKind::kStep;
      r.number = step;
      r.thread = kThread;
      r.name = n_step_;
      out_.range(r);
      ++events_;
    }
  }

  static constexpr uint32_t kThread = 1;
  const SyntheticSpec& spec_;
  std::mt19937_64 rng_;
  std::uniform_real_distribution<double> uni_;
  Delivery out_;
  TimeNs t_;
  int ndev_;
  std::vector<TimeNs> free0_, free1_;
  uint64_t corr_ = 1;
  uint64_t events_ = 0;
  NameId n_launch_, n_memcpy_, n_sync_, n_step_, n_data_, n_h2d_, n_coll_, n_tiny_;
  std::vector<NameId> kernel_names_;
};

}  // namespace

uint64_t generate_synthetic(const SyntheticSpec& spec, NameTable& names, EventSink& sink,
                            const std::function<bool(int step)>& keep_going) {
  return SyntheticRun(spec, names, sink).run(keep_going);
}

}  // namespace gpuacct
