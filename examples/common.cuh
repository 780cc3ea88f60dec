// Shared helpers of the CUDA examples: error checks, flags, step / data marks (gpuacct C API
// through gpuacct_dynamic.h, NVTX, or none), and a spin kernel whose duration is exact.
#pragma once

#include <cuda_runtime.h>
#include <gpuacct/gpuacct_dynamic.h>
#include <nvtx3/nvToolsExt.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>

#define CK(call)                                                                                   \
  do {                                                                                             \
    cudaError_t err_ = (call);                                                                     \
    if (err_ != cudaSuccess) {                                                                     \
      std::fprintf(stderr, "%s:%d %s: %s\n", __FILE__, __LINE__, #call, cudaGetErrorString(err_)); \
      std::exit(1);                                                                                \
    }                                                                                              \
  } while (0)

struct ExampleArgs {
  int steps = 30;
  std::string marks = "capi";  // capi | nvtx | none

  ExampleArgs(int argc, char** argv, int default_steps) : steps(default_steps) {
    for (int i = 1; i < argc; ++i) {
      if (std::strncmp(argv[i], "--steps=", 8) == 0)
        steps = std::atoi(argv[i] + 8);
      else if (std::strncmp(argv[i], "--marks=", 8) == 0)
        marks = argv[i] + 8;
      else {
        std::fprintf(stderr, "usage: %s [--steps=N] [--marks=capi|nvtx|none]\n", argv[0]);
        std::exit(2);
      }
    }
  }
};

// Step and data marks.  Construct after CUDA is initialised (the driver loads libgpuacct.so in
// cuInit, and gpuacct_dyn() looks for the loaded instance).
class Marks {
 public:
  explicit Marks(const std::string& how) : how_(how) {
    CK(cudaFree(nullptr));  // cuInit: the injection library is loaded from here on
    api_ = gpuacct_dyn();
  }
  void step_begin(int i) {
    if (how_ == "capi")
      api_->step_begin(i);
    else if (how_ == "nvtx")
      nvtxRangePushA("train_step");
  }
  void step_end() {
    if (how_ == "capi")
      api_->step_end();
    else if (how_ == "nvtx")
      nvtxRangePop();
  }
  void data_push() {
    if (how_ == "capi")
      api_->data_push("dataloader");
    else if (how_ == "nvtx")
      nvtxRangePushA("dataloader");
  }
  void data_pop() {
    if (how_ == "capi")
      api_->data_pop();
    else if (how_ == "nvtx")
      nvtxRangePop();
  }

 private:
  std::string how_;
  const gpuacct_dyn_api* api_ = nullptr;
};

// Busy-waits `cycles` SM clock cycles: a compute kernel of a chosen length.
__global__ void spin_kernel(long long cycles) {
  const long long start = clock64();
  while (clock64() - start < cycles) {
  }
}

__global__ void tiny_kernel(float* x) {
  if (x != nullptr && threadIdx.x == 0) x[blockIdx.x] += 1.0f;
}

inline long long cycles_per_ms() {
  int khz = 0;
  CK(cudaDeviceGetAttribute(&khz, cudaDevAttrClockRate, 0));
  return static_cast<long long>(khz);  // kHz = cycles per ms
}

inline void host_sleep_ms(double ms) {
  std::this_thread::sleep_for(std::chrono::microseconds(static_cast<long long>(ms * 1000)));
}

inline double now_ms() {
  using namespace std::chrono;
  return duration<double, std::milli>(steady_clock::now().time_since_epoch()).count();
}
