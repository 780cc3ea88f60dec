#include "analysis/report/trace_totals.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>

#include "analysis/model/flat_map.h"

namespace gpuacct {
namespace {

bool starts_with(std::string_view s, std::string_view p) {
  return s.substr(0, p.size()) == p;
}
bool contains(std::string_view s, std::string_view p) {
  return s.find(p) != std::string_view::npos;
}

// HTA's rounding, as pandas computes it: ts and dur are float64 microseconds (the JSON
// parser's nearest double to the decimal text); start = ceil(ts), end = floor(ts + dur) with
// the sum in float64.  For a decimal with at most 3 digits after the point (Kineto's ns
// resolution) the nearest double to ns / 1000 *is* the parsed text when |ns| < 2^53 (one
// correctly rounded division of two exact doubles); beyond that (microsecond epochs), long
// double division gets within an ulp.  The float64 sum can land just below a whole
// microsecond that the exact sum reaches: HTA's end is then 1 µs earlier, and so is ours.
double us_as_pandas_reads_it(TimeNs ns) {
  constexpr TimeNs kExact = TimeNs{1} << 53;
  if (ns > -kExact && ns < kExact) return static_cast<double>(ns) / 1000.0;
  return static_cast<double>(static_cast<long double>(ns) / 1000.0L);
}
int64_t ceil_us(TimeNs ns) {
  return static_cast<int64_t>(std::ceil(us_as_pandas_reads_it(ns)));
}
int64_t floor_end_us(TimeNs start_ns, TimeNs end_ns) {
  const double sum = us_as_pandas_reads_it(start_ns) + us_as_pandas_reads_it(end_ns - start_ns);
  return static_cast<int64_t>(std::floor(sum));
}

struct Iv {
  int64_t s, e;
};

// Turns `v` into its union: sorted, disjoint intervals, in place (no second list).
void merge(std::vector<Iv>& v) {
  // The union does not depend on the order of equal starts.  Ops mostly come in start order
  // (one stream, or streams that do not overlap): then there is nothing to sort.
  const auto by_start = [](const Iv& a, const Iv& b) { return a.s < b.s; };
  if (!std::is_sorted(v.begin(), v.end(), by_start)) std::sort(v.begin(), v.end(), by_start);
  size_t kept = 0;
  for (const Iv& x : v) {
    if (kept > 0 && x.s <= v[kept - 1].e) {
      v[kept - 1].e = std::max(v[kept - 1].e, x.e);
    } else {
      v[kept++] = x;
    }
  }
  v.resize(kept);
}

int64_t length(const std::vector<Iv>& v) {
  int64_t t = 0;
  for (const Iv& x : v) t += x.e - x.s;
  return t;
}

// |a ∩ b| for two merged (sorted, disjoint) lists.
int64_t intersection(const std::vector<Iv>& a, const std::vector<Iv>& b) {
  int64_t t = 0;
  size_t i = 0, j = 0;
  while (i < a.size() && j < b.size()) {
    int64_t s = std::max(a[i].s, b[j].s), e = std::min(a[i].e, b[j].e);
    if (e > s) t += e - s;
    if (a[i].e < b[j].e)
      ++i;
    else
      ++j;
  }
  return t;
}

// HTA's rounding of its percentages and ratios: pandas' round(2), i.e. numpy's -- scale by 100,
// round half to even (rint), scale back.  std::round (half away from zero) gave 0.13 where HTA
// gives 0.12 for a ratio of 1/8 (hta_differential.py).
double round2_as_numpy(double x) {
  return std::nearbyint(x * 100.0) / 100.0;
}

// HTA's ratio v / total as pandas divides (float64), for any non-zero total: the gaps of a
// stream whose ops overlap can sum to a negative total, and HTA divides by it all the same
// (host_wait -4 of a total -4 is a ratio of 1).  A zero total is NaN or +-inf there, which JSON
// cannot hold: 0 here.
double ratio_as_hta(int64_t v, int64_t total) {
  return total != 0 ? static_cast<double>(v) / static_cast<double>(total) : 0.0;
}

}  // namespace

bool hta_is_communication(std::string_view n) {
  // (^nccl.*)|(^hip)|(^hccl)|(.*ncclKernel.*)
  return starts_with(n, "nccl") || starts_with(n, "hip") || starts_with(n, "hccl") ||
         contains(n, "ncclKernel");
}

bool hta_is_computation(std::string_view n) {
  if (hta_is_communication(n)) return false;
  // Not computation: (^nccl)|(.*Memcpy)|(.*Memset)|(.*dma)|(^.*Sync)|(^Stream Wait Event)|
  // (cuda.*LaunchKernel)|(^runFunction)|(^hip)
  if (contains(n, "Memcpy") || contains(n, "Memset") || contains(n, "dma") || contains(n, "Sync") ||
      starts_with(n, "Stream Wait Event") || starts_with(n, "runFunction")) {
    return false;
  }
  size_t cuda = n.find("cuda");
  if (cuda != std::string_view::npos && n.find("LaunchKernel", cuda + 4) != std::string_view::npos)
    return false;
  return true;
}

TraceTotals::TraceTotals(const NameTable& names, HtaTotalsOptions opts)
    : names_(names), opts_(opts) {}

uint8_t TraceTotals::name_class(NameId name) {
  if (name >= class_cache_.size()) class_cache_.resize(name + 1u, -1);
  int8_t& cls = class_cache_[name];
  if (cls < 0) {
    std::string_view n = names_.text(name);
    cls = static_cast<int8_t>((hta_is_communication(n) ? 1 : 0) | (hta_is_computation(n) ? 2 : 0));
  }
  return static_cast<uint8_t>(cls);
}

void TraceTotals::on_gpu_op(const GpuOp& op) {
  uint8_t c = name_class(op.name);
  // Sources without Kineto's names (recordings) still know kinds and collectives.
  if (op.is_communication()) c = 1;
  if (op.kind != GpuOpKind::kKernel) c = static_cast<uint8_t>(c & ~2u);
  ops_.push_back(Op{op.start, op.end, op.correlation_id, op.stream, op.device, c});
}

void TraceTotals::on_cuda_sync(const GpuOp& row) {
  // HTA classes every row by its name ("Stream Sync", "Stream Wait Event": OTHER).
  const uint8_t c = static_cast<uint8_t>(name_class(row.name) | 4u);
  ops_.push_back(Op{row.start, row.end, row.correlation_id, row.stream, row.device, c});
}

void TraceTotals::on_gpu_step_annotation(TimeNs start) {
  if (gpu_steps_ == 0 || start > last_gpu_step_start_) last_gpu_step_start_ = start;
  ++gpu_steps_;
}

void TraceTotals::attach(KinetoImportOptions* opts) {
  opts->on_cuda_sync = [this](const GpuOp& row) { on_cuda_sync(row); };
  opts->on_gpu_step_annotation = [this](TimeNs start) { on_gpu_step_annotation(start); };
}

void TraceTotals::on_api_call(const HostApiCall& call) {
  if (call.correlation_id != 0) calls_.push_back(Call{call.correlation_id, call.start});
}

void TraceTotals::on_range(const HostRange& range) {
  if (range.kind != RangeKind::kStep) return;
  if (steps_ == 0) first_step_name_ = range.name;
  if (range.name != first_step_name_) two_step_names_ = true;
  if (steps_ == 0 || range.start > last_step_start_) last_step_start_ = range.start;
  ++steps_;
}

namespace {

// An op HTA keeps (after the last-step filter), in µs as HTA rounds.
struct KeptOp {
  Iv iv;
  int64_t launch_us;  // INT64_MIN if unknown
  uint32_t stream;
  uint16_t device;
  uint8_t cls;
};

std::vector<HtaStreamIdle> idle_by_stream(const std::vector<KeptOp>& kept,
                                          int64_t consecutive_kernel_delay_us) {
  // Idle breakdown per stream, GPU ops only (no cuda_sync row), in start order (stable: file
  // order breaks ties; HTA's sort is not stable, so tied starts are the one case that can
  // differ).
  std::map<std::pair<uint16_t, uint32_t>, std::vector<const KeptOp*>> by_stream;
  for (const KeptOp& k : kept) {
    if (!(k.cls & 4)) by_stream[{k.device, k.stream}].push_back(&k);
  }
  std::vector<HtaStreamIdle> out;
  for (auto& [key, list] : by_stream) {
    std::stable_sort(list.begin(), list.end(),
                     [](const KeptOp* a, const KeptOp* b) { return a->iv.s < b->iv.s; });
    HtaStreamIdle s;
    s.device = key.first;
    s.stream = key.second;
    for (size_t i = 1; i < list.size(); ++i) {
      // The previous op's end, not the latest end so far: an op overlapping the one before it
      // has a negative gap, which HTA adds to kernel_wait (its launch call started before the
      // previous op ended) like any short gap.
      const int64_t prev_end = list[i - 1]->iv.e;
      const int64_t gap = list[i]->iv.s - prev_end;
      if (list[i]->launch_us != std::numeric_limits<int64_t>::min() &&
          list[i]->launch_us > prev_end) {
        s.host_wait_us += gap;
      } else if (gap < consecutive_kernel_delay_us) {
        s.kernel_wait_us += gap;
      } else {
        s.other_us += gap;
      }
    }
    out.push_back(s);
  }
  return out;
}

// The unions of HTA's temporal breakdown and comm/compute overlap over the kept ops.  Their
// lists are freed on return, before the idle breakdown.
void add_union_totals(const std::vector<KeptOp>& kept, HtaTotals* t) {
  std::vector<Iv> all, comp, comm;
  all.reserve(kept.size());
  comp.reserve(kept.size());  // most ops are computation
  for (const KeptOp& k : kept) {
    all.push_back(k.iv);
    if (k.cls & 1) comm.push_back(k.iv);
    if (k.cls & 2) comp.push_back(k.iv);
  }
  merge(all);
  merge(comp);
  merge(comm);
  t->kernel_time_us = all.back().e - all.front().s;
  t->idle_us = t->kernel_time_us - length(all);
  t->compute_us = length(comp);
  t->non_compute_us = t->kernel_time_us - t->compute_us - t->idle_us;
  t->comm_us = length(comm);
  t->comm_overlap_us = intersection(comm, comp);
  // HTA: 100 * (overlap / comm), in that order, as its round(2) sees it.
  t->comm_comp_overlap_pct = 100.0 * ratio_as_hta(t->comm_overlap_us, t->comm_us);
}

}  // namespace

HtaTotals TraceTotals::compute() const {
  HtaTotals t;
  t.gpu_ops = static_cast<int64_t>(ops_.size());
  for (const Op& op : ops_) t.cuda_sync_rows += (op.cls & 4) ? 1 : 0;
  t.profiler_steps = steps_;

  t.gpu_step_annotations = gpu_steps_;
  // HTA drops the last step when its symbol table holds >= 2 names containing "ProfilerStep"
  // (Trace._filter_irrelevant_gpu_kernels): names, not events -- one name written twice (two
  // threads, or a cpu_op and a user_annotation) is one step, and nothing is dropped.  The
  // GPU-side copies carry the CPU-side names.
  const bool filter = !opts_.include_last_profiler_step && two_step_names_;
  t.last_step_dropped = filter;
  // HTA: the latest ProfilerStep of its CPU rows, the GPU-side annotations included.
  const TimeNs last_start =
      gpu_steps_ > 0 ? std::max(last_step_start_, last_gpu_step_start_) : last_step_start_;
  const int64_t last_step_us = ceil_us(last_start);

  // The scratch is freed as soon as it is done with (the launch table once the kept ops are
  // chosen, the unions' lists before the idle breakdown): this runs beside the accountant's
  // end, at the peak of a large trace's memory.
  std::vector<KeptOp> kept;
  {
    // Correlation -> launch call start (µs, rounded up like every HTA start; the earliest call
    // when several share an id: rounding up keeps the order, so the earliest call's start is
    // rounded).  A flat map of the ops' ids, filled by one pass over the calls: one lookup per
    // op (sorting the launches and searching them was a tenth of `gpuacct analyze` on a large
    // trace).
    constexpr TimeNs kNoCall = std::numeric_limits<TimeNs>::max();
    FlatMap64<TimeNs> launch;
    for (const Op& op : ops_) {
      if (op.correlation != 0) launch[op.correlation] = kNoCall;
    }
    for (const Call& call : calls_) {
      if (TimeNs* start = launch.find(call.correlation)) *start = std::min(*start, call.start);
    }
    auto launch_of = [&](uint64_t corr, int64_t* ts_us) {
      const TimeNs* start = launch.find(corr);
      if (start == nullptr || *start == kNoCall) return false;
      *ts_us = ceil_us(*start);
      return true;
    };

    kept.reserve(ops_.size());
    for (const Op& op : ops_) {
      int64_t lts = std::numeric_limits<int64_t>::min();
      const bool has_launch = op.correlation != 0 && launch_of(op.correlation, &lts);
      Iv iv{ceil_us(op.start), floor_end_us(op.start, op.end)};
      if (filter) {
        // A row with a correlation id is one of HTA's GPU rows: kept when its launching call
        // is; one without is one of its CPU rows: kept when it starts before the last step.
        const bool in_traced_steps =
            op.correlation != 0 ? has_launch && lts < last_step_us : iv.s < last_step_us;
        if (!in_traced_steps) continue;
      }
      // A sub-µs op can end before it starts after rounding (ts 100.5, dur 0.4: [101, 100]);
      // HTA keeps that negative length in its unions and gaps, and so do we.
      kept.push_back(KeptOp{iv, has_launch ? lts : std::numeric_limits<int64_t>::min(), op.stream,
                            op.device, op.cls});
    }
  }  // the launch table
  t.gpu_ops_kept = static_cast<int64_t>(kept.size());
  if (kept.empty()) return t;

  add_union_totals(kept, &t);

  t.idle_by_stream = idle_by_stream(kept, opts_.consecutive_kernel_delay_us);
  return t;
}

nlohmann::json TraceTotals::to_json() const {
  const HtaTotals t = compute();
  // HTA: round(100 * (v / kernel_time), 2).
  auto pct = [&](int64_t v) { return round2_as_numpy(100.0 * ratio_as_hta(v, t.kernel_time_us)); };
  nlohmann::json streams = nlohmann::json::array();
  for (const auto& s : t.idle_by_stream) {
    const int64_t sum = s.host_wait_us + s.kernel_wait_us + s.other_us;
    auto ratio = [&](int64_t v) { return round2_as_numpy(ratio_as_hta(v, sum)); };
    streams.push_back({{"device", s.device},
                       {"stream", s.stream},
                       {"host_wait_us", s.host_wait_us},
                       {"kernel_wait_us", s.kernel_wait_us},
                       {"other_us", s.other_us},
                       {"host_wait_ratio", ratio(s.host_wait_us)},
                       {"kernel_wait_ratio", ratio(s.kernel_wait_us)},
                       {"other_ratio", ratio(s.other_us)}});
  }
  nlohmann::json out{
      {"definition",
       "HTA 0.6.1 temporal breakdown (GPU ops and cuda_sync rows with a stream), comm/compute "
       "overlap and idle-time breakdown (GPU ops) over the whole trace; whole microseconds, "
       "rounded from float64 as pandas does"},
      {"rank", rank_},
      {"last_profiler_step_dropped", t.last_step_dropped},
      {"profiler_steps", t.profiler_steps},
      {"gpu_step_annotations", t.gpu_step_annotations},
      {"gpu_ops", t.gpu_ops},
      {"gpu_ops_kept", t.gpu_ops_kept},
      {"cuda_sync_rows", t.cuda_sync_rows},
      {"kernel_time_us", t.kernel_time_us},
      {"idle_us", t.idle_us},
      {"compute_us", t.compute_us},
      {"non_compute_us", t.non_compute_us},
      {"idle_pct", pct(t.idle_us)},
      {"compute_pct", pct(t.compute_us)},
      {"non_compute_pct", pct(t.non_compute_us)},
      {"comm_us", t.comm_us},
      {"comm_compute_overlap_us", t.comm_overlap_us},
      {"comm_compute_overlap_pct", round2_as_numpy(t.comm_comp_overlap_pct)},
      {"consecutive_kernel_delay_us", opts_.consecutive_kernel_delay_us},
      {"idle_by_stream", streams},
  };
  // All zeros would read as a result: say there was nothing to compare.
  if (t.gpu_ops == 0) out["note"] = "no CUDA GPU operation in the input: nothing to compute";
  return out;
}

}  // namespace gpuacct
