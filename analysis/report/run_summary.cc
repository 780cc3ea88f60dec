#include "analysis/report/run_summary.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <functional>
#include <map>
#include <set>

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
  for (const WallInfo& k : kWalls) {
    const auto i = static_cast<size_t>(k.wall);
    s.ns[i] = w[k.wall];
    s.share[i] =
        s.total_ns > 0 ? static_cast<double>(s.ns[i]) / static_cast<double>(s.total_ns) : 0.0;
  }
  return s;
}

std::string pct(double share) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f%%", share * 100.0);
  return buf;
}

// A wall's verdict band: its moderate / high thresholds.  The verdict's bound is the wall's name.
struct WallBand {
  Wall wall;
  double moderate;
  double high;
};

Severity severity_of(double share, const WallBand& b) {
  if (share >= b.high) return Severity::kHigh;
  if (share >= b.moderate) return Severity::kModerate;
  return Severity::kNone;
}

// Headline and recommendation for a verdict on one of the non-compute walls.
void describe_wall(Verdict& v, const WallBand& b, const RunSummary& out) {
  const std::string level = v.severity == Severity::kHigh ? "HIGHLY" : "MODERATELY";
  const std::string share = pct(v.share);
  switch (b.wall) {
    case Wall::kData: {
      v.headline = level + " data-bound: " + share +
                   " of step time the GPU waits for input (data-wait + exposed input copies).";
      const bool copies = out.categories.copy_input > out.categories.data_wait;
      v.recommendation =
          copies ? "Host-to-device copies are exposed: use pinned memory (DataLoader "
                   "pin_memory=True, tensor.to(device, non_blocking=True)) and prefetch the "
                   "next batch on a side stream."
                 : "Raise DataLoader num_workers (with persistent_workers=True and "
                   "prefetch_factor), set pin_memory=True, and pack many small files into "
                   "large sequential shards.";
      return;
    }
    case Wall::kLaunch:
      v.headline = level + " launch-bound: " + share +
                   " of step time the GPU waits for the host to submit work.";
      v.recommendation =
          "Cut per-kernel host overhead: capture the step in CUDA graphs "
          "(torch.compile(mode=\"reduce-overhead\") or torch.cuda.graphs), fuse small ops "
          "(torch.compile), or raise the batch size so each kernel does more work.";
      return;
    case Wall::kCommunication:
      v.headline = level + " communication-bound: " + share +
                   " of step time collectives run with no compute to hide them.";
      v.recommendation =
          "Overlap collectives with compute (DDP bucket_cap_mb / gradient_as_bucket_view, "
          "FSDP prefetching), use a smaller tensor-parallel degree, and check the "
          "interconnect topology (nvidia-smi topo -m, NCCL_DEBUG=INFO).";
      return;
    case Wall::kOther: {
      const bool copies = out.categories.copy_other > out.categories.host_other;
      if (copies) {
        v.headline = level + " host-bound: " + share +
                     " of step time goes to exposed device-to-host / device-to-device copies "
                     "and memsets (the other wall).";
        v.recommendation =
            "Keep tensors on the GPU inside the step: avoid .cpu(), .item(), .tolist() and "
            "printing GPU tensors every step; copy results with non_blocking=True into pinned "
            "memory, and only every N steps.";
      } else {
        v.headline = level + " host-bound: " + share +
                     " of step time the GPU is idle while the host does other work outside "
                     "CUDA calls and data ranges (Python, logging, checkpointing, syncs), or "
                     "waits on a dependency (the other wall).";
        v.recommendation =
            "Profile the Python side (py-spy record, or torch.profiler with with_stack=True) "
            "and take per-step host work out of the loop: logging and metrics every step, "
            "checkpointing, garbage collection (gc.freeze() after setup), host syncs such as "
            ".item() / .cpu() / torch.cuda.synchronize(); the largest idle gaps below show "
            "where the GPU waited.";
      }
      return;
    }
    case Wall::kCompute:
      return;
  }
}

// "mtia_ccp_events: 1200, mtia_runtime: 340"
std::string events_text(const std::vector<std::pair<std::string, int64_t>>& events) {
  std::string out;
  for (const auto& [category, n] : events) {
    out += (out.empty() ? "" : ", ") + category + ": " + std::to_string(n);
  }
  return out;
}

