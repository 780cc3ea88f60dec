// Stand-in injection library for the cuInit test: counts InitializeInjection calls.  Loaded by
// the fake driver from CUDA_INJECTION64_PATH with RTLD_LOCAL, so the test reads the counter by
// re-opening the same path with RTLD_NOLOAD.
#include <atomic>

namespace {
std::atomic<int> g_calls{0};
}

extern "C" __attribute__((visibility("default"))) int InitializeInjection(void) {
  g_calls.fetch_add(1);
  return 1;
}

extern "C" __attribute__((visibility("default"))) int sim_test_inject_calls(void) {
  return g_calls.load();
}
