/* Simulated CUDA device: the "sim runtime" C API exported by the fake driver libcuda.so.1.
 *
 * Scenario programs and tests drive a virtual GPU through these calls.  Each call looks, to a
 * CUPTI client (e.g. libgpuacct.so through the fake libcupti.so.13), like the matching CUDA
 * runtime call: the same CUPTI_RUNTIME_TRACE_CBID_* callback ids, API records, kernel / memcpy /
 * memset / synchronization records and correlation ids a real GPU would produce.
 *
 * Time model (see README.md): one nanosecond clock shared by the host and the GPU.  In the
 * default `virtual` mode it only moves through sim calls, so a scenario's timeline is exact.
 * It is the process's CLOCK_REALTIME: this library interposes clock_gettime(CLOCK_REALTIME) for
 * every object that resolves it through the global scope (the program and the libraries it, or
 * the driver, loads), so host-side timestamps taken with the ordinary clock are sim times.
 *   - an API call takes `launch_cost` ns of host time (default 4000);
 *   - a GPU op starts at max(stream free time, API start + launch_latency (default 5000));
 *   - ops on one stream run in order, streams run concurrently (no SM / copy-engine contention);
 *   - synchronizing calls and pageable / synchronous copies move the host clock to completion.
 *
 * All functions are thread-safe.  Integer results: 0 = success, SIM_ERR_* otherwise.
 */
#ifndef GPUACCT_TESTS_SIM_SIM_CUDA_H_
#define GPUACCT_TESTS_SIM_SIM_CUDA_H_

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(__GNUC__)
#define SIM_EXPORT __attribute__((visibility("default")))
#else
#define SIM_EXPORT
#endif

enum {
  SIM_OK = 0,
  SIM_ERR_INVALID = 1,         /* bad handle / argument */
  SIM_ERR_NOT_INITIALIZED = 2, /* simInit not called (or simShutdown called) */
};

typedef struct simStream_st* simStream_t; /* also usable as a cudaStream_t in CUPTI params */
typedef struct simGraph_st* simGraph_t;

typedef enum {
  SIM_MEMCPY_H2D = 1,
  SIM_MEMCPY_D2H = 2,
  SIM_MEMCPY_D2D = 3,
  SIM_MEMCPY_P2P = 4, /* to device (stream's device + 1) % num_devices */
} simMemcpyKind;

typedef enum { SIM_CLOCK_VIRTUAL = 0, SIM_CLOCK_HYBRID = 1 } simClockMode;

/* Calls cuInit(0) (which loads CUDA_INJECTION64_PATH once per process) and creates one primary
 * context per device (CUPTI resource callback CONTEXT_CREATED).  A second simInit without
 * simShutdown is a no-op returning SIM_OK. */
SIM_EXPORT int simInit(int num_devices);
/* Destroys the contexts (CONTEXT_DESTROY_STARTING callbacks).  Pending GPU work is kept in the
 * timeline; call a synchronize first if the program should wait for it. */
SIM_EXPORT void simShutdown(void);
/* Test helper: forget all devices, streams and graphs, reset the clock and re-read every
 * GPUACCT_SIM_* variable (also resets the fake CUPTI's state when it is loaded).  cuInit's
 * injection stays loaded: that happens once per process, as with the real driver. */
SIM_EXPORT void simReset(void);
SIM_EXPORT int simNumDevices(void);

SIM_EXPORT simStream_t simStreamCreate(int device);
/* The device's default stream (CUPTI stream id 7, like the legacy NULL stream).  It behaves like
 * an ordinary stream: no implicit synchronization with other streams. */
SIM_EXPORT simStream_t simDefaultStream(int device);
SIM_EXPORT uint32_t simStreamId(simStream_t stream); /* CUPTI streamId, 0 on a bad handle */
SIM_EXPORT int simStreamDevice(simStream_t stream);  /* -1 on a bad handle */

/* cudaLaunchKernel (runtime API).  `name` is copied (interned for the life of the process). */
SIM_EXPORT int simLaunchKernel(simStream_t stream, const char* name, uint64_t gpu_ns);
/* Same, reported as the driver API cuLaunchKernel (CUPTI_CB_DOMAIN_DRIVER_API). */
SIM_EXPORT int simCuLaunchKernel(simStream_t stream, const char* name, uint64_t gpu_ns);
/* cudaLaunchKernel as the real runtime does it: the runtime call (entered at t) makes a driver
 * call cuLaunchKernel [t + pre_ns, t + pre_ns + launch_cost) that submits the kernel (it starts
 * at max(stream free, driver call start + latency)), then the runtime returns tail_ns after the
 * driver call did.  CUPTI sees both: RUNTIME and DRIVER callbacks (runtime ENTER, driver ENTER,
 * driver EXIT, runtime EXIT) and records, with correlation ids as simSetNestedIds says. */
SIM_EXPORT int simLaunchKernelNested(simStream_t stream, const char* name, uint64_t gpu_ns,
                                     uint64_t pre_ns, uint64_t tail_ns);

/* Correlation ids of a nested launch (env GPUACCT_SIM_NESTED_IDS = shared | runtime | driver):
 * one id shared by the runtime and the driver call, or an id each with the kernel carrying the
 * runtime call's or the driver call's. */
typedef enum {
  SIM_NESTED_SHARED_ID = 0,
  SIM_NESTED_OP_CARRIES_RUNTIME_ID = 1,
  SIM_NESTED_OP_CARRIES_DRIVER_ID = 2,
} simNestedIds;
SIM_EXPORT void simSetNestedIds(simNestedIds mode);

