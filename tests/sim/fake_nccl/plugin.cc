// The fake NCCL's profiler-plugin loading and event descriptors (plugin.h).
#include "plugin.h"

#include <dlfcn.h>

#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "profiler_abi.h"

namespace simnccl {

const char* const kAlgo = "RING";
// SIMPLE: the protocol whose time is its bytes over the link, as this fake's transfers take
// (README.md, Cross-rank timing); NCCL picks it for messages this large (LL's data rate is a
// quarter of the link's: src/graph/tuning.cc), so the job view's expected transfer is the
// fake's.
const char* const kProto = "SIMPLE";

namespace {

using namespace simprof;  // NOLINT(build/namespaces): the ABI declarations of this folder

constexpr uint8_t kAlgoRingId = 1;   // v1 numbering
constexpr uint8_t kProtoSimpleId = 2;  // NCCL_PROTO_SIMPLE

// The logger NCCL hands to v4+ plugins: the plugin's messages go to stderr, prefixed.
void LogFn(int level, unsigned long flags, const char* file, int line, const char* fmt, ...) {
  (void)flags;
  std::fprintf(stderr, "[simnccl plugin log %d %s:%d] ", level, file != nullptr ? file : "?",
               line);
  va_list ap;
  va_start(ap, fmt);
  std::vfprintf(stderr, fmt, ap);
  va_end(ap);
  std::fputc('\n', stderr);
}

bool IsP2p(const OpInfo& op) {
  return std::strcmp(op.func, "Send") == 0 || std::strcmp(op.func, "Recv") == 0;
}

template <typename T>
const T* As(const void* table) {
  return static_cast<const T*>(table);
}

}  // namespace

Plugin& Plugin::get() {
  static Plugin* plugin = new Plugin();  // lives for the process, as NCCL's plugin does
  return *plugin;
}

Plugin::Plugin() {
  const char* api = std::getenv("GPUACCT_SIM_NCCL_PROFILER_API");
  int newest = api != nullptr && *api != '\0' ? std::atoi(api) : 5;
  if (newest > 5) newest = 5;
  const char* spec = std::getenv("NCCL_PROFILER_PLUGIN");
  if (spec == nullptr || *spec == '\0' || std::strcmp(spec, "none") == 0 || newest <= 0) {
    note_ = "no plugin (NCCL_PROFILER_PLUGIN unset or none, or profiler API 0)";
    return;
  }
  // As NCCL: a path, or NAME for libnccl-profiler-NAME.so, else the name as given.
  std::string name = spec;
  void* handle = nullptr;
  if (name.find('/') == std::string::npos) {
    const std::string lib = "libnccl-profiler-" + name + ".so";
    handle = dlopen(lib.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (handle != nullptr) name = lib;
  }
  if (handle == nullptr) handle = dlopen(name.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) {
    note_ = std::string("cannot load the plugin: ") + dlerror();
    std::fprintf(stderr, "[simnccl] %s\n", note_.c_str());
    return;
  }
  path_ = name;
  for (int v = newest; v >= 1; --v) {
    const std::string symbol = "ncclProfiler_v" + std::to_string(v);
    if (void* t = dlsym(handle, symbol.c_str()); t != nullptr) {
      table_ = t;
      version_ = v;
      note_ = "loaded " + symbol + " from " + name;
      return;
    }
  }
  note_ = "no ncclProfiler_v1..v" + std::to_string(newest) + " in " + name;
  std::fprintf(stderr, "[simnccl] %s\n", note_.c_str());
}

bool Plugin::init(const CommInfo& c, void** context, uint64_t* mask) const {
  *context = nullptr;
  *mask = 0;
  if (version_ == 0) return false;
  int m = 0;
  Result r = 1;
  switch (version_) {
    case 1: r = As<TableV1>(table_)->init(context, &m); break;
    case 2: r = As<TableV2>(table_)->init(context, &m); break;
    case 3: r = As<TableV3>(table_)->init(context, &m); break;
    case 4:
      r = As<TableV4>(table_)->init(context, &m, c.name.c_str(), c.hash, c.nnodes, c.nranks,
                                    c.rank, LogFn);
      break;
    default:
      r = As<TableV5>(table_)->init(context, c.hash, &m, c.name.c_str(), c.nnodes, c.nranks,
                                    c.rank, LogFn);
      break;
  }
  if (r != 0) return false;
  // Up to v4 the event type is 8 bits: the API-level events do not exist there.
  *mask = static_cast<uint64_t>(static_cast<unsigned int>(m)) & (version_ >= 5 ? ~0ull : 0xffull);
  return true;
}

void Plugin::finalize(void* context) const {
  switch (version_) {
    case 0: return;
    case 1: As<TableV1>(table_)->finalize(context); return;
    case 2: As<TableV2>(table_)->finalize(context); return;
    case 3: As<TableV3>(table_)->finalize(context); return;
    case 4: As<TableV4>(table_)->finalize(context); return;
    default: As<TableV5>(table_)->finalize(context); return;
  }
}

void Plugin::stop(void* handle) const {
  if (handle == nullptr) return;
  switch (version_) {
    case 1: As<TableV1>(table_)->stop_event(handle); return;
    case 2: As<TableV2>(table_)->stop_event(handle); return;
    case 3: As<TableV3>(table_)->stop_event(handle); return;
    case 4: As<TableV4>(table_)->stop_event(handle); return;
    case 5: As<TableV5>(table_)->stop_event(handle); return;
    default: return;
  }
}

void Plugin::record_state(void* handle, int state) const {
  if (handle == nullptr) return;
  if (version_ == 5) As<TableV5>(table_)->record_event_state(handle, state, nullptr);
}

void* Plugin::start_group(void* ctx, const CommInfo& c, uint64_t mask) const {
  if ((mask & kGroup) == 0) return nullptr;
  void* h = nullptr;
  switch (version_) {
    case 1: { DescrV1 d{}; d.type = kGroup; d.rank = c.rank; As<TableV1>(table_)->start_event(ctx, &h, &d); break; }
    case 2: { DescrV2 d{}; d.type = kGroup; d.rank = c.rank; As<TableV2>(table_)->start_event(ctx, &h, &d); break; }
    case 3: { DescrV3 d{}; d.type = kGroup; d.rank = c.rank; As<TableV3>(table_)->start_event(ctx, &h, &d); break; }
    case 4: { DescrV4 d{}; d.type = kGroup; d.rank = c.rank; As<TableV4>(table_)->start_event(ctx, &h, &d); break; }
    case 5: { DescrV5 d{}; d.type = kGroup; d.rank = c.rank; As<TableV5>(table_)->start_event(ctx, &h, &d); break; }
    default: break;
  }
  return h;
}

void* Plugin::start_group_api(void* ctx, const CommInfo& c, uint64_t mask, int depth) const {
  if (version_ != 5 || (mask & kGroupApi) == 0) return nullptr;
  DescrV5 d{};
  d.type = kGroupApi;
  d.rank = c.rank;
  d.group_api.group_depth = depth;
  void* h = nullptr;
  As<TableV5>(table_)->start_event(ctx, &h, &d);
  return h;
}

void* Plugin::start_op_api(void* ctx, const CommInfo& c, uint64_t mask, const OpInfo& op,
                           void* parent) const {
  if (version_ != 5) return nullptr;
  const bool p2p = IsP2p(op);
  if ((mask & (p2p ? kP2pApi : kCollApi)) == 0) return nullptr;
  DescrV5 d{};
  d.type = p2p ? kP2pApi : kCollApi;
  d.parent = parent;
  d.rank = c.rank;
  if (p2p) {
    d.p2p_api.func = op.func;
    d.p2p_api.count = op.count;
    d.p2p_api.datatype = op.datatype;
    d.p2p_api.stream = op.stream;
  } else {
    d.coll_api.func = op.func;
    d.coll_api.count = op.count;
    d.coll_api.datatype = op.datatype;
    d.coll_api.stream = op.stream;
  }
  void* h = nullptr;
  As<TableV5>(table_)->start_event(ctx, &h, &d);
  return h;
}

void* Plugin::start_kernel_launch(void* ctx, const CommInfo& c, uint64_t mask, void* parent,
                                  void* stream) const {
  if (version_ != 5 || (mask & kKernelLaunch) == 0) return nullptr;
  DescrV5 d{};
  d.type = kKernelLaunch;
  d.parent = parent;
  d.rank = c.rank;
  d.kernel_launch.stream = stream;
  void* h = nullptr;
  As<TableV5>(table_)->start_event(ctx, &h, &d);
  return h;
}

namespace {

template <typename Coll>
void FillCollCommon(Coll& k, const OpInfo& op) {
  k.seq = op.seq;
  k.func = op.func;
  k.count = op.count;
  k.root = 0;
  k.datatype = op.datatype;
  k.warps = 16;
  k.algo = kAlgo;
  k.proto = kProto;
}

template <typename Descr>
void* StartV2V3(const void* table_ptr, void* ctx, const CommInfo& c, const OpInfo& op,
                void* parent, bool p2p) {
  Descr d{};
  d.rank = c.rank;
  d.parent = parent;
  if (p2p) {
    d.type = kP2p;
    d.p2p.comm_name = c.name.c_str();
    d.p2p.comm_hash = c.hash;
    d.p2p.func = op.func;
    d.p2p.datatype = op.datatype;
    d.p2p.count = op.count;
    d.p2p.peer = op.peer;
  } else {
    d.type = kColl;
    d.coll.comm_name = c.name.c_str();
    d.coll.comm_hash = c.hash;
    FillCollCommon(d.coll, op);
    d.coll.max_channels = kChannels;
  }
  if constexpr (sizeof(d.coll) == sizeof(CollV2)) {
    if (!p2p) d.coll.traffic_bytes = op.bytes;
  }
  void* h = nullptr;
  As<Table<InitV1, Descr, StateArgsV1>>(table_ptr)->start_event(ctx, &h, &d);
  return h;
}

}  // namespace

void* Plugin::start_op(void* ctx, const CommInfo& c, uint64_t mask, const OpInfo& op,
                       void* parent, void* group) const {
  const bool p2p = IsP2p(op);
  if ((mask & (p2p ? kP2p : kColl)) == 0) return nullptr;
  void* h = nullptr;
  switch (version_) {
    case 1: {
      DescrV1 d{};
      d.rank = c.rank;
      d.parent = parent;
      if (p2p) {
        d.type = kP2p;
        d.p2p.comm_name = c.name.c_str();
        d.p2p.comm_hash = c.hash;
        d.p2p.func = op.func_id;
        d.p2p.datatype = op.datatype_id;
        d.p2p.count = op.count;
        d.p2p.peer = op.peer;
      } else {
        d.type = kColl;
        d.coll.comm_name = c.name.c_str();
        d.coll.comm_hash = c.hash;
        d.coll.seq = op.seq;
        d.coll.func = op.func_id;
        d.coll.count = op.count;
        d.coll.datatype = op.datatype_id;
        d.coll.traffic_bytes = op.bytes;
        d.coll.max_channels = kChannels;
        d.coll.warps = 16;
        d.coll.algo = kAlgoRingId;
        d.coll.proto = kProtoSimpleId;
      }
      As<TableV1>(table_)->start_event(ctx, &h, &d);
      break;
    }
    case 2: h = StartV2V3<DescrV2>(table_, ctx, c, op, parent, p2p); break;
    case 3: h = StartV2V3<DescrV3>(table_, ctx, c, op, parent, p2p); break;
    case 4: {
      DescrV4 d{};
      d.rank = c.rank;
      d.parent = parent;
      if (p2p) {
        d.type = kP2p;
        d.p2p = {op.func, nullptr, op.datatype, op.count, op.peer, kChannels};
      } else {
        d.type = kColl;
        FillCollCommon(d.coll, op);
        d.coll.channels = kChannels;
      }
      As<TableV4>(table_)->start_event(ctx, &h, &d);
      break;
    }
    case 5: {
      DescrV5 d{};
      d.rank = c.rank;
      d.parent = parent;
      if (p2p) {
        d.type = kP2p;
        d.p2p = {op.func, nullptr, op.datatype, op.count, op.peer, kChannels, group};
      } else {
        d.type = kColl;
        FillCollCommon(d.coll, op);
        d.coll.channels = kChannels;
        d.coll.parent_group = group;
      }
      As<TableV5>(table_)->start_event(ctx, &h, &d);
      break;
    }
    default: break;
  }
  return h;
}

void* Plugin::start_kernel_ch(void* ctx, const CommInfo& c, uint64_t mask, void* parent,
                              uint8_t channel, uint64_t gpu_start) const {
  if (version_ < 3 || (mask & kKernelCh) == 0) return nullptr;
  void* h = nullptr;
  if (version_ == 3) {
    DescrV3 d{};
    d.type = kKernelCh;
    d.parent = parent;
    d.rank = c.rank;
    d.kernel_ch.channel = channel;
    As<TableV3>(table_)->start_event(ctx, &h, &d);
  } else if (version_ == 4) {
    DescrV4 d{};
    d.type = kKernelCh;
    d.parent = parent;
    d.rank = c.rank;
    d.kernel_ch = {channel, gpu_start};
    As<TableV4>(table_)->start_event(ctx, &h, &d);
  } else {
    DescrV5 d{};
    d.type = kKernelCh;
    d.parent = parent;
    d.rank = c.rank;
    d.kernel_ch = {channel, gpu_start};
    As<TableV5>(table_)->start_event(ctx, &h, &d);
  }
  return h;
}

void Plugin::stop_kernel_ch(void* handle, uint64_t gpu_end) const {
  if (handle == nullptr) return;
  if (version_ >= 4) {
    StateArgsV4 args{};
    args.kernel_ch.ptimer = gpu_end;
    if (version_ == 4) {
      As<TableV4>(table_)->record_event_state(handle, kKernelChStop, &args);
    } else {
      As<TableV5>(table_)->record_event_state(handle, kKernelChStop, &args);
    }
  }
  stop(handle);
}

}  // namespace simnccl
