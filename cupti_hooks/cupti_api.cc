#include "cupti_hooks/cupti_api.h"

#include <dlfcn.h>

namespace gpuacct::cupti {

Status CuptiApi::load(const std::string& library) {
  dlerror();
  handle = dlopen(library.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) {
    const char* err = dlerror();
    return Status::Error(err != nullptr ? err : ("cannot dlopen " + library));
  }
  std::string missing;
#define GPUACCT_CUPTI_RESOLVE_REQ(name)                          \
  name = reinterpret_cast<decltype(name)>(dlsym(handle, #name)); \
  if (name == nullptr) missing += (missing.empty() ? "" : ", ") + std::string(#name);
#define GPUACCT_CUPTI_RESOLVE_OPT(name) \
  name = reinterpret_cast<decltype(name)>(dlsym(handle, #name));
  GPUACCT_CUPTI_REQUIRED(GPUACCT_CUPTI_RESOLVE_REQ)
  GPUACCT_CUPTI_OPTIONAL(GPUACCT_CUPTI_RESOLVE_OPT)
  GPUACCT_CUPTI_COUNTERS(GPUACCT_CUPTI_RESOLVE_OPT)
#undef GPUACCT_CUPTI_RESOLVE_REQ
#undef GPUACCT_CUPTI_RESOLVE_OPT
  if (!missing.empty()) {
    // Keep the handle: unloading CUPTI is never safe once something may have called it.
    return Status::Error(library + " lacks " + missing);
  }
  if (cuptiGetVersion(&version) != CUPTI_SUCCESS) version = 0;
  return Status::Ok();
}

const char* CuptiApi::result_string(CUptiResult r) const {
  const char* s = nullptr;
  if (cuptiGetResultString != nullptr && cuptiGetResultString(r, &s) == CUPTI_SUCCESS &&
      s != nullptr) {
    return s;
  }
  return "unknown CUPTI error";
}

const char* CuptiApi::missing_counter_function() const {
#define GPUACCT_CUPTI_FIRST_MISSING(name) \
  if (name == nullptr) return #name;
  GPUACCT_CUPTI_COUNTERS(GPUACCT_CUPTI_FIRST_MISSING)
#undef GPUACCT_CUPTI_FIRST_MISSING
  return nullptr;
}

void log_cupti_failure(const CuptiApi& api, const char* call_text, CUptiResult r) {
  if (api.warn == nullptr) return;
  api.warn(std::string(call_text) + " failed: " + api.result_string(r) + " (" +
           std::to_string(static_cast<int>(r)) + ")");
}

}  // namespace gpuacct::cupti
