// The public C API (include/gpuacct/gpuacct.h).  Every entry point is noexcept in effect: a
// try/catch keeps any exception from crossing the C boundary.  Each mark reads the clock
// first (now_ns() is emit's first argument): the first call starts the library (emit, in
// inject/recording/recorder.h).
#include <bit>

#include "gpuacct/gpuacct.h"
#include "inject/clock.h"
#include "inject/python/python_hook.h"
#include "inject/recording/recorder.h"
#include "inject/recording/sampling.h"
#include "inject/runtime.h"

using gpuacct::inject::emit;
using gpuacct::inject::HostRecType;
using gpuacct::inject::now_ns;
using gpuacct::inject::WorkUnit;

#define GPUACCT_GUARD(body) \
  try {                     \
    body;                   \
  } catch (...) {           \
  }

extern "C" {

GPUACCT_EXPORT int gpuacct_api_version(void) {
  return GPUACCT_API_VERSION;
}

GPUACCT_EXPORT int gpuacct_is_active(void) {
  try {
    return gpuacct::inject::Runtime::get().gpu_active() ? 1 : 0;
  } catch (...) {
    return 0;
  }
}

// A step's begin (or mark) also moves the sampling window (GPUACCT_SAMPLE,
// inject/recording/sampling.h).
GPUACCT_EXPORT void gpuacct_step_begin(int64_t step_number) {
  GPUACCT_GUARD({
    int64_t ts = now_ns();
    const uint8_t kind = gpuacct::inject::begin_sampled_step(&ts);
    emit(ts, HostRecType::kStepBegin, step_number < 0 ? -1 : step_number, nullptr, 0, kind);
  });
}

GPUACCT_EXPORT void gpuacct_step_end(void) {
  GPUACCT_GUARD(emit(now_ns(), HostRecType::kStepEnd, 0, nullptr));
}

GPUACCT_EXPORT void gpuacct_step_mark(int64_t step_number) {
  GPUACCT_GUARD({
    int64_t ts = now_ns();
    const uint8_t kind = gpuacct::inject::begin_sampled_step(&ts);
    emit(ts, HostRecType::kStepMark, step_number < 0 ? -1 : step_number, nullptr, 0, kind);
  });
}

GPUACCT_EXPORT void gpuacct_data_push(const char* name) {
  GPUACCT_GUARD(emit(now_ns(), HostRecType::kDataPush, 0, name != nullptr ? name : "data"));
}

GPUACCT_EXPORT void gpuacct_data_pop(void) {
  GPUACCT_GUARD(emit(now_ns(), HostRecType::kDataPop, 0, nullptr));
}

GPUACCT_EXPORT void gpuacct_range_push(const char* name) {
  GPUACCT_GUARD(emit(now_ns(), HostRecType::kUserPush, 0, name != nullptr ? name : "range"));
}

GPUACCT_EXPORT void gpuacct_range_pop(void) {
  GPUACCT_GUARD(emit(now_ns(), HostRecType::kUserPop, 0, nullptr));
}

GPUACCT_EXPORT void gpuacct_set_step_flops(double flops) {
  GPUACCT_GUARD(emit(now_ns(), HostRecType::kStepFlops, std::bit_cast<int64_t>(flops), nullptr));
}

// One record per unit declared: two O(1) ring writes at most, the same as two
// gpuacct_set_step_flops calls.  0 declares nothing; a negative or non-finite value is recorded
// and counted as invalid by the accountant (no check or logging here: the hot path).
GPUACCT_EXPORT void gpuacct_set_step_work(double tokens, double samples) {
  GPUACCT_GUARD({
    const int64_t ts = now_ns();
    if (tokens != 0) {
      emit(ts, HostRecType::kStepWork, std::bit_cast<int64_t>(tokens), nullptr, 0,
           static_cast<uint8_t>(WorkUnit::kTokens));
    }
    if (samples != 0) {
      emit(ts, HostRecType::kStepWork, std::bit_cast<int64_t>(samples), nullptr, 0,
           static_cast<uint8_t>(WorkUnit::kSamples));
    }
  });
}

GPUACCT_EXPORT void gpuacct_flush(void) {
  GPUACCT_GUARD(gpuacct::inject::Runtime::get().request_flush());
}

GPUACCT_EXPORT void gpuacct_python_status(const char* text) {
  GPUACCT_GUARD(if (text != nullptr) gpuacct::inject::set_python_status(text));
}

}  // extern "C"
