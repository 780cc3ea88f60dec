// One rank of a simulated data-parallel training job (tests/e2e/run_job.py starts N of them):
// the simulated device, the fake NCCL (tests/sim/fake_nccl) and, injected by the fake driver,
// libgpuacct.so.  Rank and size come from RANK / WORLD_SIZE, as under torchrun.
//
// Per step (L = 4 us launch cost, lat = 5 us launch latency):
//   data wait     --data-ms (this rank's; a straggler gets more) inside a data range
//   forward       --fwd-kernels kernels of 1 ms on the compute stream
//   backward      --buckets buckets, each --bwd-kernels kernels of 1.5 ms, then a synchronize
//                 of the compute stream (the sim has no events: the gradient dependency) and
//                 the bucket's AllReduce (--bucket-mib MiB, bf16) on the comm stream, which
//                 overlaps the next bucket's backward
//   [--mix]       an AllGather and a ReduceScatter of 8 MiB and a ring Send/Recv group of 4 MiB
//   [--p2p-pairs=N] a group of N ring Send/Recv pairs of 1 MiB each (to rank+1, from rank-1; a
//                 single rank sends to itself): NCCL runs them as SendRecv kernels that each
//                 carry several of the group's operations
//   [--grouped-ag-rs] a group of an AllGather (4 MiB) and a ReduceScatter (4 MiB): one kernel
//                 plan for both (the fake fuses a group's collectives)
//   optimizer     a synchronize of the comm stream, 2 kernels of 0.5 ms, a device synchronize
// --data-steps=K/M gives this rank its --data-ms only on steps i with i % M < K (the others
// wait the default 2 ms): a straggler on some steps.  --link-slowdown=F with
// --link-slow-every=M makes the link F times slower on steps i with i % M == M - 1 (M = 1: every
// step; simncclSetLinkSlowdown).  --device-per-local-rank runs the rank on device LOCAL_RANK
// (as torchrun's ranks of one host use devices 0, 1, ...), else device 0.
// --compute-scale=X makes every compute kernel X times longer (a slow GPU).  --jitter=F varies
// every step of every rank: its compute kernels and its data wait each take a factor drawn
// uniformly from [1-F, 1+F] (seeded by --seed, the rank and the step: a rerun is the same job),
// so that instances do not all look alike.  --tp=K splits the
// ranks into tensor-parallel groups of K consecutive ranks: each group has its own communicator
// (a TP AllReduce of --tp-mib MiB after the forward kernels, on a stream of its own, waited
// for), and the data-parallel communicator holds the ranks with the same position in their
// group (world / K ranks) instead of all of them.  Communicator hashes: --comm-hash for the
// data-parallel one, xor'ed with 0x100 * (its index + 1) when --tp > 1; the TP groups' the
// hash xor'ed with 0x7470000000000000 + group index.
// Steps are marked through the gpuacct C API (--marks=capi) or NVTX (--marks=nvtx).  Each step
// is a line of the fake NCCL's truth file: {"kind":"step","rank","step","host_begin_ns",
// "host_end_ns","true_host_begin_ns","true_host_end_ns","data_wait_ns","compute_ns" (the
// step's compute kernels, summed)}.
//
// Exit status: 0 ok, 2 usage, 4 the fake NCCL failed (its message is on stderr).
#include <gpuacct/gpuacct_dynamic.h>
#include <nvtx3/nvToolsExt.h>

#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "sim_cuda.h"
#include "simnccl.h"

