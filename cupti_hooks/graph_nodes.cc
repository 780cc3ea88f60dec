#include "cupti_hooks/graph_nodes.h"

#include <algorithm>

namespace gpuacct::cupti {
namespace {

constexpr uint64_t key_of(uint32_t graph_id) {
  return (static_cast<uint64_t>(graph_id) + 1) << 32;
}
constexpr uint64_t kKeyMask = ~uint64_t{0xffffffffu};
constexpr uint64_t kCountMask = 0xffffffffu;

size_t home_of(uint32_t graph_id) {
  return static_cast<size_t>((graph_id * 0x9E3779B1u) >> 20) % GraphNodeCounts::kSlots;
}

}  // namespace

void GraphNodeCounts::add(uint32_t graph_id, int32_t delta, Source source) {
  bool placed = true;
  if (delta < 0) {  // a node going: from whichever table counted it
    placed = add_to(tables_[kCreated], graph_id, delta);
    placed = add_to(tables_[kCloned], graph_id, delta) && placed;
  } else {
    placed = add_to(tables_[source], graph_id, delta);
  }
  if (!placed) dropped_.fetch_add(1, std::memory_order_relaxed);
}

bool GraphNodeCounts::add_to(Table& t, uint32_t graph_id, int32_t delta) {
  const uint64_t key = key_of(graph_id);
  size_t i = home_of(graph_id);
  for (size_t probe = 0; probe < kSlots; ++probe, i = (i + 1) % kSlots) {
    uint64_t cur = t[i].load(std::memory_order_acquire);
    if (cur == 0) {
      if (delta < 0) return true;  // not in the table: nothing to take a node from
      // Claim the empty slot for this graph (another thread may claim it first: look again).
      if (t[i].compare_exchange_strong(cur, key, std::memory_order_acq_rel)) {
        cur = key;
      } else if ((cur & kKeyMask) != key) {
        continue;
      }
    } else if ((cur & kKeyMask) != key) {
      continue;
    }
    // Our slot: change the count without touching the key.
    for (;;) {
      const uint64_t count = cur & kCountMask;
      uint64_t next_count = count;
      if (delta >= 0) {
        next_count = count + static_cast<uint64_t>(delta);
        if (next_count > kCountMask) next_count = kCountMask;
      } else {
        const auto down = static_cast<uint64_t>(-static_cast<int64_t>(delta));
        next_count = count > down ? count - down : 0;
      }
      if (t[i].compare_exchange_weak(cur, key | next_count, std::memory_order_acq_rel)) {
        return true;
      }
    }
  }
  return delta < 0;  // nothing to take a node from: not a loss
}

uint32_t GraphNodeCounts::nodes(uint32_t graph_id) const {
  return std::max(read(tables_[kCreated], graph_id), read(tables_[kCloned], graph_id));
}

uint32_t GraphNodeCounts::read(const Table& t, uint32_t graph_id) {
  const uint64_t key = key_of(graph_id);
  size_t i = home_of(graph_id);
  for (size_t probe = 0; probe < kSlots; ++probe, i = (i + 1) % kSlots) {
    const uint64_t cur = t[i].load(std::memory_order_acquire);
    if (cur == 0) return 0;
    if ((cur & kKeyMask) == key) return static_cast<uint32_t>(cur & kCountMask);
  }
  return 0;
}

void GraphNodeCounts::clear_for_testing() {
  for (Table& t : tables_) {
    for (auto& s : t) s.store(0, std::memory_order_relaxed);
  }
  dropped_.store(0, std::memory_order_relaxed);
}

}  // namespace gpuacct::cupti
