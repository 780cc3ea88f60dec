// A tiny NCCL profiler plugin for the forwarding tests (nccl_plugin_dlopen_test.cc): it counts
// every call it gets, asks for collectives and proxy operations (not p2p), and checks that a
// proxy operation's parent is the handle it returned for that collective.  Built twice: with
// every version (v5, v4, v3) and, with GPUACCT_TEST_PLUGIN_ONLY_V3, with v3 only (a version
// mismatch with what NCCL calls gpuacct with).
//
// tests/gpu/check.sh also loads it behind libgpuacct.so in a real NCCL run: there
// GPUACCT_TEST_PLUGIN_P2P=1 asks for p2p too (a single-rank communicator has only p2p events),
// and GPUACCT_TEST_PLUGIN_PRINT=1 prints the counts on stderr at each finalize (one line).
#include <atomic>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "inject/nccl/nccl_profiler_abi.h"

namespace abi = gpuacct::nccl_abi;

extern "C" {

// What the test reads (dlsym "gpuacct_test_plugin_counts").
struct TestPluginCounts {
  std::atomic<int> inits{0};
  std::atomic<int> finalizes{0};
  std::atomic<int> starts_coll{0};
  std::atomic<int> starts_p2p{0};   // 0 unless GPUACCT_TEST_PLUGIN_P2P=1 asked for them
  std::atomic<int> starts_proxy{0};
  std::atomic<int> starts_other{0};
  std::atomic<int> stops{0};
  std::atomic<int> states{0};
  std::atomic<int> parents_ok{0};   // proxy ops whose parent was our collective's handle
  std::atomic<int> parents_bad{0};
  std::atomic<int> bad_context{0};
};

}  // extern "C"

namespace {

TestPluginCounts g_counts;
int g_context_tag = 0;
constexpr int kMask = static_cast<int>(abi::kColl | abi::kProxyOp);

bool env_on(const char* name) {
  const char* v = std::getenv(name);
  return v != nullptr && std::strcmp(v, "1") == 0;
}

struct Event {
  uint64_t type = 0;
};
Event g_events[1024];
std::atomic<int> g_next{0};

void* new_event(uint64_t type) {
  Event& e = g_events[g_next.fetch_add(1) % 1024];
  e.type = type;
  return &e;
}

bool is_our_coll(void* p) {
  for (Event& e : g_events) {
    if (&e == p) return e.type == abi::kColl;
  }
  return false;
}

template <typename Descr>
abi::Result start(void* context, void** handle, Descr* d) {
  if (context != &g_context_tag) g_counts.bad_context++;
  if (d == nullptr || handle == nullptr) return abi::kSuccess;
  const uint64_t type = d->type;
  if (type == abi::kColl) {
    g_counts.starts_coll++;
  } else if (type == abi::kP2p) {
    g_counts.starts_p2p++;
  } else if (type == abi::kProxyOp) {
    g_counts.starts_proxy++;
    (is_our_coll(d->parent) ? g_counts.parents_ok : g_counts.parents_bad)++;
  } else {
    g_counts.starts_other++;
  }
  *handle = new_event(type);
  return abi::kSuccess;
}
abi::Result stop(void* handle) {
  if (handle != nullptr) g_counts.stops++;
  return abi::kSuccess;
}
template <typename Args>
abi::Result state(void* handle, abi::EventState, Args*) {
  if (handle != nullptr) g_counts.states++;
  return abi::kSuccess;
}
abi::Result finalize(void* context) {
  if (context != &g_context_tag) g_counts.bad_context++;
  g_counts.finalizes++;
  if (env_on("GPUACCT_TEST_PLUGIN_PRINT")) {
    std::fprintf(stderr,
                 "gpuacct_test_plugin: inits=%d finalizes=%d coll=%d p2p=%d proxy=%d other=%d "
                 "stops=%d bad_context=%d\n",
                 g_counts.inits.load(), g_counts.finalizes.load(), g_counts.starts_coll.load(),
                 g_counts.starts_p2p.load(), g_counts.starts_proxy.load(),
                 g_counts.starts_other.load(), g_counts.stops.load(),
                 g_counts.bad_context.load());
  }
  return abi::kSuccess;
}
abi::Result init_v1(void** context, int* mask) {
  g_counts.inits++;
  *context = &g_context_tag;
  *mask = kMask | (env_on("GPUACCT_TEST_PLUGIN_P2P") ? static_cast<int>(abi::kP2p) : 0);
  return abi::kSuccess;
}
#ifndef GPUACCT_TEST_PLUGIN_ONLY_V3
abi::Result init_v4(void** context, int* mask, const char*, uint64_t, int, int, int, abi::Logger) {
  return init_v1(context, mask);
}
abi::Result init_v5(void** context, uint64_t, int* mask, const char*, int, int, int, abi::Logger) {
  return init_v1(context, mask);
}
#endif

}  // namespace

#define TEST_PLUGIN_EXPORT extern "C" __attribute__((visibility("default")))

TEST_PLUGIN_EXPORT TestPluginCounts* gpuacct_test_plugin_counts() {
  return &g_counts;
}

#ifndef GPUACCT_TEST_PLUGIN_ONLY_V3
TEST_PLUGIN_EXPORT const abi::ProfilerV5 ncclProfiler_v5 = {
    "counting", &init_v5, &start<abi::DescrV5>, &stop, &state<abi::StateArgsV5>, &finalize};
TEST_PLUGIN_EXPORT const abi::ProfilerV4 ncclProfiler_v4 = {
    "counting", &init_v4, &start<abi::DescrV4>, &stop, &state<abi::StateArgsV4>, &finalize};
#endif
TEST_PLUGIN_EXPORT const abi::ProfilerV3 ncclProfiler_v3 = {
    "counting", &init_v1, &start<abi::DescrV3>, &stop, &state<abi::StateArgsV3>, &finalize};
