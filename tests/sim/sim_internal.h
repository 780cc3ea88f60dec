// Private interface between the simulation engine (libcuda.so.1) and the fake CUPTI
// (libcupti.so.13).  Not for scenario programs.
//
// Why two libraries with a hook table: libgpuacct.so dlopen()s "libcupti.so.13" on its own, and
// the "no CUPTI" case is tested by leaving that library off the path.  So the engine must run
// without any tracer, and the tracer registers itself with the engine when it is loaded
// (constructor), through a plain C table so the boundary needs no C++ ABI agreement.
#ifndef GPUACCT_TESTS_SIM_SIM_INTERNAL_H_
#define GPUACCT_TESTS_SIM_SIM_INTERNAL_H_

#include <cuda.h>
#include <cupti_callbacks.h>
#include <stddef.h>
#include <stdint.h>

#include "sim_cuda.h"

extern "C" {

enum SimOpKind { SIM_OP_KERNEL = 1, SIM_OP_MEMCPY = 2, SIM_OP_MEMSET = 3 };

// One API invocation (runtime or driver domain), filled by the engine.
struct SimApiCall {
  CUpti_CallbackDomain domain;
  uint32_t cbid;
  const char* symbol_name;  // kernel name for launches, else NULL
  const void* params;       // the generated *_params struct for a few cbids, else NULL
  void* return_value;       // cudaError_t* / CUresult*
  CUcontext context;
  uint32_t context_id;
  uint32_t correlation_id;
  uint64_t correlation_data;  // shared between the ENTER and EXIT callbacks
  uint64_t start;             // set by the engine after API_ENTER
  uint64_t end;               // set by the engine before API_EXIT
  // Synchronizing calls (sync_type != 0): CUpti_ActivitySynchronizationType, plus the stream.
  uint32_t sync_type;
  uint32_t sync_stream_id;  // CUPTI_SYNCHRONIZATION_INVALID_VALUE for a context sync
  CUstream sync_stream;
  // A runtime launch whose driver call the engine makes itself (simLaunchKernelNested): the
  // fake CUPTI adds no driver callbacks of its own inside it (GPUACCT_SIM_INNER_DRIVER).
  uint8_t nests_driver;
  // The correlationData of those inner driver callbacks (shared by their ENTER and EXIT).
  uint64_t inner_correlation_data;
};

// One GPU operation produced by an API call.
struct SimGpuOp {
  SimOpKind kind;
  uint32_t device;
  uint32_t context_id;
  uint32_t stream_id;
  uint32_t correlation_id;
  uint64_t queued;  // API start (for latency timestamps)
  uint64_t start;
  uint64_t end;
  const char* name;  // interned kernel name
  uint32_t graph_id;
  uint64_t graph_node_id;
  uint64_t bytes;
  uint8_t copy_kind;  // CUpti_ActivityMemcpyKind
  uint8_t src_kind;   // CUpti_ActivityMemoryKind
  uint8_t dst_kind;
  uint8_t async;
  uint32_t src_device, dst_device, src_context_id, dst_context_id;
};

struct SimTracer {
  // Called on the API thread without any engine lock held.
  void (*api_enter)(SimApiCall* call);
  void (*api_exit)(SimApiCall* call, const SimGpuOp* ops, size_t num_ops);
  // CUPTI_CB_DOMAIN_RESOURCE events (context created / destroy starting, stream created).
  void (*resource)(uint32_t cbid, CUcontext context, CUstream stream);
  // simReset(): drop all tracer state and re-read the environment.
  void (*reset)(void);
  // CUPTI_CB_DOMAIN_RESOURCE graph node events (CUPTI_CBID_RESOURCE_GRAPHNODE_CREATED when
  // simGraphAddKernel adds one); `graph` is the simGraph_t, as a CUgraph.
  void (*graph_node)(uint32_t cbid, CUgraph graph);
};

// Exported by libcuda.so.1 (visibility default), used by libcupti.so.13.
SIM_EXPORT void simInternalSetTracer(const SimTracer* tracer);
SIM_EXPORT int simInternalContextInfo(CUcontext context, uint32_t* device, uint32_t* context_id);
SIM_EXPORT int simInternalStreamInfo(CUstream stream, uint32_t* device, uint32_t* stream_id);

}  // extern "C"

#endif  // GPUACCT_TESTS_SIM_SIM_INTERNAL_H_
