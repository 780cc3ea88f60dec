// Self-tests of the fake CUPTI's delivery (flushes, late records, buffer limits, the periodic
// flush, seeded order) and of its faults, misuse and finalize.
#include <cupti.h>
#include <dlfcn.h>
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <mutex>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "sim_cuda.h"
#include "sim_test_client.h"

namespace sim_test {
namespace {

// ---- delivery -----------------------------------------------------------------------------------

TEST_F(SimTest, FlushDeliversOnlyCompletedUnlessForced) {
  Attach();
  simStream_t s = simStreamCreate(0);
  ASSERT_EQ(simLaunchKernel(s, "long", 10 * 1000 * kUs), SIM_OK);  // 10 ms, host not waiting
  ASSERT_EQ(C().cuptiActivityFlushAll(0), CUPTI_SUCCESS);
  EXPECT_EQ(Records(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL).size(), 0u) << "kernel not finished yet";
  EXPECT_EQ(Records(CUPTI_ACTIVITY_KIND_RUNTIME).size(), 2u)
      << "stream-create and launch APIs are complete";
  simHostWork(20 * 1000 * kUs);  // the host moves past the kernel's end: now it is complete
  ASSERT_EQ(C().cuptiActivityFlushAll(0), CUPTI_SUCCESS);
  EXPECT_EQ(Records(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL).size(), 1u);

  ASSERT_EQ(simLaunchKernel(s, "unfinished", 10 * 1000 * kUs), SIM_OK);
  ASSERT_EQ(C().cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED), CUPTI_SUCCESS);
  auto ks = Records(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL);
  ASSERT_EQ(ks.size(), 2u);
  for (auto& r : ks) {
    const auto& k = r.as<CUpti_ActivityKernel10>();
    if (std::strcmp(k.name, "unfinished") == 0) {
      EXPECT_EQ(k.start, 0u) << "forced flush of an incomplete record: invalid (0) timestamps";
      EXPECT_EQ(k.end, 0u);
    } else {
      EXPECT_NE(k.start, 0u);
    }
  }
}

TEST_F(SimTest, LateRecordsArriveWithinTwoFlushes) {
  setenv("GPUACCT_SIM_DELAY_PCT", "100", 1);
  ResetAll();
  Attach();
  simStream_t s = simStreamCreate(0);
  for (int i = 0; i < 10; ++i) ASSERT_EQ(simLaunchKernel(s, "late", kUs), SIM_OK);
  ASSERT_EQ(simStreamSynchronize(s), SIM_OK);
  ASSERT_EQ(C().cuptiActivityFlushAll(0), CUPTI_SUCCESS);
  EXPECT_EQ(Records(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL).size(), 0u)
      << "all delayed by >= 1 flush";
  ASSERT_EQ(C().cuptiActivityFlushAll(0), CUPTI_SUCCESS);
  ASSERT_EQ(C().cuptiActivityFlushAll(0), CUPTI_SUCCESS);
  EXPECT_EQ(Records(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL).size(), 10u);
}

// GPUACCT_SIM_HOLD_BUFFERS: a buffer goes back only once every record in it is complete, so a
// kernel still queued holds back its thread's earlier records -- API records and finished
// kernels alike -- as real CUPTI's per-thread buffers do (cuptiActivityFlushAll, flag 0).
TEST_F(SimTest, HeldBuffersWaitForTheirLastRecord) {
  setenv("GPUACCT_SIM_HOLD_BUFFERS", "1000", 1);
  ResetAll();
  Attach();
  simStream_t a = simStreamCreate(0);
  simStream_t b = simStreamCreate(0);
  ASSERT_EQ(simLaunchKernel(a, "short", kUs), SIM_OK);
  ASSERT_EQ(simLaunchKernel(b, "long", 10 * 1000 * kUs), SIM_OK);
  simHostWork(100 * kUs);  // "short" is over, "long" is not
  ASSERT_EQ(C().cuptiActivityFlushAll(0), CUPTI_SUCCESS);
  EXPECT_EQ(Records().size(), 0u) << "the thread's buffer holds an unfinished kernel";
  simHostWork(20 * 1000 * kUs);
  ASSERT_EQ(C().cuptiActivityFlushAll(0), CUPTI_SUCCESS);
  EXPECT_EQ(Records(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL).size(), 2u);
  EXPECT_EQ(Records(CUPTI_ACTIVITY_KIND_RUNTIME).size(), 4u);

  // Another thread's buffer does not wait for this one's kernel.
  ASSERT_EQ(simLaunchKernel(b, "long2", 10 * 1000 * kUs), SIM_OK);
  std::thread other([&] { ASSERT_EQ(simLaunchKernel(a, "other", kUs), SIM_OK); });
  other.join();
  simHostWork(100 * kUs);
  ASSERT_EQ(C().cuptiActivityFlushAll(0), CUPTI_SUCCESS);
  auto ks = Records(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL);
  ASSERT_EQ(ks.size(), 3u);
  EXPECT_STREQ(ks.back().as<CUpti_ActivityKernel10>().name, "other");
}

// GPUACCT_SIM_FAULTS=untimed_every=K: every K-th GPU record comes complete but with 0
// timestamps ("no timing information could be collected for lack of device memory").
TEST_F(SimTest, FaultUntimedEveryZeroesGpuTimestamps) {
  setenv("GPUACCT_SIM_FAULTS", "untimed_every=3", 1);
  ResetAll();
  Attach();
  simStream_t s = simStreamCreate(0);
  for (int i = 0; i < 9; ++i) ASSERT_EQ(simLaunchKernel(s, "k", kUs), SIM_OK);
  ASSERT_EQ(simStreamSynchronize(s), SIM_OK);
  ASSERT_EQ(C().cuptiActivityFlushAll(0), CUPTI_SUCCESS);
  auto ks = Records(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL);
  ASSERT_EQ(ks.size(), 9u) << "delivered by a plain flush, not held back";
  size_t untimed = 0;
  for (auto& r : ks) {
    const auto& k = r.as<CUpti_ActivityKernel10>();
    if (k.start == 0) {
      ++untimed;
      EXPECT_EQ(k.end, 0u);
      EXPECT_EQ(k.completed, 0u);
    }
  }
  EXPECT_EQ(untimed, 3u);
  for (auto& r : Records(CUPTI_ACTIVITY_KIND_RUNTIME)) {
    EXPECT_NE(r.as<CUpti_ActivityAPI>().start, 0u) << "API records keep their times";
  }
}

TEST_F(SimTest, BuffersRespectMaxNumRecordsAndFillUp) {
  {
    std::lock_guard<std::mutex> lock(g.mu);
    g.max_records = 3;
  }
  Attach();
  simStream_t s = simStreamCreate(0);
  for (int i = 0; i < 10; ++i) ASSERT_EQ(simLaunchKernel(s, "k", kUs), SIM_OK);
  ASSERT_EQ(simStreamSynchronize(s), SIM_OK);
  ASSERT_EQ(C().cuptiActivityFlushAll(0), CUPTI_SUCCESS);
  std::map<size_t, int> per_buffer;
  for (auto& r : Records()) ++per_buffer[r.buffer_index];
  for (auto& [b, n] : per_buffer) EXPECT_LE(n, 3) << "buffer " << b;
  EXPECT_EQ(Records(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL).size(), 10u);

  // Small buffers without any flush: full buffers come back on their own (CUPTI's thread).
  ResetAll();
  {
    std::lock_guard<std::mutex> lock(g.mu);
    g.buffer_size = 4096;
  }
  Attach();
  s = simStreamCreate(0);
  for (int round = 0; round < 3; ++round) {
    for (int i = 0; i < 3000; ++i) ASSERT_EQ(simLaunchKernel(s, "k", kUs), SIM_OK);
    ASSERT_EQ(simStreamSynchronize(s), SIM_OK);
  }
  for (int i = 0; i < 3000; ++i) ASSERT_EQ(simLaunchKernel(s, "k", kUs), SIM_OK);
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  while (Records(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL).empty() &&
         std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  EXPECT_GT(Records(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL).size(), 0u);
  ASSERT_EQ(simStreamSynchronize(s), SIM_OK);
  ASSERT_EQ(C().cuptiActivityFlushAll(0), CUPTI_SUCCESS);
  EXPECT_EQ(Records(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL).size(), 12000u);
}

TEST_F(SimTest, PeriodicFlushDeliversFromSimThread) {
  {
    std::lock_guard<std::mutex> lock(g.mu);
    g.buffer_size = 2048;
  }
  Attach();
  ASSERT_EQ(C().cuptiActivityFlushPeriod(5), CUPTI_SUCCESS);
  simStream_t s = simStreamCreate(0);
  for (int i = 0; i < 200; ++i) ASSERT_EQ(simLaunchKernel(s, "k", kUs), SIM_OK);
  ASSERT_EQ(simStreamSynchronize(s), SIM_OK);
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  while (Records(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL).size() < 150 &&
         std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  // Only full buffers come back periodically; the partly filled one waits for FlushAll.
  const size_t periodic = Records(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL).size();
  EXPECT_GE(periodic, 150u);
  ASSERT_EQ(C().cuptiActivityFlushPeriod(0), CUPTI_SUCCESS);
  ASSERT_EQ(C().cuptiActivityFlushAll(0), CUPTI_SUCCESS);
  EXPECT_EQ(Records(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL).size(), 200u);
}

std::vector<std::string> DeliveryTrace(uint64_t base) {
  std::vector<std::string> out;
  std::lock_guard<std::mutex> lock(g.mu);
  for (const Rec& r : g.records) {
    std::ostringstream os;
    os << r.kind << ":" << r.buffer_index << ":";
    if (r.kind == CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL) {
      const auto& k = r.as<CUpti_ActivityKernel10>();
      os << k.correlationId << ":" << k.start - base << ":" << k.streamId;
    } else if (r.kind == CUPTI_ACTIVITY_KIND_RUNTIME) {
      const auto& a = r.as<CUpti_ActivityAPI>();
      os << a.correlationId << ":" << a.start - base << ":" << a.cbid;
    }
    out.push_back(os.str());
  }
  return out;
}

std::vector<std::string> RunSeeded(SimTest* t, const char* seed, uint64_t* unsorted) {
  setenv("GPUACCT_SIM_SEED", seed, 1);
  setenv("GPUACCT_SIM_DELAY_PCT", "20", 1);
  simReset();
  {
    std::lock_guard<std::mutex> lock(g.mu);
    g.records.clear();
    g.completed = 0;
    g.buffer_size = 8192;
  }
  EXPECT_EQ(simInit(1), SIM_OK);
  const uint64_t base = simNow();
  CUpti_SubscriberHandle sub;
  EXPECT_EQ(C().cuptiSubscribe(&sub, OnCallback, nullptr), CUPTI_SUCCESS);
  EXPECT_EQ(C().cuptiActivityRegisterCallbacks(BufferRequested, BufferCompleted), CUPTI_SUCCESS);
  for (CUpti_ActivityKind k : kWantedKinds) EXPECT_EQ(C().cuptiActivityEnable(k), CUPTI_SUCCESS);
  simStream_t a = simStreamCreate(0), b = simStreamCreate(0);
  for (int step = 0; step < 5; ++step) {
    for (int i = 0; i < 40; ++i) {
      simLaunchKernel(a, "a", 30 * kUs);
      simLaunchKernel(b, "b", 7 * kUs);
    }
    simDeviceSynchronize(0);
    C().cuptiActivityFlushAll(0);
  }
  C().cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
  (void)t;
  auto trace = DeliveryTrace(base);
  // Count inversions of GPU start time among kernel records in delivery order.
  uint64_t inv = 0, last = 0;
  std::lock_guard<std::mutex> lock(g.mu);
  for (const Rec& r : g.records) {
    if (r.kind != CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL) continue;
    const uint64_t st = r.as<CUpti_ActivityKernel10>().start;
    if (st < last) ++inv;
    last = st;
  }
  *unsorted = inv;
  return trace;
}

TEST_F(SimTest, DeliveryIsMessyButDeterministicPerSeed) {
  uint64_t inv1 = 0, inv2 = 0, inv3 = 0;
  auto t1 = RunSeeded(this, "7", &inv1);
  auto t2 = RunSeeded(this, "7", &inv2);
  auto t3 = RunSeeded(this, "8", &inv3);
  ASSERT_EQ(t1.size(), t2.size());
  EXPECT_EQ(t1, t2) << "same seed, same delivery";
  EXPECT_NE(t1, t3) << "another seed, another delivery order";
  EXPECT_GT(inv1, 0u) << "delivery must not be globally sorted";
  size_t kernels = 0;
  for (auto& s : t1) kernels += s.rfind("10:", 0) == 0;
  EXPECT_EQ(kernels, 400u);
}

// ---- faults -------------------------------------------------------------------------------------

TEST_F(SimTest, FaultDropCountsDroppedRecords) {
  setenv("GPUACCT_SIM_FAULTS", "drop=5", 1);
  ResetAll();
  Attach();
  simStream_t s = simStreamCreate(0);
  for (int i = 0; i < 10; ++i) ASSERT_EQ(simLaunchKernel(s, "k", kUs), SIM_OK);
  ASSERT_EQ(simStreamSynchronize(s), SIM_OK);
  ASSERT_EQ(C().cuptiActivityFlushAll(0), CUPTI_SUCCESS);
  // 10 x (API + kernel) + 1 stream-create API + sync API + sync record = 23 produced.
  EXPECT_EQ(Records().size(), 23u - 5u);
  size_t dropped = 0;
  ASSERT_EQ(C().cuptiActivityGetNumDroppedRecords(nullptr, 0, &dropped), CUPTI_SUCCESS);
  EXPECT_EQ(dropped, 5u);
  ASSERT_EQ(C().cuptiActivityGetNumDroppedRecords(nullptr, 0, &dropped), CUPTI_SUCCESS);
  EXPECT_EQ(dropped, 0u) << "reset on read";
}

TEST_F(SimTest, ClientRefusingBuffersLosesRecordsWithoutCrash) {
  {
    std::lock_guard<std::mutex> lock(g.mu);
    g.refuse = true;
  }
  Attach();
  simStream_t s = simStreamCreate(0);
  for (int i = 0; i < 10000; ++i) ASSERT_EQ(simLaunchKernel(s, "k", kUs), SIM_OK);
  ASSERT_EQ(simStreamSynchronize(s), SIM_OK);
  ASSERT_EQ(C().cuptiActivityFlushAll(0), CUPTI_SUCCESS);
  EXPECT_EQ(Records().size(), 0u);
  size_t dropped = 0;
  ASSERT_EQ(C().cuptiActivityGetNumDroppedRecords(nullptr, 0, &dropped), CUPTI_SUCCESS);
  EXPECT_EQ(dropped, 20003u);
  // The client accepts buffers again: new records flow.
  {
    std::lock_guard<std::mutex> lock(g.mu);
    g.refuse = false;
  }
  ASSERT_EQ(simLaunchKernel(s, "after", kUs), SIM_OK);
  ASSERT_EQ(simStreamSynchronize(s), SIM_OK);
  ASSERT_EQ(C().cuptiActivityFlushAll(0), CUPTI_SUCCESS);
  EXPECT_EQ(Records(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL).size(), 1u);
}

TEST_F(SimTest, FaultBufferRefusedReturnsBufferEmpty) {
  setenv("GPUACCT_SIM_FAULTS", "buffer_refused=1", 1);
  ResetAll();
  Attach();
  simStream_t s = simStreamCreate(0);
  ASSERT_EQ(simLaunchKernel(s, "lost", kUs), SIM_OK);
  ASSERT_EQ(simStreamSynchronize(s), SIM_OK);
  ASSERT_EQ(C().cuptiActivityFlushAll(0), CUPTI_SUCCESS);
  {
    std::lock_guard<std::mutex> lock(g.mu);
    EXPECT_EQ(g.empty_completed, 1u) << "refused buffer handed back empty (no leak)";
  }
  size_t dropped = 0;
  ASSERT_EQ(C().cuptiActivityGetNumDroppedRecords(nullptr, 0, &dropped), CUPTI_SUCCESS);
  EXPECT_EQ(dropped, 5u);  // stream-create API, launch API, kernel, sync API, sync record
  ASSERT_EQ(simLaunchKernel(s, "kept", kUs), SIM_OK);
  ASSERT_EQ(simStreamSynchronize(s), SIM_OK);
  ASSERT_EQ(C().cuptiActivityFlushAll(0), CUPTI_SUCCESS);
  EXPECT_EQ(Records(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL).size(), 1u);
}

TEST_F(SimTest, FaultSubscribeRefused) {
  setenv("GPUACCT_SIM_FAULTS", "subscribe_refused", 1);
  ResetAll();
  CUpti_SubscriberHandle sub = nullptr;
  EXPECT_EQ(C().cuptiSubscribe(&sub, OnCallback, nullptr),
            CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED);
  char old[CUPTI_OLD_SUBSCRIBER_NAME_MIN_LEN] = {};
  CUpti_SubscriberParams p{};
  p.structSize = CUpti_SubscriberParams_STRUCT_SIZE;
  p.subscriberName = "gpuacct";
  p.oldSubscriberName = old;
  p.oldSubscriberSize = sizeof(old);
  EXPECT_EQ(C().cuptiSubscribe_v2(&sub, OnCallback, nullptr, &p),
            CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED);
  EXPECT_GT(std::strlen(old), 0u);
  const char* str = nullptr;
  EXPECT_EQ(C().cuptiGetResultString(CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED, &str),
            CUPTI_SUCCESS);
  EXPECT_STREQ(str, "CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED");

  // Without the fault, the second subscriber is refused the same way.
  unsetenv("GPUACCT_SIM_FAULTS");
  ResetAll();
  ASSERT_EQ(C().cuptiSubscribe(&sub, OnCallback, nullptr), CUPTI_SUCCESS);
  CUpti_SubscriberHandle second = nullptr;
  EXPECT_EQ(C().cuptiSubscribe(&second, OnCallback, nullptr),
            CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED);
  EXPECT_EQ(C().cuptiUnsubscribe(sub), CUPTI_SUCCESS);
  EXPECT_EQ(C().cuptiUnsubscribe(sub), CUPTI_ERROR_INVALID_PARAMETER);
}

TEST_F(SimTest, FaultErrorFunction) {
  setenv("GPUACCT_SIM_FAULTS", "error:cuptiActivityEnable, error:cuptiActivityFlushPeriod", 1);
  ResetAll();
  EXPECT_EQ(C().cuptiActivityEnable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL), CUPTI_ERROR_UNKNOWN);
  EXPECT_EQ(C().cuptiActivityFlushPeriod(10), CUPTI_ERROR_UNKNOWN);
  EXPECT_EQ(C().cuptiActivityDisable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL), CUPTI_SUCCESS);
  uint32_t v = 0;
  EXPECT_EQ(C().cuptiGetVersion(&v), CUPTI_SUCCESS);
  EXPECT_EQ(v, 130001u);
}

TEST_F(SimTest, MisuseDoesNotCrash) {
  EXPECT_EQ(C().cuptiActivityFlushAll(0), CUPTI_ERROR_INVALID_OPERATION);  // no callbacks yet
  EXPECT_EQ(C().cuptiActivityRegisterCallbacks(nullptr, nullptr), CUPTI_ERROR_INVALID_PARAMETER);
  EXPECT_EQ(C().cuptiActivityEnable(static_cast<CUpti_ActivityKind>(100000)),
            CUPTI_ERROR_INVALID_KIND);
  CUpti_Activity* rec = nullptr;
  EXPECT_EQ(C().cuptiActivityGetNextRecord(nullptr, 0, &rec), CUPTI_ERROR_INVALID_PARAMETER);
  uint8_t empty[16] = {};
  EXPECT_EQ(C().cuptiActivityGetNextRecord(empty, 0, &rec), CUPTI_ERROR_MAX_LIMIT_REACHED);
  EXPECT_EQ(C().cuptiEnableCallback(1, nullptr, CUPTI_CB_DOMAIN_RUNTIME_API, 1),
            CUPTI_ERROR_INVALID_PARAMETER);
  EXPECT_EQ(simLaunchKernel(nullptr, "x", 1), SIM_ERR_INVALID);
  EXPECT_EQ(simLaunchKernel(reinterpret_cast<simStream_t>(&g), "x", 1), SIM_ERR_INVALID);
  EXPECT_EQ(simGraphLaunch(simStreamCreate(0), reinterpret_cast<simGraph_t>(&g)), SIM_ERR_INVALID);
  uint32_t id = 0;
  EXPECT_EQ(C().cuptiGetContextId(reinterpret_cast<CUcontext>(&g), &id),
            CUPTI_ERROR_INVALID_CONTEXT);
  size_t sz = sizeof(size_t), val = 8 << 20;
  EXPECT_EQ(C().cuptiActivitySetAttribute(CUPTI_ACTIVITY_ATTR_DEVICE_BUFFER_SIZE, &sz, &val),
            CUPTI_SUCCESS);
  val = 0;
  EXPECT_EQ(C().cuptiActivityGetAttribute(CUPTI_ACTIVITY_ATTR_DEVICE_BUFFER_SIZE, &sz, &val),
            CUPTI_SUCCESS);
  EXPECT_EQ(val, 8u << 20);
  simShutdown();
  EXPECT_EQ(simLaunchKernel(simStreamCreate(0), "x", 1), SIM_ERR_INVALID);
}

TEST_F(SimTest, FinalizeDeliversAndDetaches) {
  Attach();
  simStream_t s = simStreamCreate(0);
  ASSERT_EQ(simLaunchKernel(s, "k", kUs), SIM_OK);
  ASSERT_EQ(simStreamSynchronize(s), SIM_OK);
  ASSERT_EQ(C().cuptiFinalize(), CUPTI_SUCCESS);
  EXPECT_EQ(Records(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL).size(), 1u);
  const size_t before = Records().size();
  ASSERT_EQ(simLaunchKernel(s, "after_finalize", kUs), SIM_OK);
  EXPECT_EQ(Records().size(), before);
  // Re-attach works (lazy re-init in real CUPTI).
  CUpti_SubscriberHandle sub;
  EXPECT_EQ(C().cuptiSubscribe(&sub, OnCallback, nullptr), CUPTI_SUCCESS);
}

}  // namespace
}  // namespace sim_test
