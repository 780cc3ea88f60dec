#include "cupti_hooks/cupti_api.h"

#include <dlfcn.h>

namespace gpuacct::cupti {

bool CuptiApi::load(const std::string& library, std::string* why) {
  dlerror();
  handle = dlopen(library.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) {
    const char* err = dlerror();
    if (why != nullptr) *why = err != nullptr ? err : ("cannot dlopen " + library);
    return false;
  }
  std::string missing;
#define GPUACCT_CUPTI_RESOLVE_REQ(name)                          \
  name = reinterpret_cast<decltype(name)>(dlsym(handle, #name)); \
  if (name == nullptr) missing += (missing.empty() ? "" : ", ") + std::string(#name);
#define GPUACCT_CUPTI_RESOLVE_OPT(name) \
  name = reinterpret_cast<decltype(name)>(dlsym(handle, #name));
  GPUACCT_CUPTI_REQUIRED(GPUACCT_CUPTI_RESOLVE_REQ)
  GPUACCT_CUPTI_OPTIONAL(GPUACCT_CUPTI_RESOLVE_OPT)
#undef GPUACCT_CUPTI_RESOLVE_REQ
#undef GPUACCT_CUPTI_RESOLVE_OPT
  if (!missing.empty()) {
    if (why != nullptr) *why = library + " lacks " + missing;
    // Keep the handle: unloading CUPTI is never safe once something may have called it.
    return false;
  }
  if (cuptiGetVersion(&version) != CUPTI_SUCCESS) version = 0;
  return true;
}

const char* CuptiApi::result_string(CUptiResult r) const {
  const char* s = nullptr;
  if (cuptiGetResultString != nullptr && cuptiGetResultString(r, &s) == CUPTI_SUCCESS &&
      s != nullptr) {
    return s;
  }
  return "unknown CUPTI error";
}

void log_cupti_failure(const CuptiApi& api, const char* call_text, CUptiResult r) {
  std::fprintf(stderr, "gpuacct: %s failed: %s (%d)\n", call_text, api.result_string(r),
               static_cast<int>(r));
}

}  // namespace gpuacct::cupti
