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

// Sequential correlation ids, most settled (erased) soon after they come, every 16th kept long
// (a launch whose records were dropped): the live ids span several capacities.  With slots
// from the id's low bits alone each new id landed in the run of live ids one capacity below
// it (runs of thousands of slots: e2e_pool_cap's worker stalled > 10 s at exit).  The map
// switches to mixed slots and runs stay short; its contents stay right.
TEST(FlatMap64, SequentialIdsWithLongLivedOnesKeepShortRuns) {
  FlatMap64<uint64_t> m;
  const uint64_t n = 300'000, window = 2'000;
  size_t worst = 0;
  for (uint64_t k = 1; k <= n; ++k) {
    m[k] = k;
    if (k % 8192 == 0) {
      m.erase_if([&](uint64_t key, uint64_t) { return key + window < k && key % 16 != 0; });
      worst = std::max(worst, m.longest_probe());
    }
  }
  EXPECT_TRUE(m.mixed());
  EXPECT_LT(worst, 200u);
  const uint64_t last_sweep = n - n % 8192;
  for (uint64_t k = 1; k <= n; ++k) {
    const bool kept = k % 16 == 0 || k + window >= last_sweep;
    const uint64_t* v = m.find(k);
    if (kept) {
      ASSERT_NE(v, nullptr) << k;
      EXPECT_EQ(*v, k);
    } else {
      ASSERT_EQ(v, nullptr) << k;
    }
  }
  EXPECT_EQ(m.find(n + 1), nullptr);
  m.clear();
  EXPECT_FALSE(m.mixed());
}

// erase_if in place, on maps whose probe runs are long and wrap around the table's end (keys
// from a narrow range, some near the top of the table): the kept entries are exactly the
// reference's, pred runs once per entry, no kept entry probes further than it did before, and
// the table keeps its size unless it ends up sparse.
TEST(FlatMap64, EraseIfInPlaceKeepsEntriesFindableAndRunsNoLonger) {
  std::mt19937_64 rng(11);
  for (int round = 0; round < 300; ++round) {
    FlatMap64<uint64_t> m;
    std::unordered_map<uint64_t, uint64_t> ref;
    const size_t n = 1 + rng() % 3000;
    const uint64_t span = 1 + rng() % (2 * n);
    const uint64_t base = rng() % 2 ? 1 : (uint64_t{1} << 40) - span / 2;  // runs may wrap
    for (size_t i = 0; i < n; ++i) {
      const uint64_t key = base + rng() % span;
      m[key] = i;
      ref[key] = i;
    }
    std::unordered_map<uint64_t, size_t> probe_before;
    for (const auto& [k, v] : ref) probe_before[k] = m.probe_length(k);
    const size_t capacity_before = m.capacity();
    const uint64_t modulus = 1 + rng() % 5;
    size_t calls = 0;
    m.erase_if([&](uint64_t k, uint64_t v) {
      ++calls;
      EXPECT_EQ(ref.at(k), v);
      return k % modulus == 0;
    });
    EXPECT_EQ(calls, probe_before.size());
    for (auto it = ref.begin(); it != ref.end();) it = it->first % modulus == 0 ? ref.erase(it) : ++it;
    ASSERT_EQ(m.size(), ref.size());
    for (const auto& [k, v] : probe_before) {
      const uint64_t* got = m.find(k);
      ASSERT_EQ(got != nullptr, ref.count(k) == 1) << k;
      if (got == nullptr) continue;
      EXPECT_EQ(*got, ref.at(k));
      if (m.capacity() == capacity_before) {
        EXPECT_LE(m.probe_length(k), v) << k;
      }
    }
    if (m.size() * 8 > capacity_before) {
      EXPECT_EQ(m.capacity(), capacity_before);
    }
    if (m.capacity() != capacity_before) {
      EXPECT_LE(m.size() * 2, m.capacity());  // shrunk: at most half full
    }
  }
}

// A map emptied by erase_if shrinks, and a second shrink reuses the first table's memory.
TEST(FlatMap64, EraseIfShrinksASparseMap) {
  FlatMap64<uint64_t> m;
  for (uint64_t k = 1; k <= 100'000; ++k) m[k] = k;
  const size_t big = m.capacity();
  m.erase_if([](uint64_t k, uint64_t) { return k > 10; });
  EXPECT_EQ(m.size(), 10u);
  EXPECT_LT(m.capacity(), big / 4);
  for (uint64_t k = 1; k <= 10; ++k) ASSERT_NE(m.find(k), nullptr);
  EXPECT_EQ(m.find(11), nullptr);
}

// The common case keeps the cache-friendly slots: sequential ids settled in order.
TEST(FlatMap64, SequentialIdsSettledInOrderStayUnmixed) {
  FlatMap64<uint64_t> m;
  for (uint64_t k = 1; k <= 200'000; ++k) {
    m[k] = k;
    if (k > 1'000) {
      ASSERT_TRUE(m.erase(k - 1'000));
    }
  }
  EXPECT_FALSE(m.mixed());
  EXPECT_EQ(m.size(), 1'000u);
  EXPECT_EQ(m.longest_probe(), 1u);
}

}  // namespace
}  // namespace gpuacct
