// Self-tests of what the simulated multi-rank jobs need from the engine (tests/sim/fake_nccl):
// a common clock base and a planted clock offset, a simulated host name, and kernels whose end
// is decided by the caller (simNextOpStart / simLaunchKernelUntil).
#include <cupti.h>
#include <gtest/gtest.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <string>

#include "sim_cuda.h"
#include "sim_test_client.h"

namespace sim_test {
namespace {

constexpr uint64_t kMs = 1000 * kUs;

uint64_t RealtimeNs() {
  timespec ts{};
  clock_gettime(CLOCK_REALTIME, &ts);  // interposed: the sim clock
  return static_cast<uint64_t>(ts.tv_sec) * 1000000000ull + static_cast<uint64_t>(ts.tv_nsec);
}

TEST_F(SimTest, ClockStartsAtThePlantedBaseWithThePlantedOffset) {
  setenv("GPUACCT_SIM_CLOCK_BASE_NS", "1700000000000000000", 1);
  setenv("GPUACCT_SIM_CLOCK_OFFSET_NS", "-5000000", 1);
  ResetAll();
  EXPECT_EQ(simClockOffset(), -5000000);
  EXPECT_EQ(simNow(), 1700000000000000000ull - 5000000ull);
  EXPECT_EQ(RealtimeNs(), simNow());  // the host's clock carries the offset too
  simHostWork(7 * kUs);
  EXPECT_EQ(simNow() - static_cast<uint64_t>(simClockOffset()), 1700000000000007000ull);
  // GPU records are on the same (offset) clock.
  Attach();
  simStream_t s = simStreamCreate(0);
  const uint64_t t0 = simNow();
  ASSERT_EQ(simLaunchKernel(s, "k", 100 * kUs), SIM_OK);
  ASSERT_EQ(simStreamSynchronize(s), SIM_OK);
  ASSERT_EQ(C().cuptiActivityFlushAll(0), CUPTI_SUCCESS);
  auto kernels = Records(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL);
  ASSERT_EQ(kernels.size(), 1u);
  EXPECT_EQ(kernels[0].as<CUpti_ActivityKernel10>().start, t0 + 4 * kUs + 1 * kUs);
  setenv("GPUACCT_SIM_CLOCK_OFFSET_NS", "+3000", 1);
  ResetAll();
  EXPECT_EQ(simClockOffset(), 3000);
  EXPECT_EQ(simNow(), 1700000000000003000ull);
}

TEST_F(SimTest, WithoutKnobsTheClockStartsAtTheRealClockWithNoOffset) {
  const uint64_t before = static_cast<uint64_t>(time(nullptr)) * 1000000000ull;
  ResetAll();
  EXPECT_EQ(simClockOffset(), 0);
  EXPECT_GE(simNow(), before);
  EXPECT_LT(simNow(), before + 10'000'000'000ull);
}

TEST_F(SimTest, HostNameIsTheSimulatedOneWhenSet) {
  char real[256] = {};
  ASSERT_EQ(gethostname(real, sizeof(real)), 0);
  setenv("GPUACCT_SIM_HOSTNAME", "simhost1", 1);
  char name[64] = {};
  ASSERT_EQ(gethostname(name, sizeof(name)), 0);
  EXPECT_STREQ(name, "simhost1");
  char small[4] = {};
  errno = 0;
  EXPECT_EQ(gethostname(small, sizeof(small)), -1);
  EXPECT_EQ(errno, ENAMETOOLONG);
  unsetenv("GPUACCT_SIM_HOSTNAME");
  char again[256] = {};
  ASSERT_EQ(gethostname(again, sizeof(again)), 0);
  EXPECT_STREQ(again, real);
  EXPECT_STRNE(again, "simhost1");
}

TEST_F(SimTest, KernelUntilRunsFromItsOrdinaryStartToTheGivenEnd) {
  Attach();
  simStream_t s = simStreamCreate(0);
  EXPECT_EQ(simNextOpStart(nullptr), 0u);
  ASSERT_EQ(simLaunchKernel(s, "busy", 300 * kUs), SIM_OK);
  const uint64_t predicted = simNextOpStart(s);  // behind the busy kernel
  const uint64_t t = simNow();
  EXPECT_EQ(predicted, t - 4 * kUs + 5 * kUs + 300 * kUs);
  uint64_t got = 0;
  ASSERT_EQ(simLaunchKernelUntil(s, "ncclDevKernel_AllReduce_Sum_bf16_RING_LL",
                                 predicted + 2 * kMs, &got),
            SIM_OK);
  EXPECT_EQ(got, predicted);
  EXPECT_EQ(simNow(), t + 4 * kUs);  // an ordinary launch for the host
  // An end before the start: the kernel ends at once (never runs backwards).
  const uint64_t next = simNextOpStart(s);
  EXPECT_EQ(next, predicted + 2 * kMs);
  ASSERT_EQ(simLaunchKernelUntil(s, "short", next - 1, nullptr), SIM_OK);
  ASSERT_EQ(simStreamSynchronize(s), SIM_OK);
  ASSERT_EQ(C().cuptiActivityFlushAll(0), CUPTI_SUCCESS);
  auto kernels = Records(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL);
  ASSERT_EQ(kernels.size(), 3u);
  uint64_t ends[3] = {};
  for (const Rec& r : kernels) {
    const auto& k = r.as<CUpti_ActivityKernel10>();
    if (std::strcmp(k.name, "busy") == 0) ends[0] = k.end;
    if (std::strncmp(k.name, "ncclDevKernel", 13) == 0) {
      EXPECT_EQ(k.start, predicted);
      ends[1] = k.end;
    }
    if (std::strcmp(k.name, "short") == 0) {
      EXPECT_EQ(k.start, k.end);
      ends[2] = k.end;
    }
  }
  EXPECT_EQ(ends[1], predicted + 2 * kMs);
  EXPECT_EQ(ends[2], next);
  EXPECT_EQ(simLaunchCalls(), 3u);
}

}  // namespace
}  // namespace sim_test
