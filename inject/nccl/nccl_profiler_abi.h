// NCCL's profiler-plugin interface (versions 1 to 5), declared here from NCCL's documentation
// of the ABI (NVIDIA/nccl ext-profiler/README.md and the example's per-version headers): the
// same memory layout, our own names and words.  NCCL (2.23 and later) dlopen()s the library
// named by NCCL_PROFILER_PLUGIN and looks up one C object per version, newest first:
//
//   symbol            NCCL     what changed
//   ncclProfiler_v1   2.23     first version: func / datatype / algo / proto are small enum codes
//   ncclProfiler_v2   2.24     those four become strings
//   ncclProfiler_v3   2.26     kernel-channel and net-plugin events; trafficBytes gone
//   ncclProfiler_v4   2.27     init() gets the communicator (name, hash, nodes, ranks, rank,
//                             logger); comm name/hash leave the descriptors; GPU timer on
//                             kernel-channel events
//   ncclProfiler_v5   2.28     64-bit event type; API-level events (group, collective, p2p,
//                             kernel launch); init() takes the communicator id first
//
// Every layout below is asserted (sizes and field offsets for LP64, x86-64 / aarch64 Linux) so a
// change here that would move a field fails to compile.  The numbers are listed in
// docs/injection.md, "NCCL profiler plugin", for anyone writing the other side (tests/sim).
//
// Nothing here is NCCL's text: the field meanings are paraphrased in the comments.  What NCCL
// does not document and we assumed is marked ASSUMED.
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <cstdint>

namespace gpuacct::nccl_abi {

// ncclResult_t: an int-sized C enum; 0 is success.  The plugin returns 0 from every entry point
// (NCCL goes on without a profiler for a communicator whose init fails; we never want that).
using Result = int;
inline constexpr Result kSuccess = 0;

// The logger NCCL hands to init() (v4+): level, subsystem flags, file, line, printf format.
using Logger = void (*)(int level, unsigned long flags, const char* file, int line,
                        const char* fmt, ...);

// Event types: one bit each in the activation mask init() returns, and the descriptor's `type`.
enum EventType : uint64_t {
  kGroup = 1u << 0,         // a group of operations (ncclGroupStart/End) as NCCL runs it
  kColl = 1u << 1,          // one collective operation (the unit we record)
  kP2p = 1u << 2,           // one send or receive
  kProxyOp = 1u << 3,       // network proxy work for one channel of an operation (frequent)
  kProxyStep = 1u << 4,     // one step of that work (very frequent)
  kProxyCtrl = 1u << 5,     // the proxy thread's own state
  kKernelCh = 1u << 6,      // one channel of the operation's kernel (v3+; GPU timer from v4)
  kNetPlugin = 1u << 7,     // events defined by the network plugin (v3+)
  kGroupApi = 1u << 8,      // v5: the application's ncclGroupStart/End call
  kCollApi = 1u << 9,       // v5: the application's collective call (ncclAllReduce, ...)
  kP2pApi = 1u << 10,       // v5: the application's ncclSend / ncclRecv call
  kKernelLaunch = 1u << 11, // v5: NCCL launching its kernel
};

// recordEventState's state argument: an int-sized C enum.  We use none of the values; only the
// kernel-channel stop (ASSUMED value 22, v4+: its args carry the GPU stop timer) is named, for
// tests and for a plugin we forward to.
using EventState = int;
inline constexpr EventState kKernelChStopState = 22;

// ---- v1 (NCCL 2.23) -------------------------------------------------------------------------
// In v1 func, datatype, algo and proto are NCCL's internal enum codes (see nccl_profiler.cc for
// the tables we ASSUMED: ncclFunc_t, ncclDataType_t, NCCL_ALGO_*, NCCL_PROTO_* of NCCL 2.23).
struct CollV1 {
  const char* comm_name;   // the communicator's name (may be null)
  uint64_t comm_hash;      // the communicator's hash: the same on every rank of it
  uint64_t seq;            // per-communicator collective sequence number
  uint8_t func;            // ncclFunc_t code
  const void* send_buffer;
  void* recv_buffer;
  size_t count;            // elements
  int root;                // root rank (broadcast, reduce)
  uint8_t datatype;        // ncclDataType_t code
  uint32_t reduce_op;      // ncclRedOp_t
  size_t traffic_bytes;    // bytes NCCL expects to move
  uint8_t max_channels;
  uint8_t warps;
  uint8_t algo;            // NCCL_ALGO_* code
  uint8_t proto;           // NCCL_PROTO_* code
  int is_collnet;
  int is_nvls;
};
struct P2pV1 {
  const char* comm_name;
  uint64_t comm_hash;
  uint8_t func;      // ncclFunc_t code (send / recv)
  void* buffer;
  uint8_t datatype;  // ncclDataType_t code
  size_t count;
  int peer;          // the other rank
};
// Proxy events: same layout in every version; we never look inside.
struct ProxyOpAll {
  pid_t pid;
  uint8_t channel;
  int peer;
  int steps;
  int chunk_size;
  int is_send;
};
struct ProxyStepAll {
  int step;
};

// Common head of every descriptor.  v1-v4: `type` is one byte (an EventType value that fits).
struct DescrV1 {
  uint8_t type;
  void* parent;  // the handle the plugin returned for the parent event (a coll's group), or null
  int rank;      // the calling rank in its communicator
  union {
    CollV1 coll;
    P2pV1 p2p;
    ProxyOpAll proxy_op;
    ProxyStepAll proxy_step;
  };
};
// recordEventState's arguments, v1-v3.
union StateArgsV1 {
  struct {
    size_t transferred_bytes;
    int steps;
  } proxy_op;
  struct {
    int appended_proxy_ops;
  } proxy_ctrl;
};

// ---- v2 (NCCL 2.24) -------------------------------------------------------------------------
struct CollV2 {
  const char* comm_name;
  uint64_t comm_hash;
  uint64_t seq;
  const char* func;       // "AllReduce", "AllGather", ...
  const void* send_buffer;
  void* recv_buffer;
  size_t count;
  int root;
  const char* datatype;   // "ncclFloat32", "ncclBfloat16", ...
  size_t traffic_bytes;
  uint8_t max_channels;
  uint8_t warps;
  const char* algo;       // "RING", "TREE", ...
  const char* proto;      // "LL", "LL128", "Simple"
};
struct P2pV2 {
  const char* comm_name;
  uint64_t comm_hash;
  const char* func;  // "Send" / "Recv"
  void* buffer;
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
    ProxyOpAll proxy_op;
    ProxyStepAll proxy_step;
  };
};
using StateArgsV2 = StateArgsV1;

