#include "analysis/report/cross_rank.h"

#include <gtest/gtest.h>

namespace gpuacct {
namespace {

StepRow row(int64_t index, int64_t work_ns, int64_t comm_exposed_ns) {
  StepRow r;
  r.step_index = index;
  r.window_begin = index * 1'000'000'000;
  r.cat.compute = work_ns;
  r.cat.comm_exposed = comm_exposed_ns;
  r.window_end = r.window_begin + r.cat.sum();
  return r;
}

// Rank 1 computes 4 ms longer every step; ranks 0 and 2 wait for it in the all-reduce.
TEST(CrossRank, SplitsTransferFromWaitingAndNamesTheStraggler) {
  std::vector<RankRows> in(3);
  for (int r = 0; r < 3; ++r) {
    in[static_cast<size_t>(r)].rank = r;
    for (int i = 0; i < 10; ++i) {
      const int64_t work = r == 1 ? 14'000'000 : 10'000'000;
      const int64_t comm = r == 1 ? 2'000'000 : 6'000'000;  // 2 ms transfer + 4 ms waiting
      in[static_cast<size_t>(r)].rows.push_back(row(i, work, comm));
    }
  }
  const RankComparison c = compare_ranks(in);
  EXPECT_EQ(c.common_steps, 10);
  ASSERT_EQ(c.ranks.size(), 3u);
  EXPECT_NEAR(c.ranks[0].transfer_ms, 2.0, 1e-9);
  EXPECT_NEAR(c.ranks[0].skew_ms, 4.0, 1e-9);
  EXPECT_NEAR(c.ranks[1].skew_ms, 0.0, 1e-9);
  EXPECT_EQ(c.ranks[1].slowest_work_steps, 10);
  EXPECT_EQ(c.straggler, 1);
  EXPECT_NE(c.headline.find("rank 1 is the straggler"), std::string::npos);
  EXPECT_EQ(rank_comparison_to_json(c)["straggler_rank"], 1);
  EXPECT_NE(render_rank_comparison(c).find("waiting"), std::string::npos);
}

// Balanced ranks, warm-up rows and steps missing on one rank are left out.
TEST(CrossRank, BalancedRanksHaveNoStraggler) {
  std::vector<RankRows> in(2);
  for (int r = 0; r < 2; ++r) {
    in[static_cast<size_t>(r)].rank = r;
    StepRow w = row(0, 50'000'000, 0);
    w.warmup = true;
    in[static_cast<size_t>(r)].rows.push_back(w);
    for (int i = 1; i < 6; ++i)
      in[static_cast<size_t>(r)].rows.push_back(row(i, 10'000'000, 1'000'000));
  }
  in[1].rows.push_back(row(99, 1, 1));  // only on rank 1
  const RankComparison c = compare_ranks(in);
  EXPECT_EQ(c.common_steps, 5);
  EXPECT_EQ(c.straggler, -1);
  EXPECT_NEAR(c.ranks[0].skew_ms, 0.0, 1e-9);
  EXPECT_NE(c.headline.find("no straggler"), std::string::npos);
  EXPECT_EQ(compare_ranks({in[0]}).headline, "one rank: nothing to compare");
}

}  // namespace
}  // namespace gpuacct
