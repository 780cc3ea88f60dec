#include "analysis/run_summary.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>

namespace gpuacct {

const char* to_string(Severity s) {
  switch (s) {
    case Severity::kNone:
      return "none";
    case Severity::kModerate:
      return "moderate";
    case Severity::kHigh:
      return "high";
  }
  return "none";
}

double peak_bf16_tflops(const std::string& device_name) {
  // Dense (no sparsity) bf16 Tensor Core peaks from NVIDIA's data sheets; most specific first.
  static const std::pair<const char*, double> kPeaks[] = {
      {"GB200", 2500}, {"B200", 2250}, {"H200", 989}, {"H100 PCIe", 756}, {"H100", 989},
      {"H800", 989},   {"GH200", 989}, {"L40S", 362}, {"A100", 312},      {"A800", 312},
      {"A10G", 70},    {"L4", 121},    {"A10", 125},
  };
  for (const auto& [needle, peak] : kPeaks) {
    if (device_name.find(needle) != std::string::npos) return peak;
  }
  return 0;
}

double percentile(std::vector<double> values, double p) {
  if (values.empty()) return 0;
  std::sort(values.begin(), values.end());
  const double rank = std::clamp(p, 0.0, 100.0) / 100.0 * static_cast<double>(values.size() - 1);
  const auto lo = static_cast<size_t>(std::floor(rank));
  const auto hi = static_cast<size_t>(std::ceil(rank));
  const double frac = rank - static_cast<double>(lo);
  return values[lo] + (values[hi] - values[lo]) * frac;
}

namespace {

WallShares shares_of(const CategoryNs& c) {
  WallShares s;
  const WallBreakdown w = WallBreakdown::from(c);
  s.total_ns = w.sum();
  for (int i = 0; i < kWallCount; ++i) {
    s.ns[static_cast<size_t>(i)] = wall_ns(w, static_cast<Wall>(i));
    s.share[static_cast<size_t>(i)] =
        s.total_ns > 0
            ? static_cast<double>(s.ns[static_cast<size_t>(i)]) / static_cast<double>(s.total_ns)
            : 0.0;
  }
  return s;
}

std::string pct(double share) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f%%", share * 100.0);
  return buf;
}

struct Candidate {
  const char* bound;
  Wall wall;
  double high;
  double moderate;
};

}  // namespace