// bound == "none": why nothing could be accounted, in words a person acts on.
void explain_nothing(Verdict& v, const RunSummary& out, const Stats& stats,
                     const RunMetadata* meta) {
  v.bound = "none";
  const int64_t ops = stats.get(Stat::gpu_ops_received);
  if (ops == 0 && meta != nullptr && !meta->other_accelerator_events.empty()) {
    v.reason = "unsupported_device";
    v.headline =
        "Not supported: the input holds no CUDA GPU work, only events of another "
        "accelerator (" +
        events_text(meta->other_accelerator_events) + ").";
    v.recommendation =
        "gpuacct accounts NVIDIA CUDA GPUs (a live run, or a PyTorch-profiler trace of a CUDA "
        "run); traces of other accelerators (MTIA, ...) are not supported.";
    return;
  }
  if (out.steps == 0 && out.warmup_steps > 0) {
    v.reason = "all_warmup";
    v.headline = "No summary step: all " + std::to_string(out.warmup_steps) +
                 " steps were left out as warm-up.";
    v.recommendation =
        "Leave fewer steps out as warm-up (--warmup N, GPUACCT_WARMUP_STEPS) or run more "
        "iterations.";
    return;
  }
  if (out.steps == 0) {
    v.reason = "no_steps";
    v.headline = "No complete step was seen: nothing to account.";
    v.recommendation =
        "Mark steps (gpuacct_step_mark, an NVTX range named 'step', or torch's optimizer step) "
        "or run more iterations.";
    return;
  }
  if (ops > 0) {
    v.reason = "gpu_work_outside_steps";
    const int64_t outside = stats.get(Stat::ops_outside_steps);
    v.headline = std::to_string(ops) +
                 " GPU operations were recorded, but no step holds any GPU time" +
                 (outside > 0 ? " (" + std::to_string(outside) + " ran outside every step)." : ".");
    v.recommendation =
        "Check where the steps begin and end (the step marks or ranges, or the detected "
        "steps): the GPU work lies outside them (stat ops_outside_steps).";
    return;
  }
  v.reason = "no_gpu_activity";
  v.headline = "No GPU activity was recorded: steps were timed on the host only.";
  v.recommendation =
      "Run on a machine with a GPU; for a live run check that CUPTI loaded (gpuacct prints why "
      "at start-up when it cannot), for a trace that the profiler recorded CUDA activity "
      "(ProfilerActivity.CUDA).";
}