// ---- v3 (NCCL 2.26) -------------------------------------------------------------------------
struct CollV3 {
  const char* comm_name;
  uint64_t comm_hash;
  uint64_t seq;
  const char* func;
  const void* send_buffer;
  void* recv_buffer;
  size_t count;
  int root;
  const char* datatype;
  uint8_t max_channels;
  uint8_t warps;
  const char* algo;
  const char* proto;
};
using P2pV3 = P2pV2;
struct KernelChV3 {
  uint8_t channel;
};
struct NetPluginAll {
  int64_t id;
  void* data;
};
struct DescrV3 {
  uint8_t type;
  void* parent;
  int rank;
  union {
    CollV3 coll;
    P2pV3 p2p;
    ProxyOpAll proxy_op;
    ProxyStepAll proxy_step;
    KernelChV3 kernel_ch;
    NetPluginAll net_plugin;
  };
};
using StateArgsV3 = StateArgsV1;

// ---- v4 (NCCL 2.27) -------------------------------------------------------------------------
// The communicator moved to init(); descriptors no longer name it.
struct CollV4 {
  uint64_t seq;
  const char* func;
  const void* send_buffer;
  void* recv_buffer;
  size_t count;
  int root;
  const char* datatype;
  uint8_t channels;
  uint8_t warps;
  const char* algo;
  const char* proto;
};
struct P2pV4 {
  const char* func;
  void* buffer;
  const char* datatype;
  size_t count;
  int peer;
  uint8_t channels;
};
struct KernelChV4 {
  uint8_t channel;
  uint64_t gpu_timer;  // the GPU's globaltimer when the channel started
};
struct DescrV4 {
  uint8_t type;
  void* parent;
  int rank;
  union {
    CollV4 coll;
    P2pV4 p2p;
    ProxyOpAll proxy_op;
    ProxyStepAll proxy_step;
    KernelChV4 kernel_ch;
    NetPluginAll net_plugin;
  };
};
// recordEventState's arguments, v4 and v5 (one 8-byte member is read, by state).
union StateArgsV4 {
  struct {
    size_t transferred_bytes;
  } proxy_step;
  struct {
    int appended_proxy_ops;
  } proxy_ctrl;
  struct {
    void* data;
  } net_plugin;
  struct {
    uint64_t gpu_timer;  // the GPU's globaltimer when the channel stopped
  } kernel_ch;
};