RunSummary summarize(const std::vector<StepRow>& rows, const Stats& stats,
                     const VerdictBands& bands) {
  RunSummary out;
  std::map<int64_t, double> step_ms;  // step index -> slowest device's window (ms)
  std::map<int64_t, bool> warm;
  CategoryNs warm_cat;
  for (const StepRow& r : rows) {
    if (r.warmup) {
      warm[r.step_index] = true;
      warm_cat += r.cat;
      continue;
    }
    ++out.rows;
    out.categories += r.cat;
    out.comm_total_ns = saturating_add(out.comm_total_ns, r.comm_total);
    out.comm_overlapped_ns = saturating_add(out.comm_overlapped_ns, r.comm_overlapped);
    out.gpu_busy_ns = saturating_add(out.gpu_busy_ns, r.gpu_busy);
    out.kernels += r.kernels;
    double& ms = step_ms[r.step_index];
    const bool first_row_of_step = ms == 0.0;
    ms = std::max(ms, static_cast<double>(r.duration()) / 1e6);
    if (first_row_of_step) out.launches += r.launches;
  }
  {
    std::map<int64_t, std::pair<double, double>> flops;  // step -> (flops, slowest ms)
    for (const StepRow& r : rows) {
      if (r.warmup || r.flops <= 0) continue;
      auto& f = flops[r.step_index];
      f.first = r.flops;
      f.second = std::max(f.second, static_cast<double>(r.duration()) / 1e6);
    }
    double total_flops = 0, total_ms = 0;
    for (const auto& [idx, f] : flops) {
      total_flops += f.first;
      total_ms += f.second;
    }
    out.steps_with_flops = static_cast<int64_t>(flops.size());
    if (!flops.empty()) out.flops_per_step = total_flops / static_cast<double>(flops.size());
    if (total_ms > 0) out.achieved_tflops = total_flops / (total_ms / 1e3) / 1e12;
  }
  out.steps = static_cast<int64_t>(step_ms.size());
  out.warmup_steps = static_cast<int64_t>(warm.size());
  std::vector<double> durations;
  durations.reserve(step_ms.size());
  double total_ms = 0;
  for (const auto& [idx, ms] : step_ms) {
    durations.push_back(ms);
    total_ms += ms;
  }
  out.step_ms_p50 = percentile(durations, 50);
  out.step_ms_p90 = percentile(durations, 90);
  out.step_ms_p99 = percentile(durations, 99);
  out.step_ms_mean = durations.empty() ? 0 : total_ms / static_cast<double>(durations.size());
  out.walls = shares_of(out.categories);
  out.warmup_walls = shares_of(warm_cat);
  const double total = static_cast<double>(out.walls.total_ns);
  out.gpu_busy_share = total > 0 ? static_cast<double>(out.gpu_busy_ns) / total : 0;
  out.compute_share = out.walls.share[static_cast<size_t>(Wall::kCompute)];
  out.comm_overlap_share = out.comm_total_ns > 0 ? static_cast<double>(out.comm_overlapped_ns) /
                                                       static_cast<double>(out.comm_total_ns)
                                                 : 0;

  // ---- verdict ---------------------------------------------------------------------------
  Verdict& v = out.verdict;
  v.mean_step_ms = out.step_ms_mean;
  if (out.steps == 0) {
    v.bound = "none";
    v.headline = "No complete step was seen: nothing to account.";
    v.recommendation =
        "Mark steps (gpuacct_step_mark, an NVTX range named 'step', or torch's optimizer step) "
        "or run more iterations.";
  } else if (out.gpu_busy_ns == 0) {
    v.bound = "none";
    v.headline = "No GPU activity was recorded: steps were timed on the host only.";
    v.recommendation =
        "Run on a machine with a GPU (or check that CUPTI loaded: see the warnings above).";
  } else {
    const Candidate candidates[] = {
        {"data", Wall::kData, bands.data_high, bands.data_moderate},
        {"launch", Wall::kLaunch, bands.launch_high, bands.launch_moderate},
        {"communication", Wall::kCommunication, bands.comm_high, bands.comm_moderate},
    };
    const Candidate* best = nullptr;
    Severity best_sev = Severity::kNone;
    double best_share = 0;
    for (const Candidate& c : candidates) {
      const double share = out.walls.share[static_cast<size_t>(c.wall)];
      Severity sev = Severity::kNone;
      if (share >= c.high) {
        sev = Severity::kHigh;
      } else if (share >= c.moderate) {
        sev = Severity::kModerate;
      }
      if (sev == Severity::kNone) continue;
      if (best == nullptr || sev > best_sev || (sev == best_sev && share > best_share)) {
        best = &c;
        best_sev = sev;
        best_share = share;
      }
    }
    Wall wall = Wall::kCompute;
    if (best != nullptr) {
      v.bound = best->bound;
      v.severity = best_sev;
      v.share = best_share;
      wall = best->wall;
      const char* level = best_sev == Severity::kHigh ? "HIGHLY" : "MODERATELY";
      if (wall == Wall::kData) {
        v.headline = std::string(level) + " data-bound: " + pct(best_share) +
                     " of step time the GPU waits for input (data-wait + exposed input copies).";
        const bool copies = out.categories.copy_input > out.categories.data_wait;
        v.recommendation =
            copies ? "Host-to-device copies are exposed: use pinned memory (DataLoader "
                     "pin_memory=True, tensor.to(device, non_blocking=True)) and prefetch the "
                     "next batch on a side stream."
                   : "Raise DataLoader num_workers (with persistent_workers=True and "
                     "prefetch_factor), set pin_memory=True, and pack many small files into "
                     "large sequential shards.";
      } else if (wall == Wall::kLaunch) {
        v.headline = std::string(level) + " launch-bound: " + pct(best_share) +
                     " of step time the GPU waits for the host to submit work.";
        v.recommendation =
            "Cut per-kernel host overhead: capture the step in CUDA graphs "
            "(torch.compile(mode=\"reduce-overhead\") or torch.cuda.graphs), fuse small ops "
            "(torch.compile), or raise the batch size so each kernel does more work.";
      } else {
        v.headline = std::string(level) + " communication-bound: " + pct(best_share) +
                     " of step time collectives run with no compute to hide them.";
        v.recommendation =
            "Overlap collectives with compute (DDP bucket_cap_mb / gradient_as_bucket_view, "
            "FSDP prefetching), use a smaller tensor-parallel degree, and check the "
            "interconnect topology (nvidia-smi topo -m, NCCL_DEBUG=INFO).";
      }
    } else {
      v.bound = "compute";
      v.share = out.compute_share;
      wall = Wall::kCompute;
      v.headline = "Compute-bound: no input, launch or communication wall reaches its band; " +
                   pct(out.compute_share) + " of step time the GPU computes.";
      v.recommendation =
          "The GPU is the bottleneck: look at kernel efficiency next (MFU, mixed precision and "
          "Tensor Cores, the top kernels below).";
    }
    if (best != nullptr) {
      double removed_ms = 0;
      for (const StepRow& r : rows) {
        if (!r.warmup) removed_ms += static_cast<double>(wall_ns(r.walls(), wall)) / 1e6;
      }
      const double per_step = removed_ms / static_cast<double>(std::max<int64_t>(out.rows, 1));
      v.what_if_step_ms = std::max(0.0, out.step_ms_mean - per_step);
    } else {
      v.what_if_step_ms = out.step_ms_mean;
    }
    const double other = out.walls.share[static_cast<size_t>(Wall::kOther)];
    if (other >= bands.other_high) {
      v.notes.push_back(pct(other) +
                        " of step time the host did other work outside CUDA calls and data "
                        "ranges (Python, logging, checkpointing) or the GPU waited on a "
                        "dependency: profile the host side (e.g. py-spy).");
    }
    if (out.gpu_busy_share > 0) {
      v.notes.push_back("nvidia-smi would show the GPU " + pct(out.gpu_busy_share) +
                        " busy; it computed " + pct(out.compute_share) + " of step time.");
    }
  }
  if (stats.has_data_loss()) {
    v.notes.push_back(
        "Some events were lost (see the data-loss counters): numbers may be incomplete.");
  }
  return out;
}

}  // namespace gpuacct
