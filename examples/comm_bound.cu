// comm_bound: one process drives every visible GPU; each step runs 2 ms of compute and then an
// NCCL all-reduce of 256 MiB per GPU that nothing overlaps.  Expected verdict: communication
// (needs >= 2 GPUs: NCCL on a single rank reduces to a local copy).
#include <nccl.h>

#include <vector>

#include "common.cuh"

#define NK(call)                                                                                 \
  do {                                                                                           \
    ncclResult_t r_ = (call);                                                                    \
    if (r_ != ncclSuccess) {                                                                     \
      std::fprintf(stderr, "%s:%d %s: %s\n", __FILE__, __LINE__, #call, ncclGetErrorString(r_)); \
      std::exit(1);                                                                              \
    }                                                                                            \
  } while (0)

int main(int argc, char** argv) {
  ExampleArgs args(argc, argv, 20);
  Marks marks(args.marks);
  int n = 0;
  CK(cudaGetDeviceCount(&n));
  std::printf("comm_bound: %d GPU(s)\n", n);
  std::vector<ncclComm_t> comms(static_cast<size_t>(n));
  std::vector<int> devs(static_cast<size_t>(n));
  for (int d = 0; d < n; ++d) devs[static_cast<size_t>(d)] = d;
  NK(ncclCommInitAll(comms.data(), n, devs.data()));
  const size_t count = (256u << 20) / sizeof(float);
  std::vector<float*> buf(static_cast<size_t>(n));
  std::vector<cudaStream_t> streams(static_cast<size_t>(n));
  for (int d = 0; d < n; ++d) {
    CK(cudaSetDevice(d));
    CK(cudaMalloc(&buf[static_cast<size_t>(d)], count * sizeof(float)));
    CK(cudaMemset(buf[static_cast<size_t>(d)], 0, count * sizeof(float)));
    CK(cudaStreamCreate(&streams[static_cast<size_t>(d)]));
  }
  CK(cudaSetDevice(0));
  const long long ms = cycles_per_ms();
  const double t0 = now_ms();
  for (int i = 0; i < args.steps; ++i) {
    marks.step_begin(i);
    for (int d = 0; d < n; ++d) {
      CK(cudaSetDevice(d));
      spin_kernel<<<132, 128, 0, streams[static_cast<size_t>(d)]>>>(2 * ms);
    }
    NK(ncclGroupStart());
    for (int d = 0; d < n; ++d) {
      NK(ncclAllReduce(buf[static_cast<size_t>(d)], buf[static_cast<size_t>(d)], count, ncclFloat,
                       ncclSum, comms[static_cast<size_t>(d)], streams[static_cast<size_t>(d)]));
    }
    NK(ncclGroupEnd());
    for (int d = 0; d < n; ++d) {
      CK(cudaSetDevice(d));
      CK(cudaStreamSynchronize(streams[static_cast<size_t>(d)]));
    }
    CK(cudaSetDevice(0));
    marks.step_end();
  }
  std::printf("comm_bound: %d steps in %.1f ms\n", args.steps, now_ms() - t0);
  for (int d = 0; d < n; ++d) ncclCommDestroy(comms[static_cast<size_t>(d)]);
  return 0;
}