// ---- v5 (NCCL 2.28) -------------------------------------------------------------------------
struct GroupApiV5 {
  int graph_captured;
  int depth;
};
struct CollApiV5 {
  const char* func;
  size_t count;
  const char* datatype;
  int root;
  void* stream;  // the cudaStream_t the application passed
  bool graph_captured;
};
struct P2pApiV5 {
  const char* func;
  size_t count;
  const char* datatype;
  void* stream;
  bool graph_captured;
};
struct KernelLaunchV5 {
  void* stream;
};
struct CollV5 {
  CollV4 v4;           // the v4 fields, in the same places
  void* parent_group;  // the group event's handle (v4 gave it as the descriptor's parent)
};
struct P2pV5 {
  P2pV4 v4;
  void* parent_group;
};
struct DescrV5 {
  uint64_t type;  // now 64 bits
  void* parent;   // for coll / p2p: the CollApi / P2pApi event's handle when that is active
  int rank;
  union {
    GroupApiV5 group_api;
    CollApiV5 coll_api;
    P2pApiV5 p2p_api;
    KernelLaunchV5 kernel_launch;
    CollV5 coll;
    P2pV5 p2p;
    ProxyOpAll proxy_op;
    ProxyStepAll proxy_step;
    KernelChV4 kernel_ch;
    NetPluginAll net_plugin;
  };
};
using StateArgsV5 = StateArgsV4;

// ---- the exported objects ------------------------------------------------------------------
// One per version.  init() is called once per communicator: it returns a context (passed back
// to startEvent and finalize) and the mask of event types wanted.  startEvent returns a handle
// (passed back to stopEvent, recordEventState, and as a child's `parent`).
template <typename Descr, typename StateArgs, typename Init>
struct ProfilerTable {
  const char* name;
  Init init;
  Result (*start_event)(void* context, void** handle, Descr* descr);
  Result (*stop_event)(void* handle);
  Result (*record_event_state)(void* handle, EventState state, StateArgs* args);
  Result (*finalize)(void* context);
};
using InitV1 = Result (*)(void** context, int* activation_mask);
using InitV4 = Result (*)(void** context, int* activation_mask, const char* comm_name,
                          uint64_t comm_hash, int nodes, int nranks, int rank, Logger log);
using InitV5 = Result (*)(void** context, uint64_t comm_id, int* activation_mask,
                          const char* comm_name, int nodes, int nranks, int rank, Logger log);

using ProfilerV1 = ProfilerTable<DescrV1, StateArgsV1, InitV1>;
using ProfilerV2 = ProfilerTable<DescrV2, StateArgsV2, InitV1>;
using ProfilerV3 = ProfilerTable<DescrV3, StateArgsV3, InitV1>;
using ProfilerV4 = ProfilerTable<DescrV4, StateArgsV4, InitV4>;
using ProfilerV5 = ProfilerTable<DescrV5, StateArgsV5, InitV5>;

// ---- layout checks (LP64) -------------------------------------------------------------------
static_assert(sizeof(void*) == 8 && sizeof(size_t) == 8 && sizeof(int) == 4);
static_assert(offsetof(DescrV1, parent) == 8 && offsetof(DescrV1, rank) == 16);
static_assert(offsetof(DescrV1, coll) == 24 && sizeof(DescrV1) == 120);
static_assert(offsetof(CollV1, func) == 24 && offsetof(CollV1, count) == 48);
static_assert(offsetof(CollV1, datatype) == 60 && offsetof(CollV1, reduce_op) == 64);
static_assert(offsetof(CollV1, algo) == 82 && offsetof(CollV1, proto) == 83);
static_assert(sizeof(CollV1) == 96 && sizeof(P2pV1) == 56 && offsetof(P2pV1, peer) == 48);
static_assert(offsetof(P2pV1, datatype) == 32 && offsetof(P2pV1, count) == 40);
static_assert(sizeof(ProxyOpAll) == 24 && sizeof(StateArgsV1) == 16);
static_assert(offsetof(CollV2, datatype) == 64 && offsetof(CollV2, algo) == 88);
static_assert(offsetof(CollV2, proto) == 96 && sizeof(CollV2) == 104);
static_assert(sizeof(DescrV2) == 128 && sizeof(P2pV2) == 56);
static_assert(offsetof(CollV3, max_channels) == 72 && offsetof(CollV3, algo) == 80);
static_assert(sizeof(CollV3) == 96 && sizeof(DescrV3) == 120);
static_assert(offsetof(CollV4, count) == 32 && offsetof(CollV4, datatype) == 48);
static_assert(offsetof(CollV4, algo) == 64 && sizeof(CollV4) == 80);
static_assert(offsetof(P2pV4, peer) == 32 && sizeof(P2pV4) == 40);
static_assert(sizeof(KernelChV4) == 16 && sizeof(DescrV4) == 104 && sizeof(StateArgsV4) == 8);
static_assert(offsetof(CollApiV5, graph_captured) == 40 && sizeof(CollApiV5) == 48);
static_assert(sizeof(P2pApiV5) == 40 && sizeof(CollV5) == 88 && sizeof(P2pV5) == 48);
static_assert(offsetof(DescrV5, coll) == 24 && sizeof(DescrV5) == 112);
static_assert(sizeof(ProfilerV5) == 48);

}  // namespace gpuacct::nccl_abi