// The verdict (docs/accounting.md §5): the wall with the highest band, or compute, or none.
void decide_verdict(RunSummary& out, const std::vector<StepRow>& rows,
                    const std::function<bool(const StepRow&)>& left_out, const Stats& stats,
                    const VerdictBands& bands, const RunMetadata* meta) {
  Verdict& v = out.verdict;
  v.mean_step_ms = out.step_ms_mean;
  if (out.steps == 0 || out.gpu_busy_ns == 0) {
    explain_nothing(v, out, stats, meta);
  } else {
    const WallBand walls[] = {
        {Wall::kData, bands.data_moderate, bands.data_high},
        {Wall::kLaunch, bands.launch_moderate, bands.launch_high},
        {Wall::kCommunication, bands.comm_moderate, bands.comm_high},
        {Wall::kOther, bands.other_moderate, bands.other_high},
    };
    const WallBand* best = nullptr;
    Severity best_sev = Severity::kNone;
    double best_share = 0;
    for (const WallBand& b : walls) {
      const double share = out.walls.share[static_cast<size_t>(b.wall)];
      const Severity sev = severity_of(share, b);
      if (sev == Severity::kNone) continue;
      if (best == nullptr || sev > best_sev || (sev == best_sev && share > best_share)) {
        best = &b;
        best_sev = sev;
        best_share = share;
      }
    }
    if (best != nullptr) {
      v.bound = to_string(best->wall);
      v.severity = best_sev;
      v.share = best_share;
      describe_wall(v, *best, out);
      double removed_ms = 0;
      for (const StepRow& r : rows) {
        if (!left_out(r)) removed_ms += static_cast<double>(r.walls()[best->wall]) / 1e6;
      }
      const double per_step = removed_ms / static_cast<double>(std::max<int64_t>(out.rows, 1));
      v.what_if_step_ms = std::max(0.0, out.step_ms_mean - per_step);
    } else {
      v.bound = to_string(Wall::kCompute);
      v.share = out.compute_share;
      v.severity = out.compute_share >= bands.compute_high ? Severity::kHigh : Severity::kModerate;
      v.headline = "Compute-bound: no data, launch, communication or host wall reaches its band; " +
                   pct(out.compute_share) + " of step time the GPU computes.";
      v.recommendation =
          "The GPU is the bottleneck: look at kernel efficiency next (MFU, mixed precision and "
          "Tensor Cores, the top kernels below).";
      v.what_if_step_ms = out.step_ms_mean;
    }
    // The walls that reach their band but lost to the verdict, in the verdict's order.
    std::vector<const WallBand*> runners_up;
    for (const WallBand& b : walls) {
      const double share = out.walls.share[static_cast<size_t>(b.wall)];
      if (&b != best && severity_of(share, b) != Severity::kNone) runners_up.push_back(&b);
    }
    auto rank = [&](const WallBand* b) {
      const double share = out.walls.share[static_cast<size_t>(b->wall)];
      return std::make_pair(severity_of(share, *b), share);
    };
    std::sort(runners_up.begin(), runners_up.end(),
              [&](const WallBand* a, const WallBand* b) { return rank(a) > rank(b); });
    for (const WallBand* bp : runners_up) {
      const WallBand& b = *bp;
      const double share = out.walls.share[static_cast<size_t>(b.wall)];
      const Severity sev = severity_of(share, b);
      std::string note = "Also " + std::string(to_string(sev)) + ": the " + to_string(b.wall) +
                         " wall takes " + pct(share) + " of step time";
      if (b.wall == Wall::kOther) {
        note +=
            " (host work outside CUDA calls and data ranges: Python, logging, "
            "checkpointing; or the GPU waited on a dependency): profile the host side "
            "(e.g. py-spy)";
      }
      v.notes.push_back(note + ".");
    }
    // One rank is not the job: the rank that waits in a collective is not the one that is
    // slow, and this rank alone cannot tell waiting from transfer (docs/job_view.md).
    if (meta != nullptr && meta->world_size > 1 && best != nullptr &&
        best->wall == Wall::kCommunication) {
      v.notes.push_back("This is one rank of " + std::to_string(meta->world_size) +
                        ": its communication time includes waiting for slower ranks to reach "
                        "each collective, and the rank that waits is not the one that is slow. "
                        "`gpuacct job` over every rank's outputs says which rank arrives last "
                        "and what it was doing instead.");
    }
    if (out.gpu_busy_share > 0) {
      v.notes.push_back("nvidia-smi would show the GPU " + pct(out.gpu_busy_share) +
                        " busy; it computed " + pct(out.compute_share) + " of step time.");
    }
    if (meta != nullptr && !meta->other_accelerator_events.empty()) {
      v.notes.push_back("The input also holds events of another accelerator (" +
                        events_text(meta->other_accelerator_events) +
                        "): not supported, left out of every number.");
    }
  }
}

}  // namespace

std::vector<int64_t> slow_start_steps(const std::map<int64_t, double>& step_ms,
                                      const SlowStartRule& rule, double* steady_ms) {
  if (steady_ms != nullptr) *steady_ms = 0;
  const size_t n = step_ms.size();
  const size_t steady_n = std::max(static_cast<size_t>(std::max(rule.min_steady_steps, 1)),
                                   (n + 1) / 2);
  if (n <= steady_n) return {};
  std::vector<int64_t> index;
  std::vector<double> ms;
  for (const auto& [i, t] : step_ms) {
    index.push_back(i);
    ms.push_back(t);
  }
  const double steady =
      percentile(std::vector<double>(ms.end() - static_cast<std::ptrdiff_t>(steady_n), ms.end()),
                 50);
  if (steady_ms != nullptr) *steady_ms = steady;
  const size_t cap = std::min(
      n - steady_n,
      std::max<size_t>(1, static_cast<size_t>(rule.max_leading_share * static_cast<double>(n))));
  std::vector<int64_t> out;
  for (size_t i = 0; i < cap && ms[i] > rule.factor * steady; ++i) {
    out.push_back(index[i]);
  }
  return out;
}

