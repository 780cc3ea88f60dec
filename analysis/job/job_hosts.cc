#include "analysis/job/job_hosts.h"

#include <algorithm>
#include <map>
#include <numeric>
#include <utility>

namespace gpuacct {
namespace {

// Clock groups: ranks by offset, a new group where the gap to the previous exceeds the
// tolerance.  Empty when some rank was not aligned (its clock says nothing).
std::vector<int> clock_groups(const std::vector<std::optional<int64_t>>& offsets, int64_t tolerance,
                              int* count) {
  *count = 0;
  const size_t n = offsets.size();
  std::vector<size_t> order(n);
  std::iota(order.begin(), order.end(), size_t{0});
  for (const auto& o : offsets) {
    if (!o) return {};
  }
  std::sort(order.begin(), order.end(),
            [&](size_t a, size_t b) { return *offsets[a] < *offsets[b]; });
  std::vector<int> group(n, 0);
  for (size_t i = 0; i < n; ++i) {
    if (i > 0 && *offsets[order[i]] - *offsets[order[i - 1]] > tolerance) ++*count;
    group[order[i]] = *count;
  }
  ++*count;
  return group;
}

// Layout blocks in rank order: a device that does not grow starts a block.  Empty when a device
// is unknown or no block holds two ranks.
std::vector<int> layout_blocks(const std::vector<int>& ranks, const std::vector<int>& devices) {
  const size_t n = ranks.size();
  std::vector<size_t> order(n);
  std::iota(order.begin(), order.end(), size_t{0});
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) { return ranks[a] < ranks[b]; });
  std::vector<int> block(n, 0);
  int current = -1;
  bool some_pair = false;
  for (size_t i = 0; i < n; ++i) {
    const size_t s = order[i];
    if (devices[s] < 0) return {};
    const bool grows =
        i > 0 && devices[s] > devices[order[i - 1]] && ranks[s] == ranks[order[i - 1]] + 1;
    if (!grows) {
      ++current;
    } else {
      some_pair = true;
    }
    block[s] = current;
  }
  return some_pair ? block : std::vector<int>();
}

}  // namespace

HostInference infer_hosts(const std::vector<int>& ranks,
                          const std::vector<std::optional<int64_t>>& offsets_ns,
                          const std::vector<int>& devices, int64_t tolerance_ns) {
  HostInference out;
  int clocks = 0;
  const std::vector<int> by_clock = clock_groups(offsets_ns, tolerance_ns, &clocks);
  const std::vector<int> by_layout = layout_blocks(ranks, devices);
  const bool clock_says = !by_clock.empty() && clocks > 1;
  if (!clock_says && by_layout.empty()) return out;  // unknown
  out.basis = clock_says && !by_layout.empty() ? "clock offsets and the device layout"
              : clock_says                     ? "clock offsets"
                                               : "the device layout";
  // A host: the same clock group (when the clocks tell) and the same block (when the layout
  // does); numbered in the order of their lowest rank.
  std::vector<size_t> order(ranks.size());
  std::iota(order.begin(), order.end(), size_t{0});
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) { return ranks[a] < ranks[b]; });
  std::map<std::pair<int, int>, int> index;
  out.host_of.assign(ranks.size(), 0);
  for (const size_t s : order) {
    const std::pair<int, int> key{clock_says ? by_clock[s] : 0,
                                  by_layout.empty() ? 0 : by_layout[s]};
    const auto [it, fresh] = index.emplace(key, static_cast<int>(index.size()));
    out.host_of[s] = it->second;
  }
  out.count = static_cast<int>(index.size());
  return out;
}

}  // namespace gpuacct
