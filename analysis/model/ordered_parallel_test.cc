// ordered_parallel: results consumed in order whatever order they finish in, at most 2 x
// threads ahead, work on several threads, a failure rethrown at its item without a hang.
#include "analysis/model/ordered_parallel.h"

#include <atomic>
#include <chrono>
#include <mutex>
#include <set>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

namespace gpuacct {
namespace {

TEST(OrderedParallel, ConsumesInOrderWithinTheBound) {
  for (unsigned threads : {1u, 2u, 3u, 8u}) {
    for (size_t count : {size_t{0}, size_t{1}, size_t{2}, size_t{40}}) {
      std::atomic<size_t> started{0};
      std::atomic<size_t> consumed{0};
      std::atomic<size_t> worst_ahead{0};
      std::mutex mu;
      std::set<std::thread::id> producers;
      std::vector<size_t> order;
      ordered_parallel<std::string>(
          count, threads,
          [&](size_t i) {
            const size_t ahead = ++started - consumed.load();
            size_t seen = worst_ahead.load();
            while (ahead > seen && !worst_ahead.compare_exchange_weak(seen, ahead)) {
            }
            {
              std::lock_guard<std::mutex> lock(mu);
              producers.insert(std::this_thread::get_id());
            }
            // Later items finish first: the order must come from the caller, not the clock.
            std::this_thread::sleep_for(std::chrono::microseconds(((count - i) % 7) * 300));
            return "item " + std::to_string(i);
          },
          [&](size_t i, std::string&& r) {
            EXPECT_EQ(r, "item " + std::to_string(i));
            order.push_back(i);
            ++consumed;
          });
      ASSERT_EQ(order.size(), count) << threads << " threads";
      for (size_t i = 0; i < count; ++i) EXPECT_EQ(order[i], i);
      EXPECT_LE(worst_ahead.load(), 2 * static_cast<size_t>(std::max(threads, 1u)) + 1);
      if (threads > 1 && count >= 40) {
        EXPECT_GT(producers.size(), 1u) << "the work ran on one thread";
        EXPECT_EQ(producers.count(std::this_thread::get_id()), 0u);
      }
    }
  }
}

TEST(OrderedParallel, AFailureComesBackAtItsItem) {
  for (unsigned threads : {1u, 4u}) {
    std::vector<size_t> consumed;
    EXPECT_THROW(ordered_parallel<int>(
                     100, threads,
                     [](size_t i) -> int {
                       if (i == 17) throw std::runtime_error("item 17");
                       return static_cast<int>(i);
                     },
                     [&](size_t i, int&&) { consumed.push_back(i); }),
                 std::runtime_error);
    ASSERT_EQ(consumed.size(), 17u) << threads << " threads";  // 0..16, then the failure
    EXPECT_EQ(consumed.back(), 16u);
  }
}

}  // namespace
}  // namespace gpuacct
