#include "analysis/model/segmented_vector.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

namespace gpuacct {
namespace {

struct Pair {
  int64_t a;
  uint32_t b;
};

// Against std::vector, across segment boundaries (tiny segments): the same elements in the same
// order by index and by iteration; references stay valid while it grows; clear empties it.
TEST(SegmentedVector, HoldsWhatAVectorHoldsAndNeverMovesElements) {
  SegmentedVector<Pair, 4> seg;
  std::vector<Pair> ref;
  std::vector<const Pair*> where;
  for (int64_t i = 0; i < 1000; ++i) {
    const Pair p{i * 7 - 300, static_cast<uint32_t>(i % 13)};
    seg.push_back(p);
    ref.push_back(p);
    where.push_back(&seg[static_cast<size_t>(i)]);
  }
  ASSERT_EQ(seg.size(), ref.size());
  for (size_t i = 0; i < ref.size(); ++i) {
    EXPECT_EQ(seg[i].a, ref[i].a) << i;
    EXPECT_EQ(seg[i].b, ref[i].b) << i;
    EXPECT_EQ(&seg[i], where[i]) << i;  // not moved by later growth
  }
  size_t n = 0;
  for (const Pair& p : seg) {
    ASSERT_LT(n, ref.size());
    EXPECT_EQ(p.a, ref[n].a);
    ++n;
  }
  EXPECT_EQ(n, ref.size());
  seg[5].b = 99;
  EXPECT_EQ(seg[5].b, 99u);
  seg.clear();
  EXPECT_TRUE(seg.empty());
  EXPECT_EQ(seg.begin(), seg.end());
  seg.push_back({1, 2});
  EXPECT_EQ(seg.size(), 1u);
  EXPECT_EQ(seg[0].a, 1);
}

}  // namespace
}  // namespace gpuacct
