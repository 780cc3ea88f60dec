/* A fake NCCL for the simulated device (libsimnccl.so): a tiny NCCL-like API that a simulated
 * job's rank processes call, so that a profiler sees what it sees under real NCCL:
 *
 *   - at communicator init it loads the profiler plugin named by NCCL_PROFILER_PLUGIN (a path,
 *     or NAME for libnccl-profiler-NAME.so; unset, empty or "none": no plugin), looks up
 *     ncclProfiler_v5, then v4 ... v1 (newest first, from GPUACCT_SIM_NCCL_PROFILER_API, the
 *     newest interface version this "NCCL" knows, default 5) and calls its init;
 *   - each collective: plugin Group / Coll (and for v5 GroupApi / CollApi / KernelLaunch)
 *     events around the enqueue, the kernel launched through the sim runtime with an NCCL
 *     kernel name (ncclDevKernel_AllReduce_Sum_bf16_RING_SIMPLE, ...), the Coll event stopped at
 *     the end of the enqueue (not of the GPU work), and, from a proxy thread once the sim clock
 *     passed the kernel's end, KernelCh events per channel (v3+; v4+ with the GPU start / stop
 *     times as pTimer), as real NCCL's proxy thread reports them;
 *   - finalize at communicator destroy.
 *
 * Cross-rank timing: ranks are separate processes with their own virtual clocks, started on a
 * common base (GPUACCT_SIM_CLOCK_BASE_NS) and each with its planted offset (sim_cuda.h
 * simClockOffset).  A collective's kernel on rank r starts at its own stream-ordered start S_r;
 * every rank's kernel ends at max_r(true S_r) + transfer time, the transfer computed from the
 * bytes and the slowest participating rank's link.  Ranks meet in a shared-memory file
 * (GPUACCT_SIM_NCCL_RENDEZVOUS) keyed by (communicator, sequence number); waiting there takes
 * real time, not simulated time.  A rank that does not arrive within GPUACCT_SIM_NCCL_TIMEOUT_S
 * (default 30) makes the call fail with a message naming the missing ranks.
 *
 * The truth: each rank appends one JSON object per line to GPUACCT_SIM_NCCL_TRUTH (see
 * README.md in this folder): its communicators and every collective with comm, seq, bytes and
 * local and true GPU start / end.
 *
 * Threads: one thread per communicator calls the API (as with NCCL, a communicator is not
 * thread-safe).  All functions return 0 on success, a SIMNCCL_ERR_* code otherwise. */
#ifndef GPUACCT_TESTS_SIM_FAKE_NCCL_SIMNCCL_H_
#define GPUACCT_TESTS_SIM_FAKE_NCCL_SIMNCCL_H_

#include <stdint.h>

#include "sim_cuda.h"

#ifdef __cplusplus
extern "C" {
#endif

enum {
  SIMNCCL_OK = 0,
  SIMNCCL_ERR_INVALID = 1,  /* bad argument or call order */
  SIMNCCL_ERR_SYSTEM = 2,   /* rendezvous file, truth file */
  SIMNCCL_ERR_TIMEOUT = 3,  /* some rank never arrived at a collective */
  SIMNCCL_ERR_SIM = 4,      /* the sim runtime refused a launch, or a stream was used elsewhere */
};

typedef enum {
  simncclInt8 = 0,
  simncclUint8 = 1,
  simncclInt32 = 2,
  simncclUint32 = 3,
  simncclInt64 = 4,
  simncclUint64 = 5,
  simncclFloat16 = 6,
  simncclFloat32 = 7,
  simncclFloat64 = 8,
  simncclBfloat16 = 9,
} simncclDataType_t; /* NCCL's ncclDataType_t numbering */

typedef struct simncclComm* simncclComm_t;

/* A communicator of `nranks` ranks, this process being `rank`; comm_hash is NCCL's commHash
 * (the same on every rank), name its commName (no '"', '\\' or control characters), nnodes
 * the number of hosts it spans.  Loads the
 * plugin (once per process) and calls its init (once per communicator). */
SIM_EXPORT int simncclCommInitRank(simncclComm_t* comm, int nranks, int rank, uint64_t comm_hash,
                        const char* name, int nnodes);
/* Waits until every KernelCh event is delivered, calls the plugin's finalize, frees `comm`. */
SIM_EXPORT int simncclCommDestroy(simncclComm_t comm);

/* Collectives.  `bytes` is the message size on this rank as NCCL counts it (count x datatype
 * size: the send size of an AllGather, the receive size of a ReduceScatter). */
SIM_EXPORT int simncclAllReduce(uint64_t bytes, simncclDataType_t type, simncclComm_t comm,
                     simStream_t stream);
SIM_EXPORT int simncclAllGather(uint64_t bytes, simncclDataType_t type, simncclComm_t comm,
                     simStream_t stream);
SIM_EXPORT int simncclReduceScatter(uint64_t bytes, simncclDataType_t type, simncclComm_t comm,
                         simStream_t stream);
/* Point to point: only inside a group, and every rank of the communicator must take part in
 * that group (e.g. a ring exchange): the group's sends and receives run as one SendRecv kernel
 * that all ranks of the communicator meet at, numbered by the communicator's own p2p count. */
SIM_EXPORT int simncclSend(uint64_t bytes, simncclDataType_t type, int peer, simncclComm_t comm,
                simStream_t stream);
SIM_EXPORT int simncclRecv(uint64_t bytes, simncclDataType_t type, int peer, simncclComm_t comm,
                simStream_t stream);
/* Groups: operations between start and end are enqueued at the end, in call order. */
SIM_EXPORT int simncclGroupStart(void);
SIM_EXPORT int simncclGroupEnd(void);

/* The profiler interface version in use for `comm` (1-5), 0 when no plugin is loaded. */
SIM_EXPORT int simncclProfilerVersion(simncclComm_t comm);
/* Appends a line (a JSON object, written as given) to this rank's truth file: the job driver's
 * own truth (steps, planted waits) next to the collectives'. */
SIM_EXPORT int simncclTruthNote(const char* json_object);
/* From now on this rank's link is `factor` times slower than GPUACCT_SIM_NCCL_LINK_GBPS (as
 * GPUACCT_SIM_NCCL_LINK_SLOWDOWN, which it replaces; 0: back to that setting): a link slow on
 * some steps only.  The transfer of an instance takes the slowest link of its ranks at the
 * moment each posted its arrival. */
SIM_EXPORT int simncclSetLinkSlowdown(double factor);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* GPUACCT_TESTS_SIM_FAKE_NCCL_SIMNCCL_H_ */