/* An NCCL-style collective: a kernel named ncclDevKernel_AllReduce_Sum_f32_RING_LL. */
SIM_EXPORT int simNcclAllReduce(simStream_t stream, uint64_t gpu_ns);

/* For work whose duration depends on other processes (tests/sim/fake_nccl: a collective ends
 * when its slowest rank arrived plus the transfer).  simNextOpStart is the GPU start an op
 * launched on `stream` right now would get: max(stream free, now + latency); 0 on a bad handle.
 * It is exact for the next launch of the calling thread when no other thread launches on that
 * stream or moves the clock in between.  simLaunchKernelUntil is a cudaLaunchKernel whose
 * kernel runs from its ordinary start to end_ns (or ends at once if end_ns is not later);
 * *start_ns (may be NULL) receives the start it got. */
SIM_EXPORT uint64_t simNextOpStart(simStream_t stream);
SIM_EXPORT int simLaunchKernelUntil(simStream_t stream, const char* name, uint64_t end_ns,
                                    uint64_t* start_ns);

/* cudaMemcpyAsync (cudaMemcpyPeerAsync for P2P).  pageable != 0 with H2D or D2H blocks the host
 * until the copy finished, like real CUDA. */
SIM_EXPORT int simMemcpyAsync(simStream_t stream, simMemcpyKind kind, uint64_t bytes,
                              uint64_t gpu_ns, int pageable);
/* cudaMemcpy: synchronous for the host (waits for the copy, which waits for the stream). */
SIM_EXPORT int simMemcpy(simStream_t stream, simMemcpyKind kind, uint64_t bytes, uint64_t gpu_ns);
SIM_EXPORT int simMemsetAsync(simStream_t stream, uint64_t bytes, uint64_t gpu_ns);

SIM_EXPORT int simStreamSynchronize(simStream_t stream);
/* cudaDeviceSynchronize of `device`; device < 0 waits for every device (one call per device). */
SIM_EXPORT int simDeviceSynchronize(int device);

/* A graph is an ordered list of kernels that run back to back on the launch stream.  The
 * records carry graphId / graphNodeId and the correlation id of the cudaGraphLaunch record. */
SIM_EXPORT simGraph_t simGraphCreate(void);
SIM_EXPORT int simGraphAddKernel(simGraph_t graph, const char* name, uint64_t gpu_ns);
SIM_EXPORT int simGraphLaunch(simStream_t stream, simGraph_t graph);
SIM_EXPORT uint32_t simGraphId(simGraph_t graph);

/* Host work (CPU compute, data loading): advances the host clock by ns.  No CUDA call. */
SIM_EXPORT void simHostWork(uint64_t ns);

/* The sim clock (same value cuptiGetTimestamp returns). */
SIM_EXPORT uint64_t simNow(void);
/* The planted host clock error of this process (env GPUACCT_SIM_CLOCK_OFFSET_NS, signed ns,
 * default 0): simNow() - simClockOffset() is the true time, shared by processes started with
 * the same GPUACCT_SIM_CLOCK_BASE_NS (the virtual clock's start; default CLOCK_REALTIME). */
SIM_EXPORT int64_t simClockOffset(void);
SIM_EXPORT simClockMode simGetClockMode(void);

/* Timing parameters; defaults from GPUACCT_SIM_LAUNCH_COST_NS / GPUACCT_SIM_LAUNCH_LATENCY_NS
 * (4000 / 5000).  Scenarios set them to plant an exact timeline. */
SIM_EXPORT void simSetLaunchCost(uint64_t ns);
SIM_EXPORT uint64_t simGetLaunchCost(void);
SIM_EXPORT void simSetLaunchLatency(uint64_t ns);
SIM_EXPORT uint64_t simGetLaunchLatency(void);

/* Totals since the last simReset (for tests and scenario sanity checks). */
SIM_EXPORT uint64_t simKernelsLaunched(void);
/* Launch calls made by the program (kernel, collective and graph launches; a nested launch is
 * one): what a profiler should count as launches. */
SIM_EXPORT uint64_t simLaunchCalls(void);

/* Device memory cuDeviceTotalMem reports (env GPUACCT_SIM_DEVICE_MEMORY, default 80 GiB). */
SIM_EXPORT uint64_t simDeviceMemory(void);

/* Hardware counters the fake CUPTI's PM sampling reads (tests/sim/README.md, "Hardware
 * counters"): planted per device as percentages, constant over [begin_ns, end_ns) of the sim
 * clock; a later plant over the same time replaces the earlier one there; time nothing was
 * planted over reads 0.  The quantities, in this order: */
enum simCounter {
  SIM_COUNTER_SM_ACTIVE = 0,         /* SM cycles active */
  SIM_COUNTER_TENSOR_ACTIVE = 1,     /* tensor pipes active */
  SIM_COUNTER_DRAM = 2,              /* DRAM throughput */
  SIM_COUNTER_SM_THROUGHPUT = 3,     /* SM throughput (the compute side's busiest unit) */
  SIM_COUNTER_MEMORY_THROUGHPUT = 4, /* memory throughput (L2 / DRAM / L1, the busiest) */
  SIM_COUNTER_COUNT = 5
};
SIM_EXPORT void simPlantCounters(int device, uint64_t begin_ns, uint64_t end_ns,
                                 const double values[SIM_COUNTER_COUNT]);
/* The time-weighted mean of each planted quantity over [begin_ns, end_ns) on `device`. */
SIM_EXPORT void simCounterMean(int device, uint64_t begin_ns, uint64_t end_ns,
                               double out[SIM_COUNTER_COUNT]);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* GPUACCT_TESTS_SIM_SIM_CUDA_H_ */
