// NCCL's profiler-plugin interface, versions 1-5, declared for the fake NCCL and the recording
// test plugin of this folder.  Written here from the documented ABI (NVIDIA/nccl
// ext-profiler/README.md and the layouts of ext-profiler/example/nccl/profiler_v1.h ... v5.h):
// member order and types follow the ABI, names are ours.
//
//   - the library exports a struct ncclProfiler_vN: a name, then init, startEvent, stopEvent,
//     recordEventState, finalize;
//   - init: v1-v3 (context, mask); v4 (context, mask, commName, commHash, nNodes, nranks, rank,
//     logger); v5 (context, commId, mask, commName, nNodes, nranks, rank, logger);
//   - an event descriptor is {type, parentObj, rank, union by type}; type is uint8_t up to v4,
//     uint64_t in v5; v1-v3 name the communicator in each coll / p2p event, v4+ in init;
//   - v1 gives func, datatype, algo, proto as enum numbers, v2+ as strings;
//   - KernelCh events exist from v3; v4+ carry the GPU start time (pTimer) in the descriptor and
//     the stop time through recordEventState(kKernelChStop).
#ifndef GPUACCT_TESTS_SIM_FAKE_NCCL_PROFILER_ABI_H_
#define GPUACCT_TESTS_SIM_FAKE_NCCL_PROFILER_ABI_H_

#include <sys/types.h>

#include <cstddef>
#include <cstdint>

