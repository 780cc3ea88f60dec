#include "analysis/model/stats.h"

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

bool Stats::has_data_loss() const {
  for (size_t i = 0; i < kStatCount; ++i) {
    if (kInfos[i].severity == StatSeverity::kDataLoss && values_[i] > 0) return true;
  }
  return false;
}

}  // namespace gpuacct