namespace {

constexpr uint64_t kUs = 1000;
constexpr uint64_t kMs = 1000 * kUs;
constexpr uint64_t kMiB = 1ull << 20;

struct Options {
  int steps = 30;
  double data_ms = 2.0;
  int fwd_kernels = 6;
  int buckets = 2;
  int bwd_kernels = 3;
  uint64_t bucket_mib = 64;
  bool mix = false;
  int p2p_pairs = 0;
  bool grouped_ag_rs = false;
  bool nvtx = false;
  int nnodes = 1;
  uint64_t comm_hash = 0x9f2c0a11d2e4b7aaull;
  double compute_scale = 1.0;
  int tp = 1;
  uint64_t tp_mib = 16;
  double jitter = 0.0;
  uint64_t seed = 1;
  int data_steps = 1, data_every = 1;  // --data-steps=K/M
  double link_slowdown = 1.0;
  int link_slow_every = 1;
  bool device_per_local_rank = false;
};

// splitmix64: a fixed, seedable generator (the same numbers on every platform).
uint64_t Mix(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

// A factor in [1 - jitter, 1 + jitter] for (seed, rank, step, what).
double JitterFactor(const Options& o, int rank, int step, uint64_t what) {
  if (o.jitter == 0) return 1.0;
  const uint64_t h = Mix(Mix(Mix(o.seed ^ (what << 56)) ^ static_cast<uint64_t>(rank)) ^
                         static_cast<uint64_t>(step));
  const double u = static_cast<double>(h >> 11) / static_cast<double>(1ull << 53);  // [0, 1)
  return 1.0 + o.jitter * (2.0 * u - 1.0);
}

[[noreturn]] void Usage(const char* why) {
  std::fprintf(stderr,
               "job_driver: %s\nusage: job_driver [--steps=N] [--data-ms=X] [--fwd-kernels=N] "
               "[--buckets=N] [--bwd-kernels=N] [--bucket-mib=N] [--mix] [--marks=capi|nvtx] "
               "[--nnodes=N] [--comm-hash=HEX] [--compute-scale=X] [--tp=K] [--tp-mib=N] "
               "[--jitter=F] [--seed=N] [--p2p-pairs=N] [--grouped-ag-rs] [--data-steps=K/M] "
               "[--link-slowdown=F] [--link-slow-every=M] [--device-per-local-rank]   "
               "(RANK and WORLD_SIZE from the environment)\n",
               why);
  std::exit(2);
}

Options Parse(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto value = [&](const char* key) -> const char* {
      const size_t n = std::strlen(key);
      return a.compare(0, n, key) == 0 ? argv[i] + n : nullptr;
    };
    if (const char* v = value("--steps=")) {
      o.steps = std::atoi(v);
    } else if (const char* v2 = value("--data-ms=")) {
      o.data_ms = std::atof(v2);
    } else if (const char* v3 = value("--fwd-kernels=")) {
      o.fwd_kernels = std::atoi(v3);
    } else if (const char* v4 = value("--buckets=")) {
      o.buckets = std::atoi(v4);
    } else if (const char* v5 = value("--bwd-kernels=")) {
      o.bwd_kernels = std::atoi(v5);
    } else if (const char* v6 = value("--bucket-mib=")) {
      o.bucket_mib = std::strtoull(v6, nullptr, 10);
    } else if (const char* v7 = value("--nnodes=")) {
      o.nnodes = std::atoi(v7);
    } else if (const char* v8 = value("--comm-hash=")) {
      o.comm_hash = std::strtoull(v8, nullptr, 16);
    } else if (const char* v9 = value("--compute-scale=")) {
      o.compute_scale = std::atof(v9);
    } else if (const char* v10 = value("--tp=")) {
      o.tp = std::atoi(v10);
    } else if (const char* v11 = value("--tp-mib=")) {
      o.tp_mib = std::strtoull(v11, nullptr, 10);
    } else if (const char* v12 = value("--jitter=")) {
      o.jitter = std::atof(v12);
    } else if (const char* v13 = value("--seed=")) {
      o.seed = std::strtoull(v13, nullptr, 10);
    } else if (const char* v14 = value("--p2p-pairs=")) {
      o.p2p_pairs = std::atoi(v14);
    } else if (a == "--grouped-ag-rs") {
      o.grouped_ag_rs = true;
    } else if (const char* v15 = value("--data-steps=")) {
      if (std::sscanf(v15, "%d/%d", &o.data_steps, &o.data_every) != 2) Usage("bad --data-steps");
    } else if (const char* v16 = value("--link-slowdown=")) {
      o.link_slowdown = std::atof(v16);
    } else if (const char* v17 = value("--link-slow-every=")) {
      o.link_slow_every = std::atoi(v17);
    } else if (a == "--device-per-local-rank") {
      o.device_per_local_rank = true;
    } else if (a == "--mix") {
      o.mix = true;
    } else if (a == "--marks=nvtx") {
      o.nvtx = true;
    } else if (a != "--marks=capi") {
      Usage(("unknown argument " + a).c_str());
    }
  }
  if (o.steps <= 0 || o.data_ms < 0 || o.fwd_kernels < 0 || o.buckets <= 0 || o.bwd_kernels < 0 ||
      o.bucket_mib == 0 || o.nnodes <= 0 || o.compute_scale <= 0 || o.tp <= 0 || o.tp_mib == 0 ||
      o.jitter < 0 || o.jitter >= 1 || o.p2p_pairs < 0 || o.data_every <= 0 || o.data_steps < 0 ||
      o.data_steps > o.data_every || o.link_slowdown < 1 || o.link_slow_every <= 0) {
    Usage("bad value");
  }
  return o;
}

int EnvInt(const char* name, int fallback) {
  const char* v = std::getenv(name);
  return v != nullptr && *v != '\0' ? std::atoi(v) : fallback;
}

void Check(int rc, const char* what) {
  if (rc == SIMNCCL_OK) return;
  std::fprintf(stderr, "job_driver: %s failed (simnccl error %d)\n", what, rc);
  std::exit(4);
}

// The extra collectives of --mix: one of each kind the fake NCCL has.
void MixedCollectives(simncclComm_t comm, simStream_t s, int rank, int world) {
  Check(simncclAllGather(8 * kMiB, simncclBfloat16, comm, s), "AllGather");
  Check(simncclReduceScatter(8 * kMiB, simncclFloat32, comm, s), "ReduceScatter");
  Check(simncclGroupStart(), "GroupStart");
  Check(simncclSend(4 * kMiB, simncclBfloat16, (rank + 1) % world, comm, s), "Send");
  Check(simncclRecv(4 * kMiB, simncclBfloat16, (rank + world - 1) % world, comm, s), "Recv");
  Check(simncclGroupEnd(), "GroupEnd");
}

// --p2p-pairs: one group of `pairs` ring sends and receives (a single rank: to itself).
void P2pPairs(simncclComm_t comm, simStream_t s, int rank, int world, int pairs) {
  Check(simncclGroupStart(), "GroupStart");
  for (int k = 0; k < pairs; ++k) {
    Check(simncclSend(kMiB, simncclFloat32, (rank + 1) % world, comm, s), "Send");
    Check(simncclRecv(kMiB, simncclFloat32, (rank + world - 1) % world, comm, s), "Recv");
  }
  Check(simncclGroupEnd(), "GroupEnd");
}

// --grouped-ag-rs: an AllGather and a ReduceScatter in one group (one kernel plan).
void GroupedAllGatherReduceScatter(simncclComm_t comm, simStream_t s) {
  Check(simncclGroupStart(), "GroupStart");
  Check(simncclAllGather(4 * kMiB, simncclBfloat16, comm, s), "AllGather");
  Check(simncclReduceScatter(4 * kMiB, simncclBfloat16, comm, s), "ReduceScatter");
  Check(simncclGroupEnd(), "GroupEnd");
}

// One rank's job: its streams and communicators, and a step of the timeline above.
struct Job {
  Options o;
  int rank = 0;
  int world = 1;
  int device = 0;  // LOCAL_RANK with --device-per-local-rank
  const gpuacct_dyn_api* api = nullptr;
  simStream_t compute = nullptr;
  simStream_t comm_stream = nullptr;
  simStream_t tp_stream = nullptr;
  simncclComm_t comm = nullptr;
  simncclComm_t tp_comm = nullptr;
  double step_scale = 1.0;      // this step's compute factor (--compute-scale, --jitter)
  uint64_t step_compute = 0;    // the step's compute kernels so far (the truth's compute_ns)