namespace {

// The steps with one-time work (OneTimeWorkRule) among `step_ms` (step -> ms), given each
// step's first-use kernels; the median they were compared with goes to `median_ms`.
std::vector<int64_t> one_time_work_steps(const std::map<int64_t, double>& step_ms,
                                         const std::map<int64_t, uint32_t>& first_uses,
                                         const OneTimeWorkRule& rule, double* median_ms) {
  *median_ms = 0;
  const size_t n = step_ms.size();
  if (n <= static_cast<size_t>(rule.min_steady_steps)) return {};
  std::vector<double> all;
  for (const auto& [i, ms] : step_ms) all.push_back(ms);
  *median_ms = percentile(all, 50);
  std::vector<std::pair<double, int64_t>> slow;  // (ms, step)
  for (const auto& [i, ms] : step_ms) {
    const auto f = first_uses.find(i);
    if (f != first_uses.end() && f->second > 0 && ms > rule.factor * *median_ms)
      slow.emplace_back(ms, i);
  }
  std::sort(slow.rbegin(), slow.rend());
  const size_t cap = std::min(n - static_cast<size_t>(rule.min_steady_steps),
                              std::max<size_t>(1, static_cast<size_t>(rule.max_share *
                                                                      static_cast<double>(n))));
  if (slow.size() > cap) slow.resize(cap);
  std::vector<int64_t> out;
  for (const auto& [ms, i] : slow) out.push_back(i);
  std::sort(out.begin(), out.end());
  return out;
}

// The time of each step not flagged warm-up: the slowest device's window (ms).
std::map<int64_t, double> summary_step_ms(const std::vector<StepRow>& rows) {
  std::map<int64_t, double> out;
  for (const StepRow& r : rows) {
    if (r.warmup) continue;
    double& ms = out[r.step_index];
    ms = std::max(ms, static_cast<double>(r.duration()) / 1e6);
  }
  return out;
}

std::string ms_text(double ms) {
  char buf[32];
  std::snprintf(buf, sizeof buf, ms < 10 ? "%.2f ms" : "%.1f ms", ms);
  return buf;
}

// The work declared in one unit (`field`) over the summary steps that declared it: every row of
// a step carries the step's work; its time is the slowest device's window, as for FLOPs.
template <typename LeftOut>
void declared_work(const std::vector<StepRow>& rows, const LeftOut& left_out,
                   double StepRow::*field, DeclaredWork* out) {
  std::map<int64_t, std::pair<double, double>> steps;  // step -> (work, slowest ms)
  for (const StepRow& r : rows) {
    if (left_out(r) || !(r.*field > 0)) continue;
    auto& w = steps[r.step_index];
    w.first = r.*field;
    w.second = std::max(w.second, static_cast<double>(r.duration()) / 1e6);
  }
  *out = DeclaredWork{};
  for (const auto& [idx, w] : steps) {
    out->total += w.first;
    out->step_ms += w.second;
  }
  out->steps = static_cast<int64_t>(steps.size());
}

// The verdict note naming the steps the slow-start rule left out.
std::string slow_start_note(const RunSummary& s, const SlowStartRule& rule) {
  std::string steps, times;
  for (size_t i = 0; i < s.slow_start_steps.size(); ++i) {
    steps += (i ? ", " : "") + std::to_string(s.slow_start_steps[i]);
    times += (i ? ", " : "") + ms_text(s.slow_start_step_ms[i]);
  }
  char factor[16];
  std::snprintf(factor, sizeof factor, "%g", rule.factor);
  return std::string(s.slow_start_steps.size() == 1 ? "Step " : "Steps ") + steps + " (" +
         times + ") left out as warm-up: more than " + factor + "x the steady step time (" +
         ms_text(s.slow_start_steady_ms) + ", the median of the last steps).";
}

}  // namespace

