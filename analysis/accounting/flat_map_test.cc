#include "analysis/accounting/flat_map.h"

#include <gtest/gtest.h>

namespace gpuacct {
namespace {

// Sequential correlation ids, most settled (erased) soon after they come, every 16th kept long
// (a launch whose op never came): the live ids span several capacities.  Before the ids were
// mixed, an id landed in the run of live ids one capacity below it and every lookup probed to
// that run's end (runs of tens of thousands of slots; a worker stalled > 10 s).  Mixed, runs stay
// short.  Also checks the map against the ids it should hold.
TEST(FlatMap64, SequentialIdsWithLongLivedOnesKeepShortRuns) {
  FlatMap64<uint64_t> m;
  const uint64_t n = 300'000, window = 2'000;
  size_t worst = 0;
  for (uint64_t k = 1; k <= n; ++k) {
    m[k] = k;
    if (k % 8192 == 0) {
      m.erase_if([&](uint64_t key, uint64_t) { return key + window < k && key % 16 != 0; });
      worst = std::max(worst, m.longest_run());
    }
  }
  EXPECT_LT(worst, 200u);
  // What is left: the last 2,000 ids and up to then every 16th.
  for (uint64_t k : {uint64_t{16}, uint64_t{160'000}, n - 10, n}) {
    const uint64_t* v = m.find(k);
    ASSERT_NE(v, nullptr) << k;
    EXPECT_EQ(*v, k);
  }
  EXPECT_EQ(m.find(17), nullptr);
  EXPECT_EQ(m.find(n + 1), nullptr);
}

}  // namespace
}  // namespace gpuacct