  uint64_t Scaled(uint64_t ns) {
    const auto d = static_cast<uint64_t>(static_cast<double>(ns) * step_scale);
    step_compute += d;
    return d;
  }

  void Init() {
    simSetLaunchCost(4 * kUs);
    simSetLaunchLatency(5 * kUs);
    api = gpuacct_dyn();
    compute = simStreamCreate(device);
    comm_stream = simStreamCreate(device);
    if (o.tp == 1) {
      Check(simncclCommInitRank(&comm, world, rank, o.comm_hash, "job_dp", o.nnodes), "CommInit");
      return;
    }
    const int group = rank / o.tp, pos = rank % o.tp;
    const uint64_t dp_salt = uint64_t{0x100} * (static_cast<uint64_t>(pos) + 1);
    const uint64_t tp_salt = uint64_t{0x7470000000000000} + static_cast<uint64_t>(group);
    Check(simncclCommInitRank(&comm, world / o.tp, group, o.comm_hash ^ dp_salt, "job_dp",
                              o.nnodes),
          "CommInit");
    Check(simncclCommInitRank(&tp_comm, o.tp, pos, o.comm_hash ^ tp_salt, "job_tp", 1),
          "CommInit TP");
    tp_stream = simStreamCreate(device);
  }

  void Mark(bool open, const char* nvtx_name, int step) const {
    if (o.nvtx) {
      if (open) {
        nvtxRangePushA(nvtx_name);
      } else {
        nvtxRangePop();
      }
    } else if (step >= 0) {
      if (open) {
        api->step_begin(step);
      } else {
        api->step_end();
      }
    } else if (open) {
      api->data_push(nvtx_name);
    } else {
      api->data_pop();
    }
  }

