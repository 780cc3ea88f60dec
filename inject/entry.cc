// Entry points the CUDA driver and the dynamic loader call: InitializeInjection and the load
// constructor.  (InitializeInjectionNvtx2 is in nvtx_inject.cc, the C API in capi.cc.)
#include <dlfcn.h>
#include <strings.h>

#include <atomic>
#include <cstdlib>
#include <cstring>

#include "inject/nccl/nccl_profiler.h"
#include "inject/runtime.h"

namespace {

std::atomic<bool> g_injection_done{false};

// GPUACCT_ENABLE is off: the spellings config.cc accepts as false (0/false/no/off, any case,
// surrounding blanks).  No allocation: this runs in the load constructor.
bool enable_is_off(const char* v) {
  if (v == nullptr) return false;
  while (*v == ' ' || *v == '\t') ++v;
  size_t n = std::strlen(v);
  while (n > 0 && (v[n - 1] == ' ' || v[n - 1] == '\t' || v[n - 1] == '\n')) --n;
  for (const char* word : {"0", "false", "no", "off"}) {
    if (std::strlen(word) == n && strncasecmp(v, word, n) == 0) return true;
  }
  return false;
}

// At load (CUDA_INJECTION64_PATH, LD_PRELOAD, or a dlopen by Python): point the NVTX loader,
// the CUDA driver and NCCL's profiler-plugin loader at this very file when nothing else is set, so NVTX ranges reach us and a
// later cuInit initialises the same instance.  Nothing else happens until the first use.
__attribute__((constructor)) void gpuacct_on_load() {
  try {
    if (enable_is_off(std::getenv("GPUACCT_ENABLE"))) {
      return;  // host ranges still work through the C API; no environment changes
    }
    Dl_info info{};
    if (dladdr(reinterpret_cast<void*>(&gpuacct_on_load), &info) == 0 ||
        info.dli_fname == nullptr || info.dli_fname[0] != '/') {
      return;
    }
    setenv("NVTX_INJECTION64_PATH", info.dli_fname, /*overwrite=*/0);
    setenv("CUDA_INJECTION64_PATH", info.dli_fname, /*overwrite=*/0);
    // NCCL (2.23+) loads its profiler plugin at communicator init: us, forwarding to a plugin
    // the user had named (inject/nccl/nccl_profiler.h).
    gpuacct::inject::prepare_nccl_profiler_env(info.dli_fname);
  } catch (...) {
  }
}

}  // namespace

// Called by the CUDA driver during cuInit.  Returns 1 in every case (also when gpuacct
// switches itself off): a 0 would only make the driver complain, never help the program.
extern "C" __attribute__((visibility("default"))) int InitializeInjection(void) {
  try {
    if (g_injection_done.exchange(true)) return 1;
    gpuacct::inject::Runtime::get().attach_cupti();
  } catch (...) {
  }
  return 1;
}
