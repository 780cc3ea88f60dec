// Fake CUPTI (libcupti.so.13) for the simulated device.
//
// Implements the callback and activity APIs a tracing client uses, with the CUDA 13.0 header
// structs filled field by field (the real headers are included, so layouts are exact).  Records
// come from the engine in libcuda.so.1 through the SimTracer hooks and are delivered the way real
// CUPTI delivers them: into client buffers (bufferRequested), handed back through
// bufferCompleted when full, on cuptiActivityFlushAll, on the periodic flush and at
// cuptiFinalize / exit -- deliberately out of global order and partly late (seeded).
//
// Locks, outermost first: fill_mu (recursive; one thread fills client buffers at a time; held
// while calling bufferRequested), deliver_mu (recursive; held while calling bufferCompleted),
// mu (short critical sections over the state; never held while calling the client).
#include <cupti.h>
#include <pthread.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "sim_internal.h"

#define CUPTI_EXPORT extern "C" __attribute__((visibility("default")))

namespace {

// ---- callback names, generated from the real cbid headers at configure time -------------------

struct CbidName {
  int domain;
  uint32_t cbid;
  const char* name;
};
const CbidName kCbidNames[] = {
#include "sim_cbid_names.inc"
};

constexpr size_t kMaxCbid = 1024;  // > CUPTI_DRIVER_TRACE_CBID_SIZE (807)

size_t DomainCbidLimit(CUpti_CallbackDomain d) {
  switch (d) {
    case CUPTI_CB_DOMAIN_DRIVER_API:
      return CUPTI_DRIVER_TRACE_CBID_SIZE;
    case CUPTI_CB_DOMAIN_RUNTIME_API:
      return CUPTI_RUNTIME_TRACE_CBID_SIZE;
    case CUPTI_CB_DOMAIN_RESOURCE:
      return CUPTI_CBID_RESOURCE_SIZE;
    case CUPTI_CB_DOMAIN_SYNCHRONIZE:
      return CUPTI_CBID_SYNCHRONIZE_SIZE;
    case CUPTI_CB_DOMAIN_NVTX:
      return CUPTI_CBID_NVTX_SIZE;
    case CUPTI_CB_DOMAIN_STATE:
      return CUPTI_CBID_STATE_SIZE;
    default:
      return 0;
  }
}

// Names as cuptiGetCallbackName returns them ("cudaLaunchKernel_v7000") and the callback's
// functionName ("cudaLaunchKernel", the version suffix stripped).  Built once, never freed; the
// stripped names live in `storage` (a deque: its strings never move), so every allocation stays
// reachable from the table (LeakSanitizer saw the strings leaked when only their buffers were
// kept).
struct NameTables {
  const char* full[3][kMaxCbid] = {};
  const char* plain[3][kMaxCbid] = {};
  std::deque<std::string> storage;
  NameTables() {
    for (const CbidName& n : kCbidNames) {
      if (n.domain < 1 || n.domain > 2 || n.cbid >= kMaxCbid) continue;
      full[n.domain][n.cbid] = n.name;
      std::string s = n.name;
      size_t v = s.rfind("_v");
      if (v != std::string::npos && v + 2 < s.size() &&
          s.find_first_not_of("0123456789", v + 2) == std::string::npos) {
        s.resize(v);
      }
      plain[n.domain][n.cbid] = storage.emplace_back(std::move(s)).c_str();
    }
  }
};
const NameTables& Names() {
  static const NameTables* t = new NameTables();
  return *t;
}

// ---- records ----------------------------------------------------------------------------------

union AnyRecord {
  CUpti_Activity base;
  CUpti_ActivityKernel10 kernel;
  CUpti_ActivityMemcpy6 memcpy;
  CUpti_ActivityMemcpyPtoP4 p2p;
  CUpti_ActivityMemset4 memset;
  CUpti_ActivityAPI api;
  CUpti_ActivitySynchronization2 sync;
  CUpti_ActivityExternalCorrelation ext;
};

size_t RecordSize(CUpti_ActivityKind kind) {
  switch (kind) {
    case CUPTI_ACTIVITY_KIND_KERNEL:
    case CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL:
      return sizeof(CUpti_ActivityKernel10);
    case CUPTI_ACTIVITY_KIND_MEMCPY:
      return sizeof(CUpti_ActivityMemcpy6);
    case CUPTI_ACTIVITY_KIND_MEMCPY2:
      return sizeof(CUpti_ActivityMemcpyPtoP4);
    case CUPTI_ACTIVITY_KIND_MEMSET:
      return sizeof(CUpti_ActivityMemset4);
    case CUPTI_ACTIVITY_KIND_RUNTIME:
    case CUPTI_ACTIVITY_KIND_DRIVER:
      return sizeof(CUpti_ActivityAPI);
    case CUPTI_ACTIVITY_KIND_SYNCHRONIZATION:
      return sizeof(CUpti_ActivitySynchronization2);
    case CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION:
      return sizeof(CUpti_ActivityExternalCorrelation);
    default:
      return 0;
  }
}

struct Pending {
  uint64_t complete_at;  // sim time at which the record is complete (GPU end / API end)
  uint64_t lane;         // delivery lane: one per host thread, one per (device, stream)
  uint8_t delay;         // flushes to hold the record back once it is complete
  AnyRecord rec;
};

constexpr uint64_t kHostLaneBit = 1ull << 63;
constexpr size_t kThresholdStep = 4096;  // pending records between buffer fills
constexpr size_t kMaxPendingWithoutBuffers = 1u << 20;

uint64_t SplitMix(uint64_t& s) {
  uint64_t z = (s += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

uint64_t EnvU64(const char* name, uint64_t fallback) {
  const char* v = std::getenv(name);
  if (v == nullptr || *v == '\0') return fallback;
  char* end = nullptr;
  unsigned long long x = std::strtoull(v, &end, 10);
  return end == v ? fallback : static_cast<uint64_t>(x);
}

struct Faults {
  bool subscribe_refused = false;
  uint64_t drop_first = 0;                 // drop=N
  uint64_t drop_every = 0;                 // drop_every=K
  int64_t buffer_refused = 0;              // buffer_refused (-1: every request) / buffer_refused=N
  std::unordered_set<std::string> errors;  // error:FUNCTION

  void Parse(const char* spec) {
    *this = Faults();
    if (spec == nullptr) return;
    std::string all = spec;
    size_t pos = 0;
    while (pos <= all.size()) {
      size_t comma = all.find(',', pos);
      if (comma == std::string::npos) comma = all.size();
      std::string item = all.substr(pos, comma - pos);
      pos = comma + 1;
      while (!item.empty() && item.front() == ' ') item.erase(item.begin());
      while (!item.empty() && item.back() == ' ') item.pop_back();
      if (item.empty()) continue;
      if (item == "subscribe_refused") {
        subscribe_refused = true;
      } else if (item.rfind("drop=", 0) == 0) {
        drop_first = std::strtoull(item.c_str() + 5, nullptr, 10);
      } else if (item.rfind("drop_every=", 0) == 0) {
        drop_every = std::strtoull(item.c_str() + 11, nullptr, 10);
      } else if (item == "buffer_refused") {
        buffer_refused = -1;
      } else if (item.rfind("buffer_refused=", 0) == 0) {
        buffer_refused = std::strtoll(item.c_str() + 15, nullptr, 10);
      } else if (item.rfind("error:", 0) == 0) {
        errors.insert(item.substr(6));
      } else if (item == "no_cupti") {
        // Handled by not putting this library on the path; nothing to do once loaded.
      } else {
        std::fprintf(stderr, "[sim libcupti] unknown GPUACCT_SIM_FAULTS item '%s'\n", item.c_str());
      }
    }
  }
};

// GPUACCT_SIM_CUPTI_CLOCK: how far CUPTI's clock is from the sim clock (the host's
// CLOCK_REALTIME).  "host" (default): the same clock, as CUPTI's default on Linux;
// "monotonic": CLOCK_MONOTONIC's reading (what CUPTI uses under WSL); "offset:<ns>": a signed
// constant.
int64_t ParseCuptiClock(const char* spec) {
  if (spec == nullptr || *spec == '\0' || std::strcmp(spec, "host") == 0) return 0;
  if (std::strcmp(spec, "monotonic") == 0) {
    timespec ts{};
    clock_gettime(CLOCK_MONOTONIC, &ts);
    const int64_t mono = static_cast<int64_t>(ts.tv_sec) * 1000000000 + ts.tv_nsec;
    return mono - static_cast<int64_t>(simNow());
  }
  if (std::strncmp(spec, "offset:", 7) == 0) return std::strtoll(spec + 7, nullptr, 10);
  std::fprintf(stderr, "[sim libcupti] unknown GPUACCT_SIM_CUPTI_CLOCK '%s'; using host\n", spec);
  return 0;
}

struct ClientBuffer {
  uint8_t* buf = nullptr;
  size_t size = 0;
  size_t used = 0;  // bytes from buf (alignment padding included) = validSize
  size_t count = 0;
  size_t max_records = 0;
};

struct Completed {
  uint8_t* buf;
  size_t size;
  size_t valid;
};

enum class PlaceMode { kThreshold, kFlush, kForced, kPeriodic };

struct State {
  std::mutex mu;
  std::recursive_mutex fill_mu;
  std::recursive_mutex deliver_mu;
  std::condition_variable worker_cv;

  // Fault and delivery knobs (re-read by Configure()).
  Faults faults;
  std::atomic<bool> any_error_fault{false};
  uint64_t rng = 1;
  uint32_t delay_pct = 5;
  bool shuffle = true;
  bool forced_zero_incomplete = true;

  // Subscriber (one per process, as with real CUPTI).
  bool subscribed = false;
  std::string subscriber_name;
  std::atomic<CUpti_CallbackFunc> callback{nullptr};
  // Read by callbacks on any thread without the lock, so atomic: a callback racing
  // cuptiUnsubscribe (a SIGTERM's final flush) reads it while it changes.
  std::atomic<void*> userdata{nullptr};
  std::atomic<uint8_t> cb_enabled[CUPTI_CB_DOMAIN_SIZE][kMaxCbid] = {};

  // Activity configuration.
  std::atomic<uint8_t> kind_enabled[CUPTI_ACTIVITY_KIND_COUNT] = {};
  std::atomic<uint8_t> runtime_api[kMaxCbid] = {};
  std::atomic<uint8_t> driver_api[kMaxCbid] = {};
  std::atomic<int> thread_id_type{CUPTI_ACTIVITY_THREAD_ID_TYPE_DEFAULT};
  std::atomic<bool> latency_timestamps{false};
  // CUPTI's clock: sim time + clock_shift (GPUACCT_SIM_CUPTI_CLOCK), or the client's timestamp
  // callback once one is registered.
  std::atomic<int64_t> clock_shift{0};
  std::atomic<CUpti_TimestampCallbackFunc> timestamp_cb{nullptr};
  uint64_t attrs[16] = {};
  CUpti_BuffersCallbackRequestFunc request = nullptr;
  CUpti_BuffersCallbackCompleteFunc complete = nullptr;

  // Records and buffers.
  std::deque<Pending> pending;
  size_t next_threshold = kThresholdStep;
  uint64_t produced = 0;
  uint64_t dropped = 0;
  int64_t buffer_requests = 0;
  ClientBuffer current;        // guarded by fill_mu
  std::deque<Completed> done;  // guarded by mu, delivered under deliver_mu

  // Worker thread: periodic flush + asynchronous delivery of full buffers.
  std::thread worker;
  bool worker_started = false;
  bool worker_stop = false;
  uint32_t flush_period_ms = 0;

  State() { Configure(); }

  void Configure() {
    faults.Parse(std::getenv("GPUACCT_SIM_FAULTS"));
    any_error_fault.store(!faults.errors.empty());
    rng = EnvU64("GPUACCT_SIM_SEED", 1);
    delay_pct = static_cast<uint32_t>(std::min<uint64_t>(100, EnvU64("GPUACCT_SIM_DELAY_PCT", 5)));
    shuffle = EnvU64("GPUACCT_SIM_SHUFFLE", 1) != 0;
    const char* inc = std::getenv("GPUACCT_SIM_FORCED_INCOMPLETE");
    forced_zero_incomplete = !(inc != nullptr && std::strcmp(inc, "keep") == 0);
    clock_shift.store(ParseCuptiClock(std::getenv("GPUACCT_SIM_CUPTI_CLOCK")));
    timestamp_cb.store(nullptr);
    std::fill(std::begin(attrs), std::end(attrs), 0);
    attrs[CUPTI_ACTIVITY_ATTR_DEVICE_BUFFER_SIZE] = 3u * 1024 * 1024;
    attrs[CUPTI_ACTIVITY_ATTR_DEVICE_BUFFER_SIZE_CDP] = 3u * 1024 * 1024;
    attrs[CUPTI_ACTIVITY_ATTR_DEVICE_BUFFER_POOL_LIMIT] = 250;
    attrs[CUPTI_ACTIVITY_ATTR_PROFILING_SEMAPHORE_POOL_SIZE] = 25000;
    attrs[CUPTI_ACTIVITY_ATTR_PROFILING_SEMAPHORE_POOL_LIMIT] = 25000;
    attrs[CUPTI_ACTIVITY_ATTR_DEVICE_BUFFER_PRE_ALLOCATE_VALUE] = 3;
    attrs[CUPTI_ACTIVITY_ATTR_PROFILING_SEMAPHORE_PRE_ALLOCATE_VALUE] = 3;
    attrs[CUPTI_ACTIVITY_ATTR_PER_THREAD_ACTIVITY_BUFFER] = 1;
  }
};

// Never destroyed: the client's exit-time flushes may run after our static destructors would.
State& S() {
  static State* s = new State();
  return *s;
}

bool Faulted(const char* fn) {
  State& s = S();
  if (!s.any_error_fault.load(std::memory_order_relaxed)) return false;
  std::lock_guard<std::mutex> lock(s.mu);
  return s.faults.errors.count(fn) != 0;
}

#define SIM_FAULT_POINT()                              \
  do {                                                 \
    if (Faulted(__func__)) return CUPTI_ERROR_UNKNOWN; \
  } while (0)

uint32_t ThreadIdFor(int type) {
  thread_local uint32_t pthread_id = static_cast<uint32_t>(pthread_self());
  thread_local uint32_t system_id = static_cast<uint32_t>(syscall(SYS_gettid));
  return type == CUPTI_ACTIVITY_THREAD_ID_TYPE_SYSTEM ? system_id : pthread_id;
}

// Per-thread external correlation stacks (cuptiActivityPush/PopExternalCorrelationId).
thread_local std::vector<uint64_t> t_external[CUPTI_EXTERNAL_CORRELATION_KIND_SIZE];

void StartWorkerLocked(State& s);
void Place(PlaceMode mode);
void Deliver();

// ---- producing records (engine hooks) -----------------------------------------------------

// Adds one record (drop faults, delay draw).  Caller holds s.mu.
void PushLocked(State& s, const AnyRecord& rec, uint64_t complete_at, uint64_t lane,
                bool may_delay) {
  ++s.produced;
  if (s.produced <= s.faults.drop_first ||
      (s.faults.drop_every != 0 && s.produced % s.faults.drop_every == 0) ||
      (s.request == nullptr && s.pending.size() >= kMaxPendingWithoutBuffers)) {
    ++s.dropped;
    return;
  }
  Pending p;
  p.complete_at = complete_at;
  p.lane = lane;
  p.delay = 0;
  if (may_delay && s.delay_pct != 0 && SplitMix(s.rng) % 100 < s.delay_pct) {
    p.delay = static_cast<uint8_t>(1 + SplitMix(s.rng) % 2);
  }
  p.rec = rec;
  s.pending.push_back(p);
}

// The distance from the sim clock to CUPTI's clock now.  With a client timestamp callback it is
// measured now, as real CUPTI reads the callback at a host activity and maps GPU times onto it.
int64_t CuptiClockShift(State& s) {
  const CUpti_TimestampCallbackFunc cb = s.timestamp_cb.load(std::memory_order_acquire);
  if (cb != nullptr) return static_cast<int64_t>(cb()) - static_cast<int64_t>(simNow());
  return s.clock_shift.load(std::memory_order_relaxed);
}

bool KindOn(State& s, CUpti_ActivityKind k) {
  return s.kind_enabled[k].load(std::memory_order_relaxed) != 0;
}

void InvokeApiCallback(SimApiCall* call, CUpti_ApiCallbackSite site) {
  State& s = S();
  if (call->cbid >= kMaxCbid || call->domain < 1 || call->domain >= CUPTI_CB_DOMAIN_SIZE) return;
  CUpti_CallbackFunc cb = s.callback.load(std::memory_order_acquire);
  if (cb == nullptr || !s.cb_enabled[call->domain][call->cbid].load(std::memory_order_relaxed)) {
    return;
  }
  const NameTables& names = Names();
  CUpti_CallbackData data{};
  data.callbackSite = site;
  data.functionName = names.plain[call->domain][call->cbid];
  data.functionParams = call->params;
  data.functionReturnValue = call->return_value;
  data.symbolName = call->symbol_name;
  data.context = call->context;
  data.contextUid = call->context_id;
  data.correlationData = &call->correlation_data;
  data.correlationId = call->correlation_id;
  cb(s.userdata.load(std::memory_order_acquire), call->domain, call->cbid, &data);
}

void HookApiEnter(SimApiCall* call) {
  InvokeApiCallback(call, CUPTI_API_ENTER);
}

// The fields CUPTI's memcpy and peer-to-peer memcpy records share.
template <typename CopyRecord>
void FillCopyCommon(CopyRecord& m, const SimGpuOp& op, int64_t clock_shift) {
  m.copyKind = op.copy_kind;
  m.srcKind = op.src_kind;
  m.dstKind = op.dst_kind;
  m.flags = op.async ? CUPTI_ACTIVITY_FLAG_MEMCPY_ASYNC : 0;
  m.bytes = op.bytes;
  m.start = static_cast<uint64_t>(static_cast<int64_t>(op.start) + clock_shift);
  m.end = static_cast<uint64_t>(static_cast<int64_t>(op.end) + clock_shift);
  m.deviceId = op.device;
  m.contextId = op.context_id;
  m.streamId = op.stream_id;
}

// A record timestamp on CUPTI's clock.
uint64_t OnCuptiClock(uint64_t sim_time, int64_t shift) {
  return static_cast<uint64_t>(static_cast<int64_t>(sim_time) + shift);
}

// SYNCHRONIZE domain: the sync finished, before the API returns.
void NotifySynchronized(State& s, const SimApiCall* call) {
  if (call->sync_type == 0) return;
  const uint32_t scb = call->sync_type == CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_STREAM_SYNCHRONIZE
                           ? CUPTI_CBID_SYNCHRONIZE_STREAM_SYNCHRONIZED
                           : CUPTI_CBID_SYNCHRONIZE_CONTEXT_SYNCHRONIZED;
  CUpti_CallbackFunc cb = s.callback.load(std::memory_order_acquire);
  if (cb != nullptr && s.cb_enabled[CUPTI_CB_DOMAIN_SYNCHRONIZE][scb].load()) {
    CUpti_SynchronizeData sd{call->context, call->sync_stream};
    cb(s.userdata.load(std::memory_order_acquire), CUPTI_CB_DOMAIN_SYNCHRONIZE, scb, &sd);
  }
}

// The call's own records (external correlation, API, synchronization).  s.mu held.
void PushApiRecordsLocked(State& s, const SimApiCall* call, uint32_t tid, uint64_t host_lane,
                          int64_t shift) {
  auto at = [shift](uint64_t sim_time) { return OnCuptiClock(sim_time, shift); };
  const bool runtime = call->domain == CUPTI_CB_DOMAIN_RUNTIME_API;
  const CUpti_ActivityKind api_kind =
      runtime ? CUPTI_ACTIVITY_KIND_RUNTIME : CUPTI_ACTIVITY_KIND_DRIVER;
  const bool api_on =
      call->cbid < kMaxCbid &&
      (runtime ? s.runtime_api[call->cbid] : s.driver_api[call->cbid]).load() != 0;
  if (api_on) {
    if (KindOn(s, CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION)) {
      // Real CUPTI: the API record is preceded by one record per kind with an open region.
      for (int k = 1; k < CUPTI_EXTERNAL_CORRELATION_KIND_SIZE; ++k) {
        if (t_external[k].empty()) continue;
        AnyRecord r{};
        r.ext.kind = CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION;
        r.ext.externalKind = static_cast<CUpti_ExternalCorrelationKind>(k);
        r.ext.externalId = t_external[k].back();
        r.ext.correlationId = call->correlation_id;
        PushLocked(s, r, call->end, host_lane, false);
      }
    }
    AnyRecord r{};
    r.api.kind = api_kind;
    r.api.cbid = call->cbid;
    r.api.start = at(call->start);
    r.api.end = at(call->end);
    r.api.processId = static_cast<uint32_t>(getpid());
    r.api.threadId = tid;
    r.api.correlationId = call->correlation_id;
    r.api.returnValue = static_cast<uint32_t>(*static_cast<int*>(call->return_value));
    PushLocked(s, r, call->end, host_lane, true);
  }
  if (call->sync_type != 0 && KindOn(s, CUPTI_ACTIVITY_KIND_SYNCHRONIZATION)) {
    AnyRecord r{};
    r.sync.kind = CUPTI_ACTIVITY_KIND_SYNCHRONIZATION;
    r.sync.type = static_cast<CUpti_ActivitySynchronizationType>(call->sync_type);
    r.sync.start = at(call->start);
    r.sync.end = at(call->end);
    r.sync.correlationId = call->correlation_id;
    r.sync.contextId = call->context_id;
    r.sync.streamId = call->sync_stream_id;
    r.sync.cudaEventId = CUPTI_SYNCHRONIZATION_INVALID_VALUE;
    r.sync.cudaEventSyncId = CUPTI_SYNCHRONIZATION_INVALID_VALUE;
    PushLocked(s, r, call->end, host_lane, true);
  }
}

// The activity record of one GPU op, as the enabled kinds ask; false when none is enabled.
bool FillOpRecord(State& s, const SimGpuOp& op, bool runtime, int64_t shift, AnyRecord* r) {
  auto at = [shift](uint64_t sim_time) { return OnCuptiClock(sim_time, shift); };
  const bool conc = KindOn(s, CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL);
  const bool serial = KindOn(s, CUPTI_ACTIVITY_KIND_KERNEL);
  const bool latency = s.latency_timestamps.load();
  if (op.kind == SIM_OP_KERNEL) {
    if (!conc && !serial) return false;
    CUpti_ActivityKernel10& k = r->kernel;
    k.kind = conc ? CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL : CUPTI_ACTIVITY_KIND_KERNEL;
    k.start = at(op.start);
    k.end = at(op.end);
    k.completed = at(op.end);
    k.deviceId = op.device;
    k.contextId = op.context_id;
    k.streamId = op.stream_id;
    k.gridX = k.gridY = k.gridZ = 1;
    k.blockX = k.blockY = k.blockZ = 1;
    k.registersPerThread = 32;
    k.correlationId = op.correlation_id;
    k.gridId = static_cast<int64_t>(op.correlation_id);
    k.name = op.name;
    if (latency) {
      k.queued = at(op.queued);
      k.submitted = at(op.queued);
    }
    k.launchType = CUPTI_ACTIVITY_LAUNCH_TYPE_REGULAR;
    k.graphNodeId = op.graph_node_id;
    k.graphId = op.graph_id;
    k.channelType = CUPTI_CHANNEL_TYPE_COMPUTE;
    k.shmemLimitConfig = CUPTI_FUNC_SHMEM_LIMIT_DEFAULT;
  } else if (op.kind == SIM_OP_MEMCPY) {
    const bool p2p = op.copy_kind == CUPTI_ACTIVITY_MEMCPY_KIND_PTOP;
    if (p2p && KindOn(s, CUPTI_ACTIVITY_KIND_MEMCPY2)) {
      CUpti_ActivityMemcpyPtoP4& m = r->p2p;
      m.kind = CUPTI_ACTIVITY_KIND_MEMCPY2;
      FillCopyCommon(m, op, shift);
      m.srcDeviceId = op.src_device;
      m.srcContextId = op.src_context_id;
      m.dstDeviceId = op.dst_device;
      m.dstContextId = op.dst_context_id;
      m.correlationId = op.correlation_id;
      m.channelType = CUPTI_CHANNEL_TYPE_ASYNC_MEMCPY;
    } else if (KindOn(s, CUPTI_ACTIVITY_KIND_MEMCPY)) {
      CUpti_ActivityMemcpy6& m = r->memcpy;
      m.kind = CUPTI_ACTIVITY_KIND_MEMCPY;
      FillCopyCommon(m, op, shift);
      m.correlationId = op.correlation_id;
      m.runtimeCorrelationId = runtime ? op.correlation_id : 0;
      m.graphNodeId = op.graph_node_id;
      m.graphId = op.graph_id;
      m.channelType = CUPTI_CHANNEL_TYPE_ASYNC_MEMCPY;
      m.copyCount = 1;
    } else {
      return false;
    }
  } else if (op.kind == SIM_OP_MEMSET) {
    if (!KindOn(s, CUPTI_ACTIVITY_KIND_MEMSET)) return false;
    CUpti_ActivityMemset4& m = r->memset;
    m.kind = CUPTI_ACTIVITY_KIND_MEMSET;
    m.value = 0;
    m.bytes = op.bytes;
    m.start = at(op.start);
    m.end = at(op.end);
    m.deviceId = op.device;
    m.contextId = op.context_id;
    m.streamId = op.stream_id;
    m.correlationId = op.correlation_id;
    m.flags = op.async ? CUPTI_ACTIVITY_FLAG_MEMSET_ASYNC : 0;
    m.memoryKind = CUPTI_ACTIVITY_MEMORY_KIND_DEVICE;
    m.graphNodeId = op.graph_node_id;
    m.graphId = op.graph_id;
    m.channelType = CUPTI_CHANNEL_TYPE_COMPUTE;
  } else {
    return false;
  }
  return true;
}

void HookApiExit(SimApiCall* call, const SimGpuOp* ops, size_t num_ops) {
  State& s = S();
  NotifySynchronized(s, call);
  InvokeApiCallback(call, CUPTI_API_EXIT);

  const int tid_type = s.thread_id_type.load(std::memory_order_relaxed);
  const uint32_t tid = ThreadIdFor(tid_type);
  const uint64_t host_lane = kHostLaneBit | tid;
  const int64_t shift = CuptiClockShift(s);
  bool place = false;
  {
    std::lock_guard<std::mutex> lock(s.mu);
    PushApiRecordsLocked(s, call, tid, host_lane, shift);
    const bool runtime = call->domain == CUPTI_CB_DOMAIN_RUNTIME_API;
    for (size_t i = 0; i < num_ops; ++i) {
      const SimGpuOp& op = ops[i];
      const uint64_t lane = (static_cast<uint64_t>(op.device) << 32) | op.stream_id;
      AnyRecord r{};
      if (!FillOpRecord(s, op, runtime, shift, &r)) continue;
      PushLocked(s, r, op.end, lane, true);
    }
    if (s.request != nullptr && s.pending.size() >= s.next_threshold) place = true;
  }
  if (place) Place(PlaceMode::kThreshold);
}

void HookResource(uint32_t cbid, CUcontext ctx, CUstream stream) {
  State& s = S();
  CUpti_CallbackFunc cb = s.callback.load(std::memory_order_acquire);
  if (cb == nullptr || cbid >= kMaxCbid || !s.cb_enabled[CUPTI_CB_DOMAIN_RESOURCE][cbid].load()) {
    return;
  }
  CUpti_ResourceData rd{};
  rd.context = ctx;
  rd.resourceHandle.stream = stream;
  rd.resourceDescriptor = nullptr;
  cb(s.userdata.load(std::memory_order_acquire), CUPTI_CB_DOMAIN_RESOURCE, cbid, &rd);
}

void ResetLocked(State& s) {
  s.subscribed = false;
  s.subscriber_name.clear();
  s.callback.store(nullptr);
  s.userdata.store(nullptr);
  for (auto& d : s.cb_enabled) {
    for (auto& c : d) c.store(0);
  }
  for (auto& k : s.kind_enabled) k.store(0);
  for (auto& c : s.runtime_api) c.store(0);
  for (auto& c : s.driver_api) c.store(0);
  s.thread_id_type.store(CUPTI_ACTIVITY_THREAD_ID_TYPE_DEFAULT);
  s.latency_timestamps.store(false);
  s.request = nullptr;
  s.complete = nullptr;
  s.pending.clear();
  s.next_threshold = kThresholdStep;
  s.produced = 0;
  s.dropped = 0;
  s.buffer_requests = 0;
  s.done.clear();  // test helper: buffers of a previous client are abandoned, not returned
  s.flush_period_ms = 0;
}

void HookReset() {
  State& s = S();
  std::lock_guard<std::recursive_mutex> fill(s.fill_mu);
  std::lock_guard<std::recursive_mutex> deliver(s.deliver_mu);
  std::lock_guard<std::mutex> lock(s.mu);
  ResetLocked(s);
  s.current = ClientBuffer();
  s.Configure();
}

const SimTracer kTracer = {HookApiEnter, HookApiExit, HookResource, HookReset};

// ---- buffers and delivery --------------------------------------------------------------------

// Asks the client for a buffer (fill_mu held, mu not held).  Returns false when refused.
bool RequestBuffer(State& s, CUpti_BuffersCallbackRequestFunc request) {
  uint8_t* buf = nullptr;
  size_t size = 0;
  size_t max_records = 0;
  request(&buf, &size, &max_records);
  bool refuse_fault;
  {
    std::lock_guard<std::mutex> lock(s.mu);
    ++s.buffer_requests;
    refuse_fault = s.faults.buffer_refused < 0 || s.buffer_requests <= s.faults.buffer_refused;
    if (buf != nullptr && refuse_fault) {
      // Simulated refusal: give the client its buffer straight back, empty, so it can free it.
      s.done.push_back({buf, size, 0});
    }
  }
  if (buf == nullptr || refuse_fault) return false;
  const size_t pad = (8 - (reinterpret_cast<uintptr_t>(buf) & 7u)) & 7u;
  if (size < pad + sizeof(CUpti_ActivityAPI)) {
    // Too small to hold anything: return it empty rather than loop asking for more.
    std::lock_guard<std::mutex> lock(s.mu);
    s.done.push_back({buf, size, 0});
    return false;
  }
  s.current = ClientBuffer{buf, size, pad, 0, max_records};
  return true;
}

void QueueCurrent(State& s, bool even_empty) {
  if (s.current.buf == nullptr) return;
  if (s.current.count == 0 && !even_empty) return;
  std::lock_guard<std::mutex> lock(s.mu);
  s.done.push_back({s.current.buf, s.current.size, s.current.count == 0 ? 0 : s.current.used});
  s.current = ClientBuffer();
}

// Orders a batch the way a real trace arrives: per-lane order kept (a stream's or a thread's
// records stay in their order), lanes interleaved in random-length chunks.
void MessyOrder(State& s, std::vector<Pending>& batch) {
  if (!s.shuffle || batch.size() < 2) return;
  std::vector<uint64_t> lane_keys;
  std::unordered_map<uint64_t, std::vector<size_t>> lanes;
  for (size_t i = 0; i < batch.size(); ++i) {
    auto it = lanes.find(batch[i].lane);
    if (it == lanes.end()) {
      lane_keys.push_back(batch[i].lane);
      it = lanes.emplace(batch[i].lane, std::vector<size_t>()).first;
    }
    it->second.push_back(i);
  }
  std::vector<size_t> cursor(lane_keys.size(), 0);
  std::vector<size_t> active(lane_keys.size());
  for (size_t i = 0; i < active.size(); ++i) active[i] = i;
  std::vector<Pending> out;
  out.reserve(batch.size());
  while (!active.empty()) {
    const size_t pick = static_cast<size_t>(SplitMix(s.rng) % active.size());
    const size_t li = active[pick];
    const std::vector<size_t>& idx = lanes[lane_keys[li]];
    size_t chunk = 1 + static_cast<size_t>(SplitMix(s.rng) % 16);
    while (chunk-- > 0 && cursor[li] < idx.size()) out.push_back(batch[idx[cursor[li]++]]);
    if (cursor[li] == idx.size()) {
      active[pick] = active.back();
      active.pop_back();
    }
  }
  batch.swap(out);
}

void Place(PlaceMode mode) {
  State& s = S();
  std::unique_lock<std::recursive_mutex> fill(s.fill_mu);
  std::vector<Pending> batch;
  CUpti_BuffersCallbackRequestFunc request;
  bool zero_incomplete;
  uint64_t now;
  {
    std::lock_guard<std::mutex> lock(s.mu);
    request = s.request;
    if (request == nullptr) return;
    zero_incomplete = s.forced_zero_incomplete;
    now = simNow();
    const bool flush_point = mode != PlaceMode::kThreshold;
    std::deque<Pending> keep;
    for (Pending& p : s.pending) {
      const bool complete = p.complete_at <= now;
      if (mode == PlaceMode::kForced || (complete && p.delay == 0)) {
        batch.push_back(p);
      } else {
        if (complete && flush_point && p.delay > 0) --p.delay;
        keep.push_back(p);
      }
    }
    s.pending.swap(keep);
    s.next_threshold = s.pending.size() + kThresholdStep;
    MessyOrder(s, batch);
  }
  bool refused = false;
  for (Pending& p : batch) {
    if (mode == PlaceMode::kForced && zero_incomplete && p.complete_at > now) {
      // Like real CUPTI: a forced flush hands out unfinished GPU records with 0 timestamps.
      switch (p.rec.base.kind) {
        case CUPTI_ACTIVITY_KIND_KERNEL:
        case CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL:
          p.rec.kernel.start = p.rec.kernel.end = p.rec.kernel.completed = 0;
          break;
        case CUPTI_ACTIVITY_KIND_MEMCPY:
          p.rec.memcpy.start = p.rec.memcpy.end = 0;
          break;
        case CUPTI_ACTIVITY_KIND_MEMCPY2:
          p.rec.p2p.start = p.rec.p2p.end = 0;
          break;
        case CUPTI_ACTIVITY_KIND_MEMSET:
          p.rec.memset.start = p.rec.memset.end = 0;
          break;
        default:
          break;
      }
    }
    const size_t size = RecordSize(p.rec.base.kind);
    ClientBuffer& cur = s.current;
    const bool full =
        cur.buf != nullptr &&
        (cur.used + size > cur.size || (cur.max_records != 0 && cur.count >= cur.max_records));
    if (full) QueueCurrent(s, false);
    if (s.current.buf == nullptr && !refused && !RequestBuffer(s, request)) refused = true;
    if (s.current.buf == nullptr || s.current.used + size > s.current.size) {
      std::lock_guard<std::mutex> lock(s.mu);
      ++s.dropped;  // no buffer (refused) or one too small for this record
      continue;
    }
    std::memcpy(s.current.buf + s.current.used, &p.rec, size);
    s.current.used += size;
    ++s.current.count;
  }
  if (mode == PlaceMode::kFlush || mode == PlaceMode::kForced) QueueCurrent(s, false);
  fill.unlock();
  if (mode == PlaceMode::kThreshold) {
    // Full buffers go back from CUPTI's own thread, as with the real library.
    std::lock_guard<std::mutex> lock(s.mu);
    if (!s.done.empty()) {
      StartWorkerLocked(s);
      s.worker_cv.notify_one();
    }
  } else {
    Deliver();
  }
}

void Deliver() {
  State& s = S();
  std::lock_guard<std::recursive_mutex> deliver(s.deliver_mu);
  for (;;) {
    Completed c;
    CUpti_BuffersCallbackCompleteFunc complete;
    {
      std::lock_guard<std::mutex> lock(s.mu);
      if (s.done.empty()) return;
      c = s.done.front();
      s.done.pop_front();
      complete = s.complete;
    }
    if (complete != nullptr) complete(nullptr, 0, c.buf, c.size, c.valid);
  }
}

void WorkerMain() {
  State& s = S();
  auto next_periodic = std::chrono::steady_clock::now();
  std::unique_lock<std::mutex> lock(s.mu);
  for (;;) {
    const uint32_t period = s.flush_period_ms;
    if (period != 0) {
      s.worker_cv.wait_until(lock, next_periodic, [&] { return s.worker_stop || !s.done.empty(); });
    } else {
      s.worker_cv.wait_for(lock, std::chrono::milliseconds(200), [&] {
        return s.worker_stop || !s.done.empty() || s.flush_period_ms != 0;
      });
    }
    if (s.worker_stop) return;
    const auto now = std::chrono::steady_clock::now();
    const bool periodic = s.flush_period_ms != 0 && now >= next_periodic;
    if (s.flush_period_ms != 0 && now >= next_periodic) {
      next_periodic = now + std::chrono::milliseconds(s.flush_period_ms);
    } else if (s.flush_period_ms == 0) {
      next_periodic = now;
    }
    lock.unlock();
    if (periodic) Place(PlaceMode::kPeriodic);  // delivers full buffers only
    Deliver();
    lock.lock();
  }
}

void StartWorkerLocked(State& s) {
  if (s.worker_started) return;
  s.worker_started = true;
  s.worker_stop = false;
  s.worker = std::thread(WorkerMain);
}

// The process that loaded the library; a fork child inherits the state but none of the
// threads, so its exit must not join the parent's worker or take locks a parent thread held.
pid_t g_load_pid = 0;

void AtExit() {
  if (getpid() != g_load_pid) return;
  State& s = S();
  // Hand over what the client left behind (nothing, if it flushed and disabled at exit).
  bool leftovers;
  {
    std::lock_guard<std::mutex> lock(s.mu);
    leftovers = s.request != nullptr && (!s.pending.empty() || !s.done.empty());
  }
  {
    std::lock_guard<std::recursive_mutex> fill(s.fill_mu);
    leftovers = leftovers || s.current.count != 0;
  }
  if (leftovers) Place(PlaceMode::kForced);
  std::thread worker;
  {
    std::lock_guard<std::mutex> lock(s.mu);
    s.worker_stop = true;
    s.worker_cv.notify_all();
    worker.swap(s.worker);
  }
  if (worker.joinable()) worker.join();
}

__attribute__((constructor)) void OnLoad() {
  g_load_pid = getpid();
  (void)S();
  (void)Names();
  simInternalSetTracer(&kTracer);
  std::atexit(AtExit);
}

const char* ResultString(CUptiResult r) {
  switch (r) {
    case CUPTI_SUCCESS:
      return "CUPTI_SUCCESS";
    case CUPTI_ERROR_INVALID_PARAMETER:
      return "CUPTI_ERROR_INVALID_PARAMETER";
    case CUPTI_ERROR_INVALID_DEVICE:
      return "CUPTI_ERROR_INVALID_DEVICE";
    case CUPTI_ERROR_INVALID_CONTEXT:
      return "CUPTI_ERROR_INVALID_CONTEXT";
    case CUPTI_ERROR_INVALID_OPERATION:
      return "CUPTI_ERROR_INVALID_OPERATION";
    case CUPTI_ERROR_OUT_OF_MEMORY:
      return "CUPTI_ERROR_OUT_OF_MEMORY";
    case CUPTI_ERROR_PARAMETER_SIZE_NOT_SUFFICIENT:
      return "CUPTI_ERROR_PARAMETER_SIZE_NOT_SUFFICIENT";
    case CUPTI_ERROR_API_NOT_IMPLEMENTED:
      return "CUPTI_ERROR_API_NOT_IMPLEMENTED";
    case CUPTI_ERROR_MAX_LIMIT_REACHED:
      return "CUPTI_ERROR_MAX_LIMIT_REACHED";
    case CUPTI_ERROR_NOT_READY:
      return "CUPTI_ERROR_NOT_READY";
    case CUPTI_ERROR_NOT_INITIALIZED:
      return "CUPTI_ERROR_NOT_INITIALIZED";
    case CUPTI_ERROR_QUEUE_EMPTY:
      return "CUPTI_ERROR_QUEUE_EMPTY";
    case CUPTI_ERROR_INVALID_KIND:
      return "CUPTI_ERROR_INVALID_KIND";
    case CUPTI_ERROR_NOT_SUPPORTED:
      return "CUPTI_ERROR_NOT_SUPPORTED";
    case CUPTI_ERROR_LEGACY_PROFILER_NOT_SUPPORTED:
      return "CUPTI_ERROR_LEGACY_PROFILER_NOT_SUPPORTED";
    case CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED:
      return "CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED";
    case CUPTI_ERROR_UNKNOWN:
      return "CUPTI_ERROR_UNKNOWN";
    default:
      return nullptr;
  }
}

bool ValidSubscriber(State& s, CUpti_SubscriberHandle h) {
  return s.subscribed && h == reinterpret_cast<CUpti_SubscriberHandle>(&s);
}

}  // namespace

// =================================================================================================
// Exported CUPTI API
// =================================================================================================

CUPTI_EXPORT CUptiResult cuptiGetVersion(uint32_t* version) {
  SIM_FAULT_POINT();
  if (version == nullptr) return CUPTI_ERROR_INVALID_PARAMETER;
  *version = CUPTI_API_VERSION;
  return CUPTI_SUCCESS;
}

CUPTI_EXPORT CUptiResult cuptiGetResultString(CUptiResult result, const char** str) {
  if (str == nullptr) return CUPTI_ERROR_INVALID_PARAMETER;
  const char* s = ResultString(result);
  if (s == nullptr) {
    *str = nullptr;
    return CUPTI_ERROR_INVALID_PARAMETER;
  }
  *str = s;
  return CUPTI_SUCCESS;
}

CUPTI_EXPORT CUptiResult cuptiGetErrorMessage(CUptiResult result, const char** str) {
  return cuptiGetResultString(result, str);
}

CUPTI_EXPORT CUptiResult cuptiGetLastError(void) {
  return CUPTI_SUCCESS;
}

CUPTI_EXPORT CUptiResult cuptiGetTimestamp(uint64_t* timestamp) {
  SIM_FAULT_POINT();
  if (timestamp == nullptr) return CUPTI_ERROR_INVALID_PARAMETER;
  *timestamp = static_cast<uint64_t>(static_cast<int64_t>(simNow()) + CuptiClockShift(S()));
  return CUPTI_SUCCESS;
}

CUPTI_EXPORT CUptiResult cuptiGetContextId(CUcontext context, uint32_t* contextId) {
  SIM_FAULT_POINT();
  if (contextId == nullptr) return CUPTI_ERROR_INVALID_PARAMETER;
  return simInternalContextInfo(context, nullptr, contextId) ? CUPTI_SUCCESS
                                                             : CUPTI_ERROR_INVALID_CONTEXT;
}

CUPTI_EXPORT CUptiResult cuptiGetDeviceId(CUcontext context, uint32_t* deviceId) {
  SIM_FAULT_POINT();
  if (deviceId == nullptr) return CUPTI_ERROR_INVALID_PARAMETER;
  if (context == nullptr) {
    if (cuCtxGetCurrent(&context) != CUDA_SUCCESS || context == nullptr) {
      return CUPTI_ERROR_INVALID_CONTEXT;
    }
  }
  return simInternalContextInfo(context, deviceId, nullptr) ? CUPTI_SUCCESS
                                                            : CUPTI_ERROR_INVALID_CONTEXT;
}

CUPTI_EXPORT CUptiResult cuptiGetStreamId(CUcontext context, CUstream stream, uint32_t* streamId) {
  SIM_FAULT_POINT();
  (void)context;
  if (streamId == nullptr) return CUPTI_ERROR_INVALID_PARAMETER;
  return simInternalStreamInfo(stream, nullptr, streamId) ? CUPTI_SUCCESS
                                                          : CUPTI_ERROR_INVALID_STREAM;
}

CUPTI_EXPORT CUptiResult cuptiGetStreamIdEx(CUcontext context, CUstream stream,
                                            uint8_t perThreadStream, uint32_t* streamId) {
  (void)perThreadStream;
  return cuptiGetStreamId(context, stream, streamId);
}

CUPTI_EXPORT CUptiResult cuptiDeviceSupported(CUdevice dev, int* support) {
  if (support == nullptr) return CUPTI_ERROR_INVALID_PARAMETER;
  if (dev < 0 || dev >= simNumDevices()) return CUPTI_ERROR_INVALID_DEVICE;
  *support = 1;
  return CUPTI_SUCCESS;
}

CUPTI_EXPORT CUptiResult cuptiComputeCapabilitySupported(int major, int minor, int* support) {
  (void)minor;
  if (support == nullptr) return CUPTI_ERROR_INVALID_PARAMETER;
  *support = major >= 7 ? 1 : 0;
  return CUPTI_SUCCESS;
}

// ---- callbacks --------------------------------------------------------------------------------

namespace {
CUptiResult SubscribeImpl(CUpti_SubscriberHandle* subscriber, CUpti_CallbackFunc callback,
                          void* userdata, CUpti_SubscriberParams* params) {
  if (subscriber == nullptr) return CUPTI_ERROR_INVALID_PARAMETER;
  if (params != nullptr && params->structSize == 0) return CUPTI_ERROR_INVALID_PARAMETER;
  State& s = S();
  std::lock_guard<std::mutex> lock(s.mu);
  if (s.faults.subscribe_refused || s.subscribed) {
    if (params != nullptr && params->oldSubscriberName != nullptr &&
        params->oldSubscriberSize > 0) {
      const std::string old = s.subscribed ? "CUPTI for " + s.subscriber_name
                                           : std::string("Nsight Systems (simulated)");
      std::snprintf(params->oldSubscriberName, params->oldSubscriberSize, "%s", old.c_str());
    }
    *subscriber = nullptr;
    return CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED;
  }
  s.subscribed = true;
  s.subscriber_name =
      params != nullptr && params->subscriberName != nullptr
          ? std::string(params->subscriberName).substr(0, CUPTI_SUBSCRIBER_NAME_MAX_LEN)
          : std::string("client");
  s.userdata.store(userdata, std::memory_order_release);
  s.callback.store(callback, std::memory_order_release);
  *subscriber = reinterpret_cast<CUpti_SubscriberHandle>(&s);
  return CUPTI_SUCCESS;
}
}  // namespace

CUPTI_EXPORT CUptiResult cuptiSubscribe(CUpti_SubscriberHandle* subscriber,
                                        CUpti_CallbackFunc callback, void* userdata) {
  SIM_FAULT_POINT();
  return SubscribeImpl(subscriber, callback, userdata, nullptr);
}

CUPTI_EXPORT CUptiResult cuptiSubscribe_v2(CUpti_SubscriberHandle* subscriber,
                                           CUpti_CallbackFunc callback, void* userdata,
                                           CUpti_SubscriberParams* pParams) {
  SIM_FAULT_POINT();
  return SubscribeImpl(subscriber, callback, userdata, pParams);
}

CUPTI_EXPORT CUptiResult cuptiUnsubscribe(CUpti_SubscriberHandle subscriber) {
  SIM_FAULT_POINT();
  State& s = S();
  std::lock_guard<std::mutex> lock(s.mu);
  if (!ValidSubscriber(s, subscriber)) return CUPTI_ERROR_INVALID_PARAMETER;
  s.subscribed = false;
  s.callback.store(nullptr, std::memory_order_release);
  // userdata stays: a callback already past its load of `callback` still gets the value it
  // was subscribed with.
  for (auto& d : s.cb_enabled) {
    for (auto& c : d) c.store(0);
  }
  return CUPTI_SUCCESS;
}

CUPTI_EXPORT CUptiResult cuptiSupportedDomains(size_t* domainCount,
                                               CUpti_DomainTable* domainTable) {
  if (domainCount == nullptr || domainTable == nullptr) return CUPTI_ERROR_INVALID_PARAMETER;
  static CUpti_CallbackDomain domains[] = {CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_CB_DOMAIN_RUNTIME_API,
                                           CUPTI_CB_DOMAIN_RESOURCE,   CUPTI_CB_DOMAIN_SYNCHRONIZE,
                                           CUPTI_CB_DOMAIN_NVTX,       CUPTI_CB_DOMAIN_STATE};
  *domainCount = sizeof(domains) / sizeof(domains[0]);
  *domainTable = domains;
  return CUPTI_SUCCESS;
}

CUPTI_EXPORT CUptiResult cuptiGetCallbackState(uint32_t* enable, CUpti_SubscriberHandle subscriber,
                                               CUpti_CallbackDomain domain, CUpti_CallbackId cbid) {
  State& s = S();
  if (enable == nullptr) return CUPTI_ERROR_INVALID_PARAMETER;
  std::lock_guard<std::mutex> lock(s.mu);
  if (!ValidSubscriber(s, subscriber) || cbid >= DomainCbidLimit(domain)) {
    return CUPTI_ERROR_INVALID_PARAMETER;
  }
  *enable = s.cb_enabled[domain][cbid].load();
  return CUPTI_SUCCESS;
}

CUPTI_EXPORT CUptiResult cuptiEnableCallback(uint32_t enable, CUpti_SubscriberHandle subscriber,
                                             CUpti_CallbackDomain domain, CUpti_CallbackId cbid) {
  SIM_FAULT_POINT();
  State& s = S();
  std::lock_guard<std::mutex> lock(s.mu);
  if (!ValidSubscriber(s, subscriber) || cbid >= DomainCbidLimit(domain)) {
    return CUPTI_ERROR_INVALID_PARAMETER;
  }
  s.cb_enabled[domain][cbid].store(enable != 0 ? 1 : 0);
  return CUPTI_SUCCESS;
}

CUPTI_EXPORT CUptiResult cuptiEnableDomain(uint32_t enable, CUpti_SubscriberHandle subscriber,
                                           CUpti_CallbackDomain domain) {
  SIM_FAULT_POINT();
  State& s = S();
  std::lock_guard<std::mutex> lock(s.mu);
  const size_t limit = DomainCbidLimit(domain);
  if (!ValidSubscriber(s, subscriber) || limit == 0) return CUPTI_ERROR_INVALID_PARAMETER;
  for (size_t c = 0; c < limit; ++c) s.cb_enabled[domain][c].store(enable != 0 ? 1 : 0);
  return CUPTI_SUCCESS;
}

CUPTI_EXPORT CUptiResult cuptiEnableAllDomains(uint32_t enable, CUpti_SubscriberHandle subscriber) {
  SIM_FAULT_POINT();
  State& s = S();
  std::lock_guard<std::mutex> lock(s.mu);
  if (!ValidSubscriber(s, subscriber)) return CUPTI_ERROR_INVALID_PARAMETER;
  for (int d = 1; d < CUPTI_CB_DOMAIN_SIZE; ++d) {
    const size_t limit = DomainCbidLimit(static_cast<CUpti_CallbackDomain>(d));
    for (size_t c = 0; c < limit; ++c) s.cb_enabled[d][c].store(enable != 0 ? 1 : 0);
  }
  return CUPTI_SUCCESS;
}

CUPTI_EXPORT CUptiResult cuptiGetCallbackName(CUpti_CallbackDomain domain, uint32_t cbid,
                                              const char** name) {
  SIM_FAULT_POINT();
  if (name == nullptr) return CUPTI_ERROR_INVALID_PARAMETER;
  *name = nullptr;
  if ((domain != CUPTI_CB_DOMAIN_RUNTIME_API && domain != CUPTI_CB_DOMAIN_DRIVER_API) ||
      cbid >= kMaxCbid) {
    return CUPTI_ERROR_INVALID_PARAMETER;
  }
  *name = Names().full[domain][cbid];
  return *name != nullptr ? CUPTI_SUCCESS : CUPTI_ERROR_INVALID_PARAMETER;
}

// ---- activity API -------------------------------------------------------------------------------

namespace {
bool KindKnown(CUpti_ActivityKind kind) {
  return kind > CUPTI_ACTIVITY_KIND_INVALID && kind < CUPTI_ACTIVITY_KIND_COUNT;
}

CUptiResult SetKind(CUpti_ActivityKind kind, bool on) {
  if (!KindKnown(kind)) return CUPTI_ERROR_INVALID_KIND;
  State& s = S();
  std::lock_guard<std::mutex> lock(s.mu);
  s.kind_enabled[kind].store(on ? 1 : 0);
  // The RUNTIME / DRIVER kinds switch every API on or off, overriding earlier per-cbid choices.
  if (kind == CUPTI_ACTIVITY_KIND_RUNTIME) {
    for (auto& c : s.runtime_api) c.store(on ? 1 : 0);
  } else if (kind == CUPTI_ACTIVITY_KIND_DRIVER) {
    for (auto& c : s.driver_api) c.store(on ? 1 : 0);
  }
  if (on) StartWorkerLocked(s);
  return CUPTI_SUCCESS;
}
}  // namespace

CUPTI_EXPORT CUptiResult cuptiActivityEnable(CUpti_ActivityKind kind) {
  SIM_FAULT_POINT();
  return SetKind(kind, true);
}

CUPTI_EXPORT CUptiResult cuptiActivityDisable(CUpti_ActivityKind kind) {
  SIM_FAULT_POINT();
  return SetKind(kind, false);
}

CUPTI_EXPORT CUptiResult cuptiActivityEnableContext(CUcontext context, CUpti_ActivityKind kind) {
  SIM_FAULT_POINT();
  (void)context;  // the sim does not scope activity per context
  return SetKind(kind, true);
}

CUPTI_EXPORT CUptiResult cuptiActivityDisableContext(CUcontext context, CUpti_ActivityKind kind) {
  SIM_FAULT_POINT();
  (void)context;
  return SetKind(kind, false);
}

CUPTI_EXPORT CUptiResult cuptiActivityEnableAndDump(CUpti_ActivityKind kind) {
  return cuptiActivityEnable(kind);
}

CUPTI_EXPORT CUptiResult cuptiActivityEnableRuntimeApi(CUpti_CallbackId cbid, uint8_t enable) {
  SIM_FAULT_POINT();
  if (cbid >= CUPTI_RUNTIME_TRACE_CBID_SIZE) return CUPTI_ERROR_INVALID_PARAMETER;
  S().runtime_api[cbid].store(enable != 0 ? 1 : 0);
  return CUPTI_SUCCESS;
}

CUPTI_EXPORT CUptiResult cuptiActivityEnableDriverApi(CUpti_CallbackId cbid, uint8_t enable) {
  SIM_FAULT_POINT();
  if (cbid >= CUPTI_DRIVER_TRACE_CBID_SIZE) return CUPTI_ERROR_INVALID_PARAMETER;
  S().driver_api[cbid].store(enable != 0 ? 1 : 0);
  return CUPTI_SUCCESS;
}

CUPTI_EXPORT CUptiResult
cuptiActivityRegisterCallbacks(CUpti_BuffersCallbackRequestFunc funcBufferRequested,
                               CUpti_BuffersCallbackCompleteFunc funcBufferCompleted) {
  SIM_FAULT_POINT();
  if (funcBufferRequested == nullptr || funcBufferCompleted == nullptr) {
    return CUPTI_ERROR_INVALID_PARAMETER;
  }
  State& s = S();
  std::lock_guard<std::mutex> lock(s.mu);
  s.request = funcBufferRequested;
  s.complete = funcBufferCompleted;
  return CUPTI_SUCCESS;
}

CUPTI_EXPORT CUptiResult cuptiActivityFlushAll(uint32_t flag) {
  SIM_FAULT_POINT();
  State& s = S();
  {
    std::lock_guard<std::mutex> lock(s.mu);
    if (s.request == nullptr) return CUPTI_ERROR_INVALID_OPERATION;
  }
  Place((flag & CUPTI_ACTIVITY_FLAG_FLUSH_FORCED) != 0 ? PlaceMode::kForced : PlaceMode::kFlush);
  return CUPTI_SUCCESS;
}

CUPTI_EXPORT CUptiResult cuptiActivityFlush(CUcontext context, uint32_t streamId, uint32_t flag) {
  (void)context;
  (void)streamId;
  return cuptiActivityFlushAll(flag);
}

CUPTI_EXPORT CUptiResult cuptiActivityFlushPeriod(uint32_t time) {
  SIM_FAULT_POINT();
  State& s = S();
  std::lock_guard<std::mutex> lock(s.mu);
  s.flush_period_ms = time;
  if (time != 0) StartWorkerLocked(s);
  s.worker_cv.notify_all();
  return CUPTI_SUCCESS;
}

CUPTI_EXPORT CUptiResult cuptiActivityGetNextRecord(uint8_t* buffer, size_t validBufferSizeBytes,
                                                    CUpti_Activity** record) {
  SIM_FAULT_POINT();
  if (buffer == nullptr || record == nullptr) return CUPTI_ERROR_INVALID_PARAMETER;
  const uintptr_t begin = reinterpret_cast<uintptr_t>(buffer);
  const uintptr_t end = begin + validBufferSizeBytes;
  uintptr_t pos;
  if (*record == nullptr) {
    pos = (begin + 7u) & ~static_cast<uintptr_t>(7u);  // records start 8-aligned (see Place)
  } else {
    const uintptr_t cur = reinterpret_cast<uintptr_t>(*record);
    if (cur < begin || cur + sizeof(CUpti_Activity) > end) return CUPTI_ERROR_INVALID_PARAMETER;
    const size_t size = RecordSize((*record)->kind);
    if (size == 0) return CUPTI_ERROR_INVALID_KIND;
    pos = cur + size;
  }
  if (pos + sizeof(CUpti_Activity) > end) return CUPTI_ERROR_MAX_LIMIT_REACHED;
  CUpti_ActivityKind kind;
  std::memcpy(&kind, reinterpret_cast<const void*>(pos), sizeof(kind));
  const size_t size = RecordSize(kind);
  if (size == 0 || pos + size > end) return CUPTI_ERROR_INVALID_KIND;
  *record = reinterpret_cast<CUpti_Activity*>(pos);
  return CUPTI_SUCCESS;
}

CUPTI_EXPORT CUptiResult cuptiActivityGetNumDroppedRecords(CUcontext context, uint32_t streamId,
                                                           size_t* dropped) {
  SIM_FAULT_POINT();
  (void)context;
  (void)streamId;
  if (dropped == nullptr) return CUPTI_ERROR_INVALID_PARAMETER;
  // One global queue: the count is reset on read, so summing per-context queries stays correct.
  State& s = S();
  std::lock_guard<std::mutex> lock(s.mu);
  *dropped = static_cast<size_t>(s.dropped);
  s.dropped = 0;
  return CUPTI_SUCCESS;
}

namespace {
size_t AttrSize(CUpti_ActivityAttribute attr) {
  switch (attr) {
    case CUPTI_ACTIVITY_ATTR_ZEROED_OUT_ACTIVITY_BUFFER:
    case CUPTI_ACTIVITY_ATTR_MEM_ALLOCATION_TYPE_HOST_PINNED:
    case CUPTI_ACTIVITY_ATTR_PER_THREAD_ACTIVITY_BUFFER:
      return sizeof(uint8_t);
    case CUPTI_ACTIVITY_ATTR_DEVICE_BUFFER_SIZE:
    case CUPTI_ACTIVITY_ATTR_DEVICE_BUFFER_SIZE_CDP:
    case CUPTI_ACTIVITY_ATTR_DEVICE_BUFFER_POOL_LIMIT:
    case CUPTI_ACTIVITY_ATTR_PROFILING_SEMAPHORE_POOL_SIZE:
    case CUPTI_ACTIVITY_ATTR_PROFILING_SEMAPHORE_POOL_LIMIT:
    case CUPTI_ACTIVITY_ATTR_DEVICE_BUFFER_PRE_ALLOCATE_VALUE:
    case CUPTI_ACTIVITY_ATTR_PROFILING_SEMAPHORE_PRE_ALLOCATE_VALUE:
    case CUPTI_ACTIVITY_ATTR_DEVICE_BUFFER_SIZE_DEVICE_GRAPHS:
      return sizeof(size_t);
    default:
      return 0;
  }
}
}  // namespace

CUPTI_EXPORT CUptiResult cuptiActivityGetAttribute(CUpti_ActivityAttribute attr, size_t* valueSize,
                                                   void* value) {
  SIM_FAULT_POINT();
  const size_t need = AttrSize(attr);
  if (valueSize == nullptr || value == nullptr || need == 0) return CUPTI_ERROR_INVALID_PARAMETER;
  if (*valueSize < need) return CUPTI_ERROR_PARAMETER_SIZE_NOT_SUFFICIENT;
  State& s = S();
  std::lock_guard<std::mutex> lock(s.mu);
  const uint64_t v = s.attrs[attr];
  if (need == sizeof(uint8_t)) {
    const uint8_t b = static_cast<uint8_t>(v);
    std::memcpy(value, &b, 1);
  } else {
    const size_t z = static_cast<size_t>(v);
    std::memcpy(value, &z, sizeof(z));
  }
  *valueSize = need;
  return CUPTI_SUCCESS;
}

CUPTI_EXPORT CUptiResult cuptiActivitySetAttribute(CUpti_ActivityAttribute attr, size_t* valueSize,
                                                   void* value) {
  SIM_FAULT_POINT();
  const size_t need = AttrSize(attr);
  if (valueSize == nullptr || value == nullptr || need == 0) return CUPTI_ERROR_INVALID_PARAMETER;
  if (*valueSize < need) return CUPTI_ERROR_PARAMETER_SIZE_NOT_SUFFICIENT;
  State& s = S();
  std::lock_guard<std::mutex> lock(s.mu);
  if (need == sizeof(uint8_t)) {
    uint8_t b;
    std::memcpy(&b, value, 1);
    s.attrs[attr] = b;
  } else {
    size_t z;
    std::memcpy(&z, value, sizeof(z));
    s.attrs[attr] = z;
  }
  return CUPTI_SUCCESS;
}

CUPTI_EXPORT CUptiResult cuptiActivityPushExternalCorrelationId(CUpti_ExternalCorrelationKind kind,
                                                                uint64_t id) {
  SIM_FAULT_POINT();
  if (kind <= CUPTI_EXTERNAL_CORRELATION_KIND_INVALID ||
      kind >= CUPTI_EXTERNAL_CORRELATION_KIND_SIZE) {
    return CUPTI_ERROR_INVALID_PARAMETER;
  }
  t_external[kind].push_back(id);
  return CUPTI_SUCCESS;
}

CUPTI_EXPORT CUptiResult cuptiActivityPopExternalCorrelationId(CUpti_ExternalCorrelationKind kind,
                                                               uint64_t* lastId) {
  SIM_FAULT_POINT();
  if (kind <= CUPTI_EXTERNAL_CORRELATION_KIND_INVALID ||
      kind >= CUPTI_EXTERNAL_CORRELATION_KIND_SIZE) {
    return CUPTI_ERROR_INVALID_PARAMETER;
  }
  if (t_external[kind].empty()) return CUPTI_ERROR_QUEUE_EMPTY;
  if (lastId != nullptr) *lastId = t_external[kind].back();
  t_external[kind].pop_back();
  return CUPTI_SUCCESS;
}

CUPTI_EXPORT CUptiResult cuptiSetThreadIdType(CUpti_ActivityThreadIdType type) {
  SIM_FAULT_POINT();
  if (type != CUPTI_ACTIVITY_THREAD_ID_TYPE_DEFAULT &&
      type != CUPTI_ACTIVITY_THREAD_ID_TYPE_SYSTEM) {
    return CUPTI_ERROR_INVALID_PARAMETER;
  }
  S().thread_id_type.store(type);
  return CUPTI_SUCCESS;
}

CUPTI_EXPORT CUptiResult cuptiGetThreadIdType(CUpti_ActivityThreadIdType* type) {
  if (type == nullptr) return CUPTI_ERROR_INVALID_PARAMETER;
  *type = static_cast<CUpti_ActivityThreadIdType>(S().thread_id_type.load());
  return CUPTI_SUCCESS;
}

CUPTI_EXPORT CUptiResult cuptiActivityEnableLatencyTimestamps(uint8_t enable) {
  SIM_FAULT_POINT();
  S().latency_timestamps.store(enable != 0);
  return CUPTI_SUCCESS;
}

// Accepted for compatibility; they change nothing the sim models.
CUPTI_EXPORT CUptiResult cuptiActivityEnableLaunchAttributes(uint8_t) {
  return CUPTI_SUCCESS;
}
CUPTI_EXPORT CUptiResult cuptiActivityEnableDeviceGraph(uint8_t) {
  return CUPTI_SUCCESS;
}
CUPTI_EXPORT CUptiResult cuptiActivityEnableAllocationSource(uint8_t) {
  return CUPTI_SUCCESS;
}
CUPTI_EXPORT CUptiResult cuptiActivityEnableAllSyncRecords(uint8_t) {
  return CUPTI_SUCCESS;
}
CUPTI_EXPORT CUptiResult cuptiActivityEnableCudaEventDeviceTimestamps(uint8_t) {
  return CUPTI_SUCCESS;
}
// HW trace is Blackwell-only; the simulated GPU is not one.
CUPTI_EXPORT CUptiResult cuptiActivityEnableHWTrace(uint8_t enable) {
  return enable != 0 ? CUPTI_ERROR_NOT_SUPPORTED : CUPTI_SUCCESS;
}
// From now on every timestamp (records made from here on, cuptiGetTimestamp) is on the client's
// clock: the sim clock shifted by (callback() - sim clock), measured at each record, which is
// exact when the callback reads the host clock (the sim clock, sim_cuda.h).
CUPTI_EXPORT CUptiResult cuptiActivityRegisterTimestampCallback(CUpti_TimestampCallbackFunc fn) {
  SIM_FAULT_POINT();
  if (fn == nullptr) return CUPTI_ERROR_INVALID_PARAMETER;
  S().timestamp_cb.store(fn, std::memory_order_release);
  return CUPTI_SUCCESS;
}

CUPTI_EXPORT CUptiResult cuptiFinalize(void) {
  SIM_FAULT_POINT();
  State& s = S();
  // Deliver everything (forced), give back the empty current buffer, then detach.
  {
    std::lock_guard<std::mutex> lock(s.mu);
    if (s.request == nullptr) {
      ResetLocked(s);
      return CUPTI_SUCCESS;
    }
  }
  Place(PlaceMode::kForced);
  {
    std::lock_guard<std::recursive_mutex> fill(s.fill_mu);
    QueueCurrent(s, true);
  }
  Deliver();
  std::lock_guard<std::recursive_mutex> fill(s.fill_mu);
  std::lock_guard<std::recursive_mutex> deliver(s.deliver_mu);
  std::lock_guard<std::mutex> lock(s.mu);
  ResetLocked(s);
  return CUPTI_SUCCESS;
}