  void Step(int i, double data_ms) {
    if (i % o.data_every >= o.data_steps) data_ms = Options().data_ms;
    const double slowdown = i % o.link_slow_every == o.link_slow_every - 1 ? o.link_slowdown : 1.0;
    if (o.link_slowdown != 1.0) Check(simncclSetLinkSlowdown(slowdown), "SetLinkSlowdown");
    step_scale = o.compute_scale * JitterFactor(o, rank, i, 1);
    step_compute = 0;
    const auto data_ns = static_cast<uint64_t>(data_ms * JitterFactor(o, rank, i, 2) *
                                               static_cast<double>(kMs));
    const uint64_t begin = simNow();
    Mark(true, "train_step", i);
    Mark(true, "dataloader", -1);
    simHostWork(data_ns);
    Mark(false, "dataloader", -1);
    for (int k = 0; k < o.fwd_kernels; ++k) {
      simLaunchKernel(compute, "fwd_gemm_kernel", Scaled(kMs));
    }
    if (tp_comm != nullptr) {  // the TP all-reduce of the activations, waited for
      simStreamSynchronize(compute);
      Check(simncclAllReduce(o.tp_mib * kMiB, simncclBfloat16, tp_comm, tp_stream),
            "TP AllReduce");
      simStreamSynchronize(tp_stream);
    }
    for (int b = 0; b < o.buckets; ++b) {
      for (int k = 0; k < o.bwd_kernels; ++k) {
        simLaunchKernel(compute, "bwd_gemm_kernel", Scaled(1500 * kUs));
      }
      simStreamSynchronize(compute);
      Check(simncclAllReduce(o.bucket_mib * kMiB, simncclBfloat16, comm, comm_stream),
            "AllReduce");
    }
    if (o.mix) MixedCollectives(comm, comm_stream, rank / o.tp, world / o.tp);
    if (o.p2p_pairs > 0) P2pPairs(comm, comm_stream, rank / o.tp, world / o.tp, o.p2p_pairs);
    if (o.grouped_ag_rs) GroupedAllGatherReduceScatter(comm, comm_stream);
    simStreamSynchronize(comm_stream);
    for (int k = 0; k < 2; ++k) {
      simLaunchKernel(compute, "optimizer_step_kernel", Scaled(500 * kUs));
    }
    simDeviceSynchronize(device);
    const uint64_t end = simNow();
    Mark(false, "train_step", i);
    const uint64_t offset = static_cast<uint64_t>(simClockOffset());
    char line[512];
    std::snprintf(line, sizeof(line),
                  "{\"kind\":\"step\",\"rank\":%d,\"step\":%d,\"host_begin_ns\":%" PRIu64
                  ",\"host_end_ns\":%" PRIu64 ",\"true_host_begin_ns\":%" PRIu64
                  ",\"true_host_end_ns\":%" PRIu64 ",\"data_wait_ns\":%" PRIu64
                  ",\"compute_ns\":%" PRIu64 "}",
                  rank, i, begin, end, begin - offset, end - offset, data_ns, step_compute);
    Check(simncclTruthNote(line), "truth note");
  }
};

}  // namespace

int main(int argc, char** argv) {
  Job job;
  job.o = Parse(argc, argv);
  job.rank = EnvInt("RANK", 0);
  job.world = EnvInt("WORLD_SIZE", 1);
  if (job.world <= 0 || job.rank < 0 || job.rank >= job.world) {
    Usage("RANK / WORLD_SIZE out of range");
  }
  if (job.world % job.o.tp != 0) Usage("--tp does not divide WORLD_SIZE");
  if (job.o.device_per_local_rank) job.device = EnvInt("LOCAL_RANK", 0);
  if (job.device < 0 || simInit(job.device + 1) != SIM_OK) {
    std::fprintf(stderr, "job_driver: simInit failed\n");
    return 2;
  }
  job.Init();
  if (job.o.nvtx) nvtxDomainCreateA("job_driver");  // the NVTX loader's first-call cost here
  for (int i = 0; i < job.o.steps; ++i) job.Step(i, job.o.data_ms);
  if (!job.o.nvtx) job.api->flush();
  const int profiler_version = simncclProfilerVersion(job.comm);
  Check(simncclCommDestroy(job.comm), "CommDestroy");
  if (job.tp_comm != nullptr) Check(simncclCommDestroy(job.tp_comm), "CommDestroy TP");
  simShutdown();
  std::printf("rank %d done, profiler api v%d\n", job.rank, profiler_version);
  return 0;
}
