#include "analysis/report/cross_rank.h"

#include <algorithm>
#include <cstdio>
#include <limits>
#include <map>
#include <sstream>

namespace gpuacct {

RankComparison compare_ranks(const std::vector<RankRows>& inputs) {
  RankComparison out;
  const size_t n = inputs.size();
  // step index -> row, per rank (first device of the rank only: one row per step).
  std::vector<std::map<int64_t, const StepRow*>> by_step(n);
  for (size_t r = 0; r < n; ++r) {
    uint16_t first_device = std::numeric_limits<uint16_t>::max();
    for (const StepRow& row : inputs[r].rows) first_device = std::min(first_device, row.device);
    for (const StepRow& row : inputs[r].rows) {
      if (!row.warmup && row.device == first_device) by_step[r][row.step_index] = &row;
    }
  }
  std::vector<int64_t> common;
  if (n > 0) {
    for (const auto& [idx, row] : by_step[0]) {
      bool everywhere = true;
      for (size_t r = 1; r < n && everywhere; ++r) everywhere = by_step[r].count(idx) > 0;
      if (everywhere) common.push_back(idx);
    }
  }
  out.common_steps = static_cast<int64_t>(common.size());
  out.ranks.resize(n);
  for (size_t r = 0; r < n; ++r) {
    out.ranks[r].rank = inputs[r].rank >= 0 ? inputs[r].rank : static_cast<int>(r);
    out.ranks[r].label = inputs[r].label;
    out.ranks[r].steps = out.common_steps;
  }
  if (common.empty() || n < 2) {
    out.headline = n < 2 ? "one rank: nothing to compare"
                         : "the ranks share no step index: nothing to compare";
    return out;
  }
  for (int64_t idx : common) {
    int64_t floor = std::numeric_limits<int64_t>::max();
    int64_t most_work = -1;
    size_t most_work_rank = 0;
    for (size_t r = 0; r < n; ++r) {
      const StepRow& row = *by_step[r][idx];
      floor = std::min(floor, row.cat.comm_exposed);
      const int64_t work = row.duration() - row.cat.comm_exposed;
      if (work > most_work) {
        most_work = work;
        most_work_rank = r;
      }
    }
    for (size_t r = 0; r < n; ++r) {
      const StepRow& row = *by_step[r][idx];
      auto& p = out.ranks[r];
      p.step_ms_mean += static_cast<double>(row.duration()) / 1e6;
      p.comm_exposed_ms += static_cast<double>(row.cat.comm_exposed) / 1e6;
      p.transfer_ms += static_cast<double>(floor) / 1e6;
      p.skew_ms += static_cast<double>(row.cat.comm_exposed - floor) / 1e6;
      p.work_ms += static_cast<double>(row.duration() - row.cat.comm_exposed) / 1e6;
    }
    ++out.ranks[most_work_rank].slowest_work_steps;
  }
  const double steps = static_cast<double>(common.size());
  for (auto& p : out.ranks) {
    p.step_ms_mean /= steps;
    p.comm_exposed_ms /= steps;
    p.transfer_ms /= steps;
    p.skew_ms /= steps;
    p.work_ms /= steps;
  }
  // A straggler: the rank with the most work in more than half the steps, while the others
  // wait for it in collectives (their mean skew is a noticeable share of their step).
  size_t top = 0;
  for (size_t r = 1; r < n; ++r) {
    if (out.ranks[r].slowest_work_steps > out.ranks[top].slowest_work_steps) top = r;
  }
  double others_skew = 0, others_step = 0;
  for (size_t r = 0; r < n; ++r) {
    if (r == top) continue;
    others_skew += out.ranks[r].skew_ms;
    others_step += out.ranks[r].step_ms_mean;
  }
  others_skew /= static_cast<double>(n - 1);
  others_step /= static_cast<double>(n - 1);
  char buf[256];
  if (out.ranks[top].slowest_work_steps * 2 > out.common_steps && others_step > 0 &&
      others_skew / others_step >= 0.03) {
    out.straggler = static_cast<int>(top);
    std::snprintf(buf, sizeof buf,
                  "rank %d is the straggler: it has the most work in %lld of %lld steps, and the "
                  "other ranks wait %.2f ms/step (%.1f%%) for it inside collectives",
                  out.ranks[top].rank, static_cast<long long>(out.ranks[top].slowest_work_steps),
                  static_cast<long long>(out.common_steps), others_skew,
                  100.0 * others_skew / others_step);
  } else {
    std::snprintf(buf, sizeof buf,
                  "no straggler stands out: waiting for other ranks averages %.2f ms/step",
                  others_skew);
  }
  out.headline = buf;
  return out;
}

nlohmann::json rank_comparison_to_json(const RankComparison& c) {
  nlohmann::json ranks = nlohmann::json::array();
  for (const auto& p : c.ranks) {
    ranks.push_back({{"rank", p.rank},
                     {"label", p.label},
                     {"step_ms_mean", p.step_ms_mean},
                     {"comm_exposed_ms", p.comm_exposed_ms},
                     {"transfer_ms", p.transfer_ms},
                     {"skew_ms", p.skew_ms},
                     {"work_ms", p.work_ms},
                     {"slowest_work_steps", p.slowest_work_steps}});
  }
  return {
      {"schema", "gpuacct.ranks/1"},
      {"common_steps", c.common_steps},
      {"straggler_rank", c.straggler >= 0 ? c.ranks[static_cast<size_t>(c.straggler)].rank : -1},
      {"headline", c.headline},
      {"ranks", ranks}};
}

std::string render_rank_comparison(const RankComparison& c) {
  std::ostringstream o;
  o << "across " << c.ranks.size() << " ranks, " << c.common_steps << " common steps (ms/step):\n";
  o << "  rank   step    work   comm exposed = transfer + waiting   most work in\n";
  for (const auto& p : c.ranks) {
    char line[160];
    std::snprintf(line, sizeof line, "  %4d %7.2f %7.2f %9.2f      %8.2f   %8.2f   %lld steps\n",
                  p.rank, p.step_ms_mean, p.work_ms, p.comm_exposed_ms, p.transfer_ms, p.skew_ms,
                  static_cast<long long>(p.slowest_work_steps));
    o << line;
  }
  o << c.headline << "\n";
  return o.str();
}

}  // namespace gpuacct
