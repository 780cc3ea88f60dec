// nccl_allreduce: libgpuacct.so as NCCL's profiler plugin, on ONE GPU.  One process, one
// single-rank communicator, a training-like loop: per step a 1 ms compute kernel, all-reduces
// (one alone, three in one ncclGroupStart/End), one group of send/receive pairs to our own rank,
// a stream sync.  Prints what it issued, for tests/gpu/check.sh to compare with the rows file
// (<base>.collectives.csv) and the report's collection.nccl_plugin.
//
// Why the send/receive pairs: NCCL short-circuits collectives on a single-rank communicator.
// In NVIDIA/nccl src/enqueue.cc (read at a 2.28-era commit; older 2.x has the same branch),
// taskAppend() returns right after ncclLaunchOneRank() when comm->nRanks == 1: a
// cudaMemcpyAsync (out of place), nothing (in place), or a oneRankReduce kernel (PreMulSum ops such as ncclAvg on floats).  No task is
// made, so no kernel plan, so hostStreamPlanTask() -> ncclProfilerStartTaskEvents() never runs
// for it: a profiler plugin gets NO ncclProfileColl event for a single-rank all-reduce (2.28's
// v5 API events, ncclProfileCollApi, are also started only in collTaskAppend, after that
// return).  ncclSend / ncclRecv take the other branch (p2pTaskAppend) whatever nRanks is, so a
// send and a receive to our own rank make a plan, launch an ncclDevKernel_SendRecv kernel and
// start one ncclProfileP2p event each: with one GPU, that is the plugin path that can run.
// So the expected rows are the p2p operations; the all-reduces are expected to leave none.
//
// Two ranks as two processes on this one GPU is NOT possible: NCCL refuses a communicator whose
// ranks share a GPU ("Duplicate GPU detected").  Multi-rank collectives need >= 2 GPUs
// (comm_bound).
#include <nccl.h>

#include "common.cuh"

#define NK(call)                                                                                 \
  do {                                                                                           \
    ncclResult_t r_ = (call);                                                                    \
    if (r_ != ncclSuccess) {                                                                     \
      std::fprintf(stderr, "%s:%d %s: %s\n", __FILE__, __LINE__, #call, ncclGetErrorString(r_)); \
      std::exit(1);                                                                              \
    }                                                                                            \
  } while (0)

namespace {

constexpr int kGroupedAllReduces = 3;  // one group, one plan when nRanks > 1
constexpr int kSelfPairs = 2;          // send/receive pairs to our own rank, in one group
constexpr size_t kCount = (4u << 20) / sizeof(float);  // 4 MiB per buffer

}  // namespace

int main(int argc, char** argv) {
  ExampleArgs args(argc, argv, 20);
  Marks marks(args.marks);  // cuInit first: the library is loaded before NCCL reads its plugin
  int version = 0;
  NK(ncclGetVersion(&version));
  CK(cudaSetDevice(0));
  ncclComm_t comm = nullptr;
  int dev = 0;
  NK(ncclCommInitAll(&comm, 1, &dev));
  int nranks = 0;
  NK(ncclCommCount(comm, &nranks));
  cudaStream_t stream = nullptr;
  CK(cudaStreamCreate(&stream));
  // Buffers: in[i] -> out[i] for the all-reduces (out of place: a real copy even with 1 rank),
  // send[p] -> recv[p] for the pairs.
  float* bufs[2 * (1 + kGroupedAllReduces) + 2 * kSelfPairs] = {};
  for (float*& b : bufs) {
    CK(cudaMalloc(&b, kCount * sizeof(float)));
    CK(cudaMemset(b, 0, kCount * sizeof(float)));
  }
  float** ar_in = bufs;
  float** ar_out = bufs + (1 + kGroupedAllReduces);
  float** p2p_send = bufs + 2 * (1 + kGroupedAllReduces);
  float** p2p_recv = p2p_send + kSelfPairs;

  const long long ms = cycles_per_ms();
  long long allreduce_calls = 0, p2p_calls = 0;
  const double t0 = now_ms();
  for (int i = 0; i < args.steps; ++i) {
    marks.step_begin(i);
    // The "forward/backward": 10 ms, so the step is compute-bound by design.  With 1 ms (the
    // first H200 run) the per-step NCCL launches were ~4 % of the step and one 3 ms host stall
    // in step 16 of 20 made the run "HIGHLY launch-bound" (16.5 %): the example was too short
    // to be read, not the verdict wrong.
    spin_kernel<<<132, 128, 0, stream>>>(10 * ms);
    NK(ncclAllReduce(ar_in[0], ar_out[0], kCount, ncclFloat, ncclSum, comm, stream));
    NK(ncclGroupStart());
    for (int k = 1; k <= kGroupedAllReduces; ++k)
      NK(ncclAllReduce(ar_in[k], ar_out[k], kCount, ncclFloat, ncclSum, comm, stream));
    NK(ncclGroupEnd());
    allreduce_calls += 1 + kGroupedAllReduces;
    NK(ncclGroupStart());
    for (int p = 0; p < kSelfPairs; ++p) {
      NK(ncclSend(p2p_send[p], kCount, ncclFloat, /*peer=*/0, comm, stream));
      NK(ncclRecv(p2p_recv[p], kCount, ncclFloat, /*peer=*/0, comm, stream));
    }
    NK(ncclGroupEnd());
    p2p_calls += 2 * kSelfPairs;
    CK(cudaStreamSynchronize(stream));
    marks.step_end();
  }
  const double elapsed = now_ms() - t0;
  // One line for check.sh (key=value); expected plugin rows = p2p_calls (see the top comment).
  std::printf(
      "nccl_allreduce: nccl_version=%d nranks=%d steps=%d allreduce_calls=%lld p2p_calls=%lld "
      "p2p_plans=%d expected_plugin_rows=%lld\n",
      version, nranks, args.steps, allreduce_calls, p2p_calls, args.steps,
      nranks == 1 ? p2p_calls : allreduce_calls + p2p_calls);
  std::printf("nccl_allreduce: %d steps in %.1f ms\n", args.steps, elapsed);
  NK(ncclCommDestroy(comm));  // finalize: the plugin (and a forwarded one) see it
  for (float* b : bufs) CK(cudaFree(b));
  CK(cudaStreamDestroy(stream));
  return 0;
}
