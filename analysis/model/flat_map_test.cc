#include "analysis/model/flat_map.h"

#include <gtest/gtest.h>

#include <random>
#include <unordered_map>

namespace gpuacct {
namespace {

// Random inserts, overwrites, erases and lookups against std::unordered_map, with keys drawn
// from a small range so probe runs are long and wrap around the table's end.
TEST(FlatMap64, MatchesUnorderedMapUnderInsertEraseAndEraseIf) {
  std::mt19937_64 rng(7);
  FlatMap64<int64_t> flat;
  std::unordered_map<uint64_t, int64_t> ref;
  for (int i = 0; i < 200000; ++i) {
    // Keys with a shared high half and close low bits collide in the low bits after folding.
    const uint64_t key = 1 + (rng() % 3000) + ((rng() % 2) << 32);
    switch (rng() % 4) {
      case 0:
      case 1:
        flat[key] = i;
        ref[key] = i;
        break;
      case 2:
        EXPECT_EQ(flat.erase(key), ref.erase(key) == 1);
        break;
      default: {
        const int64_t* got = flat.find(key);
        const auto it = ref.find(key);
        ASSERT_EQ(got != nullptr, it != ref.end()) << key;
        if (got != nullptr) {
          EXPECT_EQ(*got, it->second);
        }
      }
    }
    ASSERT_EQ(flat.size(), ref.size());
    if (i % 50000 == 49999) {
      flat.erase_if([](uint64_t k, int64_t) { return k % 3 == 0; });
      for (auto it = ref.begin(); it != ref.end();) it = it->first % 3 == 0 ? ref.erase(it) : ++it;
    }
  }
  size_t seen = 0;
  flat.for_each([&](uint64_t k, int64_t v) {
    ++seen;
    ASSERT_EQ(ref.count(k), 1u);
    EXPECT_EQ(ref.at(k), v);
  });
  EXPECT_EQ(seen, ref.size());
  EXPECT_EQ(flat.find(0), nullptr);  // the empty-slot marker is never a key
  EXPECT_FALSE(flat.erase(0));
  flat.clear();
  EXPECT_EQ(flat.size(), 0u);
  EXPECT_EQ(flat.find(ref.empty() ? 1 : ref.begin()->first), nullptr);
  EXPECT_FALSE(flat.erase(1));
}

}  // namespace
}  // namespace gpuacct