RunSummary summarize(const std::vector<StepRow>& rows, const Stats& stats,
                     const VerdictBands& bands, const RunMetadata* meta,
                     const SlowStartRule& slow_start) {
  RunSummary out;
  // Leading steps far slower than the steady state are warm-up too (SlowStartRule).
  {
    const std::map<int64_t, double> candidates = summary_step_ms(rows);
    out.slow_start_steps = slow_start_steps(candidates, slow_start, &out.slow_start_steady_ms);
    for (int64_t i : out.slow_start_steps) out.slow_start_step_ms.push_back(candidates.at(i));
  }
  std::set<int64_t> slow(out.slow_start_steps.begin(), out.slow_start_steps.end());
  // Then steps carrying one-time work, wherever they sit (OneTimeWorkRule).
  {
    std::map<int64_t, double> candidates = summary_step_ms(rows);
    std::map<int64_t, uint32_t> first_uses;
    for (const StepRow& r : rows) first_uses[r.step_index] += r.first_use_kernels;
    for (int64_t i : slow) candidates.erase(i);
    out.one_time_steps =
        one_time_work_steps(candidates, first_uses, OneTimeWorkRule{}, &out.one_time_median_ms);
    for (int64_t i : out.one_time_steps) {
      out.one_time_step_ms.push_back(candidates.at(i));
      out.one_time_first_uses.push_back(first_uses.at(i));
      slow.insert(i);
    }
  }
  auto warm_up = [&slow](const StepRow& r) { return r.warmup || slow.count(r.step_index) > 0; };
  // Rows of steps CUPTI did not trace (GPUACCT_SAMPLE) hold no GPU side: no summary number
  // uses them; they are counted apart (untraced_steps) and named in a note.
  auto left_out = [&warm_up](const StepRow& r) { return warm_up(r) || !r.sampled; };
  std::set<int64_t> traced_steps, untraced_steps;

  std::map<int64_t, double> step_ms;  // step index -> slowest device's window (ms)
  std::set<int64_t> warm;
  CategoryNs warm_cat;
  for (const StepRow& r : rows) {
    (r.sampled ? traced_steps : untraced_steps).insert(r.step_index);
    if (!r.sampled) continue;
    if (left_out(r)) {
      warm.insert(r.step_index);
      warm_cat += r.cat;
      continue;
    }
    ++out.rows;
    out.categories += r.cat;
    out.comm_total_ns = saturating_add(out.comm_total_ns, r.comm_total);
    out.comm_overlapped_ns = saturating_add(out.comm_overlapped_ns, r.comm_overlapped);
    out.gpu_busy_ns = saturating_add(out.gpu_busy_ns, r.gpu_busy);
    out.kernels += r.kernels;
    out.counters += r.counters;
    // Every row of a step carries the step's launches (all threads and devices): count them
    // at its first row -- the step's first appearance, not a zero time so far, which a first
    // row lasting 0 ns would leave for the next row to count again.
    const auto [it, first_row_of_step] = step_ms.try_emplace(r.step_index, 0.0);
    it->second = std::max(it->second, static_cast<double>(r.duration()) / 1e6);
    if (first_row_of_step) out.launches += r.launches;
  }
  {
    std::map<int64_t, std::pair<double, double>> flops;  // step -> (flops, slowest ms)
    for (const StepRow& r : rows) {
      if (left_out(r) || r.flops <= 0) continue;
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
  declared_work(rows, left_out, &StepRow::tokens, &out.declared_tokens);
  declared_work(rows, left_out, &StepRow::samples, &out.declared_samples);
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

  decide_verdict(out, rows, left_out, stats, bands, meta);
  out.slow_start_rule = slow_start;
  if (!out.slow_start_steps.empty()) {
    out.verdict.notes.push_back(slow_start_note(out, slow_start));
  }
  if (!out.one_time_steps.empty()) {
    std::string steps;
    for (size_t i = 0; i < out.one_time_steps.size(); ++i) {
      steps += (i ? ", " : "") + std::to_string(out.one_time_steps[i]) + " (" +
               ms_text(out.one_time_step_ms[i]) + ", " +
               std::to_string(out.one_time_first_uses[i]) + " kernels run for the first time)";
    }
    out.verdict.notes.push_back(
        std::string(out.one_time_steps.size() == 1 ? "Step " : "Steps ") + steps +
        " left out as warm-up: one-time work (autotuning, compilation, a first evaluation?) "
        "made it more than 1.5x the median step (" + ms_text(out.one_time_median_ms) + ").");
  }
  out.untraced_steps = static_cast<int64_t>(untraced_steps.size());
  if (out.untraced_steps > 0) {
    const int64_t traced = static_cast<int64_t>(traced_steps.size());
    out.verdict.notes.push_back("Sampled: CUPTI traced " + std::to_string(traced) + " of " +
                                std::to_string(traced + out.untraced_steps) +
                                " steps; the walls and the verdict are those of the traced steps "
                                "alone.");
  }
  if (stats.has_data_loss()) {
    out.verdict.notes.push_back(
        "Some events were lost (see the data-loss counters): numbers may be incomplete.");
  }
  return out;
}

}  // namespace gpuacct
