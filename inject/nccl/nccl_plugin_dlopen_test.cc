// libgpuacct.so loaded as NCCL loads a profiler plugin, with another plugin already named in
// NCCL_PROFILER_PLUGIN (the counting plugin, nccl_test_plugin.cc): the library takes its place
// at load and forwards to it.  One scenario per process (loading and forwarding are
// process-wide), chosen by the environment ctest sets (inject/CMakeLists.txt):
//   GPUACCT_TEST_LIBRARY          the built libgpuacct.so
//   GPUACCT_TEST_NCCL_VERSION     the interface version "NCCL" calls (5 or 3)
//   GPUACCT_TEST_EXPECT_FORWARD   1: the other plugin exports that version and must get every
//                                 event it asked for, and only those; 0: it does not (mismatch)
//   NCCL_PROFILER_PLUGIN          the counting plugin, as the user had set it
#include <dlfcn.h>
#include <gtest/gtest.h>

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <string>

#include "inject/nccl/nccl_profiler_abi.h"

namespace {

namespace abi = gpuacct::nccl_abi;

struct TestPluginCounts {  // the counting plugin's layout (nccl_test_plugin.cc)
  std::atomic<int> inits, finalizes, starts_coll, starts_p2p, starts_proxy, starts_other, stops,
      states, parents_ok, parents_bad, bad_context;
};

std::string env(const char* name) {
  const char* v = std::getenv(name);
  return v != nullptr ? v : "";
}

// What NCCL does with a table of version V: one communicator, a collective, a p2p, a proxy op
// under the collective with a state change, stops, finalize.
template <typename Table, typename Descr, typename Args, typename Init>
void drive(const Table* t, Init init, int expected_mask) {
  void* ctx = nullptr;
  int mask = 0;
  ASSERT_EQ(init(t, &ctx, &mask), abi::kSuccess);
  ASSERT_NE(ctx, nullptr);
  EXPECT_EQ(mask, expected_mask);
  Descr coll;
  std::memset(&coll, 0, sizeof coll);
  coll.type = static_cast<decltype(coll.type)>(abi::kColl);
  void* hc = nullptr;
  EXPECT_EQ(t->start_event(ctx, &hc, &coll), abi::kSuccess);
  Descr p2p;
  std::memset(&p2p, 0, sizeof p2p);
  p2p.type = static_cast<decltype(p2p.type)>(abi::kP2p);
  void* hp = nullptr;
  EXPECT_EQ(t->start_event(ctx, &hp, &p2p), abi::kSuccess);
  Descr proxy;
  std::memset(&proxy, 0, sizeof proxy);
  proxy.type = static_cast<decltype(proxy.type)>(abi::kProxyOp);
  proxy.parent = hc;  // NCCL passes the handle we returned for the collective
  void* hx = nullptr;
  if ((static_cast<uint64_t>(mask) & abi::kProxyOp) != 0) {
    EXPECT_EQ(t->start_event(ctx, &hx, &proxy), abi::kSuccess);
    Args args;
    std::memset(&args, 0, sizeof args);
    EXPECT_EQ(t->record_event_state(hx, 0, &args), abi::kSuccess);
    EXPECT_EQ(t->stop_event(hx), abi::kSuccess);
  }
  EXPECT_EQ(t->stop_event(hp), abi::kSuccess);
  EXPECT_EQ(t->stop_event(hc), abi::kSuccess);
  EXPECT_EQ(t->finalize(ctx), abi::kSuccess);
}

TEST(NcclPluginDlopen, TakesThePluginsPlaceAndForwardsWhatItAskedFor) {
  const std::string library = env("GPUACCT_TEST_LIBRARY");
  const std::string other = env("NCCL_PROFILER_PLUGIN");
  const int version = std::atoi(env("GPUACCT_TEST_NCCL_VERSION").c_str());
  const bool expect_forward = env("GPUACCT_TEST_EXPECT_FORWARD") == "1";
  ASSERT_FALSE(library.empty());
  ASSERT_FALSE(other.empty());
  ASSERT_TRUE(version == 5 || version == 3) << version;

  // The library loads (LD_PRELOAD / CUDA injection in a real job) ...
  void* lib = dlopen(library.c_str(), RTLD_NOW | RTLD_LOCAL);
  ASSERT_NE(lib, nullptr) << dlerror();
  // ... and points NCCL at itself, keeping the user's plugin.
  EXPECT_EQ(env("NCCL_PROFILER_PLUGIN"), library);
  EXPECT_EQ(env("GPUACCT_NCCL_PROFILER_NEXT"), other);

  // NCCL: dlopen NCCL_PROFILER_PLUGIN, the newest table first.
  void* nccl_view = dlopen(env("NCCL_PROFILER_PLUGIN").c_str(), RTLD_NOW | RTLD_LOCAL);
  ASSERT_EQ(nccl_view, lib);  // the same instance
  ASSERT_NE(dlsym(lib, "ncclProfiler_v5"), nullptr);
  ASSERT_NE(dlsym(lib, "ncclProfiler_v1"), nullptr);

  const int ours = static_cast<int>(abi::kGroup | abi::kColl | abi::kP2p);
  const int theirs = static_cast<int>(abi::kColl | abi::kProxyOp);
  const int expected_mask = expect_forward ? (ours | theirs) : ours;
  if (version == 5) {
    const auto* t = static_cast<const abi::ProfilerV5*>(dlsym(lib, "ncclProfiler_v5"));
    drive<abi::ProfilerV5, abi::DescrV5, abi::StateArgsV5>(
        t,
        [](const abi::ProfilerV5* p, void** c, int* m) {
          return p->init(c, 0xc0ffeeull, m, "world", 1, 2, 0, nullptr);
        },
        expected_mask);
  } else {
    const auto* t = static_cast<const abi::ProfilerV3*>(dlsym(lib, "ncclProfiler_v3"));
    drive<abi::ProfilerV3, abi::DescrV3, abi::StateArgsV3>(
        t, [](const abi::ProfilerV3* p, void** c, int* m) { return p->init(c, m); },
        expected_mask);
  }

  // The counting plugin was loaded by gpuacct (at the first init) whether or not it matched.
  void* counting = dlopen(other.c_str(), RTLD_NOW | RTLD_NOLOAD);
  ASSERT_NE(counting, nullptr) << "gpuacct never loaded " << other;
  auto counts_fn =
      reinterpret_cast<TestPluginCounts* (*)()>(dlsym(counting, "gpuacct_test_plugin_counts"));
  ASSERT_NE(counts_fn, nullptr);
  const TestPluginCounts& c = *counts_fn();
  const int n = expect_forward ? 1 : 0;
  EXPECT_EQ(c.inits.load(), n);
  EXPECT_EQ(c.starts_coll.load(), n);
  EXPECT_EQ(c.starts_p2p.load(), 0);  // it did not ask for p2p: never reaches it
  EXPECT_EQ(c.starts_proxy.load(), n);
  EXPECT_EQ(c.parents_ok.load(), n);  // the proxy op's parent is its own collective handle
  EXPECT_EQ(c.parents_bad.load(), 0);
  EXPECT_EQ(c.states.load(), n);
  EXPECT_EQ(c.stops.load(), 2 * n);  // the proxy op and the collective
  EXPECT_EQ(c.finalizes.load(), n);
  EXPECT_EQ(c.starts_other.load(), 0);
  EXPECT_EQ(c.bad_context.load(), 0);  // its own context, never ours
}

}  // namespace
