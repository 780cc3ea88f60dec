// Collector: when CUPTI keeps its own clock, every record it hands back is moved onto the host
// clock, whenever its buffer completed relative to the moment start() published the offset.
#include "cupti_hooks/collector.h"

#include <gtest/gtest.h>

#include "cupti_hooks/activity_parser.h"
#include "cupti_hooks/cupti_record_types.h"

namespace gpuacct::cupti {
namespace {

constexpr int64_t kOffset = 1'700'000'000'000'000'000;  // CUPTI's clock minus the host's
constexpr uint64_t kHostStart = 2'000'000'000;          // each kernel's start, host clock

// What start() does on another thread while the worker parses: runs once, from the first
// record read (the worker is then between taking the offset and taking the next buffer).
void (*g_during_parse)() = nullptr;

// One record per fake buffer, in CUPTI's iteration protocol.
CUptiResult next_record(uint8_t* buffer, size_t /*valid*/, CUpti_Activity** record) {
  if (*record != nullptr) return CUPTI_ERROR_MAX_LIMIT_REACHED;
  *record = reinterpret_cast<CUpti_Activity*>(buffer);
  if (auto f = g_during_parse) {
    g_during_parse = nullptr;
    f();
  }
  return CUPTI_SUCCESS;
}

CUptiResult no_drops(CUcontext, uint32_t, size_t* dropped) {
  *dropped = 0;
  return CUPTI_SUCCESS;
}

KernelRecord kernel_on_cupti_clock(uint32_t corr) {
  KernelRecord k{};
  k.kind = CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL;
  k.start = kHostStart + static_cast<uint64_t>(kOffset);
  k.end = k.start + 1000;
  k.correlationId = corr;
  k.name = "k";
  return k;
}

KernelRecord g_before = kernel_on_cupti_clock(1);  // completed before the clock was published
KernelRecord g_during = kernel_on_cupti_clock(2);  // completed while the worker was parsing

void complete(KernelRecord& k) {
  Collector::instance().on_buffer_completed(nullptr, 0, reinterpret_cast<uint8_t*>(&k),
                                            sizeof k, sizeof k);
}

void start_publishes_the_clock_and_a_buffer_completes() {
  Collector::instance().publish_clock_for_testing(ClockSource::kMeasuredOffset, kOffset);
  complete(g_during);
}

// Issue 14 (fuzzer seed 3504): the worker took the offset (still 0) at the top of consume(),
// then start() published it and a buffer completed, and the worker parsed that buffer with 0:
// its records kept CUPTI's clock, 56 years from the steps.  Records now wait, queued, until
// the clock is published; once it is, it never changes.
TEST(Collector, RecordsWaitForThePublishedClock) {
  Collector& c = Collector::instance();
  c.set_record_functions_for_testing(reinterpret_cast<void*>(&next_record),
                                     reinterpret_cast<void*>(&no_drops));
  complete(g_before);
  g_during_parse = &start_publishes_the_clock_and_a_buffer_completes;
  NameTable names;
  ActivityParser parser(names);
  EventBatch out;
  Stats stats;
  c.consume(parser, out, stats);
  EXPECT_TRUE(out.gpu_ops.empty()) << "a record parsed before CUPTI's clock was known";
  if (auto f = g_during_parse) {  // start() runs now if nothing was parsed
    g_during_parse = nullptr;
    f();
  }
  c.consume(parser, out, stats);
  ASSERT_EQ(out.gpu_ops.size(), 2u);
  for (const GpuOp& op : out.gpu_ops) {
    EXPECT_EQ(op.start, static_cast<TimeNs>(kHostStart)) << "correlation " << op.correlation_id;
    EXPECT_EQ(op.end, static_cast<TimeNs>(kHostStart) + 1000);
  }
}

uint64_t g_clock = 0;
uint64_t test_clock() {
  return g_clock;
}

// The buffers CUPTI holds and since when (the watermark stays before the oldest:
// inject/recording/watermark.h): a buffer counts from its request until CUPTI hands it back, filled
// or empty, in any order.
TEST(Collector, OldestLentBufferIsTheEarliestRequestNotYetHandedBack) {
  Collector& c = Collector::instance();
  c.set_host_clock_for_testing(&test_clock);
  c.set_record_functions_for_testing(reinterpret_cast<void*>(&next_record),
                                     reinterpret_cast<void*>(&no_drops));
  EXPECT_EQ(c.oldest_lent_ns(), Collector::kNoBufferLent);
  uint8_t* a = nullptr;
  uint8_t* b = nullptr;
  size_t size = 0;
  size_t max_records = 0;
  g_clock = 100;
  c.on_buffer_requested(&a, &size, &max_records);
  g_clock = 200;
  c.on_buffer_requested(&b, &size, &max_records);
  ASSERT_NE(a, nullptr);
  ASSERT_NE(b, nullptr);
  EXPECT_EQ(c.oldest_lent_ns(), 100);
  c.on_buffer_completed(nullptr, 0, b, size, 0);  // the later one first, empty
  EXPECT_EQ(c.oldest_lent_ns(), 100);
  c.on_buffer_completed(nullptr, 0, a, size, 0);
  EXPECT_EQ(c.oldest_lent_ns(), Collector::kNoBufferLent);
  g_clock = 300;
  c.on_buffer_requested(&a, &size, &max_records);
  EXPECT_EQ(c.oldest_lent_ns(), 300);
  c.on_buffer_completed(nullptr, 0, a, size, 0);
  EXPECT_EQ(c.oldest_lent_ns(), Collector::kNoBufferLent);
}

}  // namespace
}  // namespace gpuacct::cupti
