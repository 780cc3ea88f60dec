// The hot path (Tracy-style): every C API call, NVTX call and CUPTI API callback writes one
// fixed-size HostRecord into a per-thread single-producer / single-consumer ring.  The producer
// (the calling thread) never locks, never allocates after its first call, never logs: O(1).
// The consumer is the library's worker thread.  A full ring drops the record and counts it
// (Stat::host_records_dropped).
#pragma once

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <type_traits>

namespace gpuacct::inject {

enum class HostRecType : uint8_t {
  kStepBegin = 1,  // value = step number (-1 = auto)
  kStepEnd = 2,
  kStepMark = 3,   // value = step number (-1 = auto)
  kStepFlops = 4,  // value = bit pattern of a double
  kDataPush = 5,   // C API data range; name
  kDataPop = 6,
  kUserPush = 7,  // C API user range; name
  kUserPop = 8,
  kNvtxPush = 9,  // nvtxRangePush*, name (classified by the worker)
  kNvtxPop = 10,
  kNvtxStart = 11,    // nvtxRangeStart*, value = range id, name
  kNvtxEnd = 12,      // value = range id
  kNvtxMark = 13,     // nvtxMark*, name
  kStack = 14,        // native call site: value = duration (sync) or pause (launch) in ns;
                      // aux = frame count; `kind` = StackKind; frames follow in the next slots
  kStackFrames = 15,  // continuation slot of kStack: up to kFramesPerSlot frames
  kStepWork = 16,     // value = bit pattern of a double; `kind` = WorkUnit
  kApiCall = 17,      // a traced CUDA call timed by its callbacks (ApiSource::kCallbacks):
                      // ts = enter, value = exit, aux = correlation id (0: the call failed),
                      // kind = HostApiKind; in the name bytes: the traced-api index, and
                      // the nested driver call's (kApiCall*At), flag kApiCallNested
};
// Byte offsets in a kApiCall record's name: uint16 traced-api index; with kApiCallNested in
// flags, the driver call nested in it: uint16 index, uint32 correlation id, int64 start, end.
inline constexpr size_t kApiCallIndexAt = 0;
inline constexpr size_t kApiCallNestedIndexAt = 2;
inline constexpr size_t kApiCallNestedIdAt = 4;
inline constexpr size_t kApiCallNestedStartAt = 8;
inline constexpr size_t kApiCallNestedEndAt = 16;
inline constexpr uint8_t kApiCallNested = 2;  // HostRecord::flags (beside kNameTruncated)

// The unit of a kStepWork record (gpuacct_set_step_work: one record per unit declared).
enum class WorkUnit : uint8_t { kTokens = 0, kSamples = 1 };

enum class StackKind : uint8_t { kSync = 0, kLaunchAfterPause = 1 };

inline constexpr size_t kHostNameBytes = 40;
inline constexpr int kFramesPerSlot = static_cast<int>(kHostNameBytes / 8);  // 5
inline constexpr int kStackSlots = 3;  // continuation slots per stack record: 15 frames
inline constexpr int kMaxFrames = kStackSlots * kFramesPerSlot;

struct HostRecord {
  int64_t ts = 0;  // clock of the event model (CUPTI's timestamp clock)
  int64_t value = 0;
  HostRecType type = HostRecType::kStepBegin;
  uint8_t kind = 0;
  uint8_t len = 0;    // bytes of name used
  uint8_t flags = 0;  // kNameTruncated, kFromDomain
  uint32_t aux = 0;
  union {
    char name[kHostNameBytes];
    uint64_t frames[kHostNameBytes / 8];
  };
  HostRecord() : name{} {}
};
inline constexpr uint8_t kNameTruncated = 1;
static_assert(sizeof(HostRecord) == 64, "one cache line per record");
static_assert(std::is_trivially_copyable_v<HostRecord>);

// Bounded SPSC ring of HostRecords.  Capacity is a power of two.
class HostRing {
 public:
  explicit HostRing(size_t capacity_pow2)
      : mask_(capacity_pow2 - 1), slots_(new HostRecord[capacity_pow2]) {}

  // Producer: reserve `n` consecutive slots (they may wrap).  Returns nullptr-free index or -1.
  // Use: int64_t i = try_reserve(n); if (i < 0) drop; fill slot(i..i+n-1); publish(n).
  // `keep_free`: fail unless that many slots stay free after these (a kind of record that
  // comes in floods -- one per CUDA call -- must not take the last slots from step marks).
  int64_t try_reserve(size_t n, size_t keep_free = 0) {
    const uint64_t head = head_.load(std::memory_order_relaxed);
    const uint64_t room = mask_ + 1 - std::min<uint64_t>(keep_free, mask_ + 1);
    if (head - tail_cache_ + n > room) {
      tail_cache_ = tail_.load(std::memory_order_acquire);
      if (head - tail_cache_ + n > room) {
        dropped_.store(dropped_.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
        return -1;
      }
    }
    return static_cast<int64_t>(head);
  }
  HostRecord& slot(uint64_t index) { return slots_[index & mask_]; }
  void publish(size_t n) {
    head_.store(head_.load(std::memory_order_relaxed) + n, std::memory_order_release);
  }

  // Consumer: calls f(const HostRecord*, count_of_contiguous_records) for everything published,
  // then frees the slots.  Returns the number of records consumed.
  template <typename F>
  size_t drain(F&& f) {
    const uint64_t tail = tail_.load(std::memory_order_relaxed);
    const uint64_t head = head_.load(std::memory_order_acquire);
    for (uint64_t i = tail; i < head; ++i) f(slots_[i & mask_], i, *this);
    tail_.store(head, std::memory_order_release);
    return static_cast<size_t>(head - tail);
  }
  uint64_t dropped() const { return dropped_.load(std::memory_order_relaxed); }
  size_t capacity() const { return mask_ + 1; }

 private:
  alignas(64) std::atomic<uint64_t> head_{0};  // written by the producer
  uint64_t tail_cache_ = 0;                    // producer's view of tail
  std::atomic<uint64_t> dropped_{0};           // producer-written
  alignas(64) std::atomic<uint64_t> tail_{0};  // written by the consumer
  const uint64_t mask_;
  std::unique_ptr<HostRecord[]> slots_;
};

}  // namespace gpuacct::inject
