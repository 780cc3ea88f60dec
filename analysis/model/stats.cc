#include "analysis/model/stats.h"

#include <cstdint>

namespace gpuacct {
namespace {
constexpr StatInfo kInfos[] = {
#define GPUACCT_STAT_INFO(name, sev, origin, desc) \
  {#name, StatSeverity::sev, StatOrigin::origin, desc},
    GPUACCT_STATS_LIST(GPUACCT_STAT_INFO)
#undef GPUACCT_STAT_INFO
};
static_assert(sizeof(kInfos) / sizeof(kInfos[0]) == kStatCount);
}  // namespace

const StatInfo& stat_info(Stat s) {
  return kInfos[static_cast<size_t>(s)];
}

std::string_view to_string(StatSeverity s) {
  switch (s) {
    case StatSeverity::kInfo:
      return "info";
    case StatSeverity::kError:
      return "error";
    case StatSeverity::kDataLoss:
      return "data_loss";
  }
  return "info";
}

int64_t Stats::data_loss_total() const {
  int64_t total = 0;
  for (size_t i = 0; i < kStatCount; ++i) {
    // Saturating: a counter near INT64_MAX (a corrupt recording's) must not wrap the sum.
    if (kInfos[i].severity == StatSeverity::kDataLoss && values_[i] > 0)
      total = values_[i] > INT64_MAX - total ? INT64_MAX : total + values_[i];
  }
  return total;
}

}  // namespace gpuacct