namespace simprof {

// Event type bits (the activation mask a plugin's init sets uses the same bits).
enum : uint64_t {
  kGroup = 1u << 0,
  kColl = 1u << 1,
  kP2p = 1u << 2,
  kProxyOp = 1u << 3,
  kProxyStep = 1u << 4,
  kProxyCtrl = 1u << 5,
  kKernelCh = 1u << 6,
  kNetPlugin = 1u << 7,
  kGroupApi = 1u << 8,      // v5
  kCollApi = 1u << 9,       // v5
  kP2pApi = 1u << 10,       // v5
  kKernelLaunch = 1u << 11, // v5
};

// Event states (recordEventState) this fake uses; the enum is int-sized in C.
enum : int {
  kKernelChStop = 22,         // v4+: KernelCh stop, pTimer in the state args
  kGroupStartApiStop = 23,    // v5: ncclGroupStart returned
  kEndGroupApiStart = 24,     // v5: ncclGroupEnd entered
};

using Result = int;  // ncclResult_t; 0 = ncclSuccess
using Logger = void (*)(int level, unsigned long flags, const char* file, int line,
                        const char* fmt, ...);

// ---- v1 ----------------------------------------------------------------------------------------
struct CollV1 {
  const char* comm_name;
  uint64_t comm_hash;
  uint64_t seq;
  uint8_t func;  // ncclFunc numbering: Broadcast 0, Reduce 1, AllGather 2, ReduceScatter 3,
                 // AllReduce 4, SendRecv 5, Send 6, Recv 7
  const void* send_buff;
  void* recv_buff;
  size_t count;
  int root;
  uint8_t datatype;  // ncclDataType_t
  uint32_t op;
  size_t traffic_bytes;
  uint8_t max_channels;
  uint8_t warps;
  uint8_t algo;   // TREE 0, RING 1, ...
  uint8_t proto;  // LL 0, LL128 1, SIMPLE 2
  int is_collnet;
  int is_nvls;
};
struct P2pV1 {
  const char* comm_name;
  uint64_t comm_hash;
  uint8_t func;
  void* buff;
  uint8_t datatype;
  size_t count;
  int peer;
};
struct ProxyOpDescr {
  pid_t pid;
  uint8_t channel;
  int peer;
  int steps;
  int chunk_size;
  int is_send;
};
struct DescrV1 {
  uint8_t type;
  void* parent;
  int rank;
  union {
    CollV1 coll;
    P2pV1 p2p;
    ProxyOpDescr proxy_op;
    struct { int step; } proxy_step;
  };
};

// ---- v2 / v3 -----------------------------------------------------------------------------------
struct CollV2 {
  const char* comm_name;
  uint64_t comm_hash;
  uint64_t seq;
  const char* func;
  const void* send_buff;
  void* recv_buff;
  size_t count;
  int root;
  const char* datatype;
  size_t traffic_bytes;
  uint8_t max_channels;
  uint8_t warps;
  const char* algo;
  const char* proto;
};
struct CollV3 {  // v2 without traffic_bytes
  const char* comm_name;
  uint64_t comm_hash;
  uint64_t seq;
  const char* func;
  const void* send_buff;
  void* recv_buff;
  size_t count;
  int root;
  const char* datatype;
  uint8_t max_channels;
  uint8_t warps;
  const char* algo;
  const char* proto;
};
struct P2pV2 {
  const char* comm_name;
  uint64_t comm_hash;
  const char* func;
  void* buff;
  const char* datatype;
  size_t count;
  int peer;
};
struct DescrV2 {
  uint8_t type;
  void* parent;
  int rank;
  union {
    CollV2 coll;
    P2pV2 p2p;
    ProxyOpDescr proxy_op;
    struct { int step; } proxy_step;
  };
};
struct DescrV3 {
  uint8_t type;
  void* parent;
  int rank;
  union {
    CollV3 coll;
    P2pV2 p2p;
    ProxyOpDescr proxy_op;
    struct { int step; } proxy_step;
    struct { uint8_t channel; } kernel_ch;
    struct { int64_t id; void* data; } net_plugin;
  };
};
union StateArgsV1 {  // v1-v3
  struct { size_t trans_size; int steps; } proxy_op;
  struct { int appended_proxy_ops; } proxy_ctrl;
};

// ---- v4 / v5 -----------------------------------------------------------------------------------
struct CollV4 {
  uint64_t seq;
  const char* func;
  const void* send_buff;
  void* recv_buff;
  size_t count;
  int root;
  const char* datatype;
  uint8_t channels;
  uint8_t warps;
  const char* algo;
  const char* proto;
};
struct CollV5 {  // v4 + the legacy group parent
  uint64_t seq;
  const char* func;
  const void* send_buff;
  void* recv_buff;
  size_t count;
  int root;
  const char* datatype;
  uint8_t channels;
  uint8_t warps;
  const char* algo;
  const char* proto;
  void* parent_group;
};
struct P2pV4 {
  const char* func;
  void* buff;
  const char* datatype;
  size_t count;
  int peer;
  uint8_t channels;
};
struct P2pV5 {
  const char* func;
  void* buff;
  const char* datatype;
  size_t count;
  int peer;
  uint8_t channels;
  void* parent_group;
};
struct KernelChV4 {
  uint8_t channel;
  uint64_t ptimer;  // GPU start time (globaltimer, ns)
};
struct DescrV4 {
  uint8_t type;
  void* parent;
  int rank;
  union {
    CollV4 coll;
    P2pV4 p2p;
    ProxyOpDescr proxy_op;
    struct { int step; } proxy_step;
    KernelChV4 kernel_ch;
    struct { int64_t id; void* data; } net_plugin;
  };
};
struct DescrV5 {
  uint64_t type;
  void* parent;
  int rank;
  union {
    struct { int graph_captured; int group_depth; } group_api;
    struct {
      const char* func;
      size_t count;
      const char* datatype;
      int root;
      void* stream;
      bool graph_captured;
    } coll_api;
    struct {
      const char* func;
      size_t count;
      const char* datatype;
      void* stream;
      bool graph_captured;
    } p2p_api;
    struct { void* stream; } kernel_launch;
    CollV5 coll;
    P2pV5 p2p;
    ProxyOpDescr proxy_op;
    struct { int step; } proxy_step;
    KernelChV4 kernel_ch;
    struct { int64_t id; void* data; } net_plugin;
  };
};
union StateArgsV4 {  // v4 / v5
  struct { size_t trans_size; } proxy_step;
  struct { int appended_proxy_ops; } proxy_ctrl;
  struct { void* data; } net_plugin;
  struct { uint64_t ptimer; } kernel_ch;  // GPU stop time
};

// ---- the exported tables -----------------------------------------------------------------------
using InitV1 = Result (*)(void** context, int* mask);
using InitV4 = Result (*)(void** context, int* mask, const char* comm_name, uint64_t comm_hash,
                          int nodes, int nranks, int rank, Logger log);
using InitV5 = Result (*)(void** context, uint64_t comm_id, int* mask, const char* comm_name,
                          int nodes, int nranks, int rank, Logger log);

template <typename Init, typename Descr, typename Args>
struct Table {
  const char* name;
  Init init;
  Result (*start_event)(void* context, void** handle, Descr* descr);
  Result (*stop_event)(void* handle);
  Result (*record_event_state)(void* handle, int state, Args* args);
  Result (*finalize)(void* context);
};
using TableV1 = Table<InitV1, DescrV1, StateArgsV1>;
using TableV2 = Table<InitV1, DescrV2, StateArgsV1>;
using TableV3 = Table<InitV1, DescrV3, StateArgsV1>;
using TableV4 = Table<InitV4, DescrV4, StateArgsV4>;
using TableV5 = Table<InitV5, DescrV5, StateArgsV4>;

// Layouts worked out by hand from the ABI (LP64): a change that moves a field fails here.
static_assert(offsetof(DescrV1, coll) == 24 && sizeof(CollV1) == 96);
static_assert(sizeof(CollV2) == 104 && sizeof(CollV3) == 96 && offsetof(CollV3, algo) == 80);
static_assert(offsetof(DescrV4, coll) == 24 && sizeof(CollV4) == 80);
static_assert(offsetof(CollV4, algo) == 64 && offsetof(KernelChV4, ptimer) == 8);
static_assert(offsetof(DescrV5, coll) == 24 && sizeof(CollV5) == 88 && sizeof(DescrV5) == 112);
static_assert(sizeof(StateArgsV1) == 16 && sizeof(StateArgsV4) == 8);

}  // namespace simprof

#endif  // GPUACCT_TESTS_SIM_FAKE_NCCL_PROFILER_ABI_H_
