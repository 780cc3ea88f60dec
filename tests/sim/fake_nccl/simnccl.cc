// The fake NCCL (simnccl.h): communicators, collectives and groups on the simulated device,
// the cross-rank timing through the rendezvous file, the proxy thread that reports KernelCh
// events, and the truth file.
#include "simnccl.h"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cinttypes>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "plugin.h"
#include "profiler_abi.h"
#include "rendezvous.h"

using simnccl::CommInfo;
using simnccl::OpInfo;
using simnccl::Plugin;

namespace {

// Keys the p2p groups of a communicator apart from its collectives in the rendezvous file.
constexpr uint64_t kP2pKeySalt = 0x5032505f47524f55ull;

uint64_t EnvU64(const char* name, uint64_t fallback) {
  const char* v = std::getenv(name);
  if (v == nullptr || *v == '\0') return fallback;
  return std::strtoull(v, nullptr, 10);
}
double EnvDouble(const char* name, double fallback) {
  const char* v = std::getenv(name);
  if (v == nullptr || *v == '\0') return fallback;
  const double x = std::strtod(v, nullptr);
  return x > 0 ? x : fallback;
}

// The job's rank of this process (RANK, as torchrun sets it; -1 when unset): the truth names
// both it and the rank in the communicator, which differ for a sub-communicator.
int ProcessRank() {
  static const int rank = [] {
    const char* v = std::getenv("RANK");
    return v != nullptr && *v != '\0' ? std::atoi(v) : -1;
  }();
  return rank;
}

// When the plugin's Coll / P2p events start relative to the kernel launch.  Real NCCL (2.23 to
// 2.28, src/enqueue.cc and src/group.cc) launches a plan's kernel first (ncclLaunchKernel) and
// then, in ncclLaunchKernelAfter_NoCuda -> hostStreamPlanTask, starts and stops the events of
// the plan's collectives: kLaunchFirst, the default.  kEventsFirst is the order this fake had
// before (events around the launch), kept so that tests can vary what they assume.
enum class EventOrder { kLaunchFirst, kEventsFirst };

EventOrder EnvEventOrder() {
  const char* v = std::getenv("GPUACCT_SIM_NCCL_EVENT_ORDER");
  if (v == nullptr || *v == '\0' || std::strcmp(v, "launch_first") == 0) {
    return EventOrder::kLaunchFirst;
  }
  if (std::strcmp(v, "events_first") == 0) return EventOrder::kEventsFirst;
  std::fprintf(stderr, "[simnccl] GPUACCT_SIM_NCCL_EVENT_ORDER=%s: expected launch_first or "
               "events_first; using launch_first\n", v);
  return EventOrder::kLaunchFirst;
}

struct Knobs {
  // Link bandwidth of this rank (GB/s = bytes per ns) and its slowdown factor (2 = twice slower).
  double link_gbps = EnvDouble("GPUACCT_SIM_NCCL_LINK_GBPS", 50.0);
  double slowdown = EnvDouble("GPUACCT_SIM_NCCL_LINK_SLOWDOWN", 1.0);
  uint64_t base_latency_ns = EnvU64("GPUACCT_SIM_NCCL_LATENCY_NS", 5000);
  double timeout_s = EnvDouble("GPUACCT_SIM_NCCL_TIMEOUT_S", 30.0);
  EventOrder order = EnvEventOrder();
  // Host time of each collective / send / receive call before it is enqueued (NCCL's argument
  // checks and task append): without it the next call's launch would start on the very
  // nanosecond the previous plan's events did, which no real clock gives.
  uint64_t call_cost_ns = EnvU64("GPUACCT_SIM_NCCL_CALL_COST_NS", 2000);
  // simncclSetLinkSlowdown: a slowdown set at run time (0: the environment's).
  std::atomic<double> slowdown_now{0.0};
  uint64_t link_bytes_per_us() const {
    const double now = slowdown_now.load();
    return static_cast<uint64_t>(link_gbps * 1000.0 / (now > 0 ? now : slowdown));
  }
};
Knobs& K() {
  static Knobs* k = new Knobs();
  return *k;
}

// ---- the truth file (GPUACCT_SIM_NCCL_TRUTH) ----------------------------------------------------
std::mutex g_truth_mu;
std::FILE* g_truth = nullptr;
bool g_truth_opened = false;

int TruthLine(const std::string& line) {
  std::lock_guard<std::mutex> lock(g_truth_mu);
  if (!g_truth_opened) {
    g_truth_opened = true;
    const char* path = std::getenv("GPUACCT_SIM_NCCL_TRUTH");
    if (path != nullptr && *path != '\0') {
      g_truth = std::fopen(path, "w");
      if (g_truth == nullptr) std::fprintf(stderr, "[simnccl] cannot write the truth %s\n", path);
    }
  }
  if (g_truth == nullptr) return std::getenv("GPUACCT_SIM_NCCL_TRUTH") ? SIMNCCL_ERR_SYSTEM : 0;
  // Flushed per line: a rank killed by a test still leaves its whole lines.
  if (std::fprintf(g_truth, "%s\n", line.c_str()) < 0 || std::fflush(g_truth) != 0) {
    return SIMNCCL_ERR_SYSTEM;
  }
  return SIMNCCL_OK;
}

std::string Hex16(uint64_t x) {
  char buf[17];
  std::snprintf(buf, sizeof(buf), "%016" PRIx64, x);
  return buf;
}

// ---- data types -----------------------------------------------------------------------------------
struct TypeInfo {
  const char* nccl_name;   // as NCCL's profiler events name it
  const char* kernel_tag;  // as its kernel names do
  uint64_t size;
};
const TypeInfo kTypes[] = {
    {"ncclInt8", "i8", 1},        {"ncclUint8", "u8", 1},       {"ncclInt32", "i32", 4},
    {"ncclUint32", "u32", 4},     {"ncclInt64", "i64", 8},      {"ncclUint64", "u64", 8},
    {"ncclFloat16", "f16", 2},    {"ncclFloat32", "f32", 4},    {"ncclFloat64", "f64", 8},
    {"ncclBfloat16", "bf16", 2},
};
bool ValidType(simncclDataType_t t) {
  return t >= simncclInt8 && t <= simncclBfloat16;
}

enum class Kind { kAllReduce, kAllGather, kReduceScatter, kSend, kRecv };
struct KindInfo {
  const char* func;
  uint8_t func_id;  // ncclFunc numbering
};
KindInfo Info(Kind k) {
  switch (k) {
    case Kind::kAllReduce: return {"AllReduce", 4};
    case Kind::kAllGather: return {"AllGather", 2};
    case Kind::kReduceScatter: return {"ReduceScatter", 3};
    case Kind::kSend: return {"Send", 6};
    default: return {"Recv", 7};
  }
}

// Bytes a rank moves over its link (NCCL tests' bus-bandwidth factors): AllReduce 2(n-1)/n of
// the message; AllGather and ReduceScatter (n-1) times the per-rank part; p2p the message.
double MovedBytes(Kind k, uint64_t bytes, int n) {
  const double b = static_cast<double>(bytes);
  switch (k) {
    case Kind::kAllReduce: return 2.0 * (n - 1) * b / n;
    case Kind::kAllGather:
    case Kind::kReduceScatter: return static_cast<double>(n - 1) * b;
    default: return b;
  }
}

struct PendingOp {
  Kind kind;
  uint64_t bytes;
  simncclDataType_t type;
  int peer;
  simStream_t stream;
  void* api_handle;  // v5 CollApi / P2pApi event, started at the call
};

// A kernel whose KernelCh events the proxy thread still owes.
struct OwedKernel {
  void* parent;  // the Coll / P2p event
  uint64_t gpu_start;
  uint64_t gpu_end;
  bool started = false;
  void* channels[simnccl::kChannels] = {};  // the KernelCh events, once started
};

}  // namespace

struct simncclComm {
  CommInfo info;
  void* context = nullptr;
  uint64_t mask = 0;
  bool plugin_on = false;
  uint64_t coll_seq = 0;
  uint64_t p2p_seq = 0;
  simnccl::Rendezvous rendezvous;

  std::mutex mu;  // guards owed and stopping
  std::condition_variable cv;
  std::deque<OwedKernel> owed;
  bool stopping = false;
  std::thread proxy;

  void ProxyLoop();
};

// As NCCL's proxy thread: per channel a KernelCh event that starts once the sim clock passed
// the kernel's start and stops once it passed its end (at destroy: at once).  The kernels of a
// communicator run in order on its stream, so only the oldest is ever in flight.  Polls every
// 100 us of real time.
void simncclComm::ProxyLoop() {
  const Plugin& p = Plugin::get();
  std::unique_lock<std::mutex> lock(mu);
  for (;;) {
    while (!owed.empty()) {
      OwedKernel& k = owed.front();
      const uint64_t now = simNow();
      if (!k.started && (stopping || now >= k.gpu_start)) {
        k.started = true;
        OwedKernel copy = k;
        lock.unlock();
        for (uint8_t ch = 0; ch < simnccl::kChannels; ++ch) {
          copy.channels[ch] = p.start_kernel_ch(context, info, mask, copy.parent, ch,
                                                copy.gpu_start);
        }
        lock.lock();
        std::copy(std::begin(copy.channels), std::end(copy.channels), owed.front().channels);
        continue;
      }
      if (!k.started || (!stopping && now < k.gpu_end)) break;
      const OwedKernel done = k;
      owed.pop_front();
      lock.unlock();
      for (void* h : done.channels) p.stop_kernel_ch(h, done.gpu_end);
      lock.lock();
    }
    if (stopping && owed.empty()) return;
    cv.wait_for(lock, std::chrono::microseconds(100));
  }
}

namespace {

thread_local int t_group_depth = 0;
thread_local std::vector<std::pair<simncclComm*, PendingOp>> t_pending;
thread_local void* t_group_api = nullptr;  // v5 GroupApi event of the explicit group

// Meets the other ranks and launches the operation's kernel: it starts at this rank's own
// stream-ordered start and ends when the last rank arrived plus the transfer.  Writes the truth.
int RunKernel(simncclComm* c, uint64_t key, uint64_t seq, const char* kernel, Kind kind,
              uint64_t bytes, simStream_t stream, const std::string& truth_fields,
              OwedKernel* times) {
  const int64_t offset = simClockOffset();
  uint64_t enqueue = simNow();
  const uint64_t start = simNextOpStart(stream);
  if (start == 0) return SIMNCCL_ERR_SIM;
  simnccl::Arrival mine{start - static_cast<uint64_t>(offset), K().link_bytes_per_us()};
  std::vector<simnccl::Arrival> all{mine};
  if (c->info.nranks > 1) {
    const std::string why =
        c->rendezvous.meet(key, seq, c->info.rank, c->info.nranks, mine, K().timeout_s, &all);
    if (!why.empty()) {
      std::fprintf(stderr, "[simnccl] rank %d, comm %s, %s seq %" PRIu64 ": %s\n", c->info.rank,
                   Hex16(c->info.hash).c_str(), Info(kind).func, seq, why.c_str());
      return why.find("did not arrive") != std::string::npos ? SIMNCCL_ERR_TIMEOUT
                                                             : SIMNCCL_ERR_SYSTEM;
    }
  }
  size_t last = 0;
  uint64_t slowest = all[0].link_bytes_per_us;
  for (size_t r = 0; r < all.size(); ++r) {
    if (all[r].true_start > all[last].true_start) last = r;
    slowest = std::min(slowest, all[r].link_bytes_per_us);
  }
  if (slowest == 0) slowest = 1;
  const uint64_t transfer =
      K().base_latency_ns +
      static_cast<uint64_t>(MovedBytes(kind, bytes, c->info.nranks) * 1000.0 /
                            static_cast<double>(slowest));
  const uint64_t true_end = all[last].true_start + transfer;
  const uint64_t local_end = true_end + static_cast<uint64_t>(offset);
  uint64_t got = 0;
  if (simLaunchKernelUntil(stream, kernel, local_end, &got) != SIM_OK) return SIMNCCL_ERR_SIM;
  if (got != start) {
    std::fprintf(stderr, "[simnccl] rank %d: kernel started at %" PRIu64 ", predicted %" PRIu64
                 " (another thread used the stream or the clock)\n", c->info.rank, got, start);
    return SIMNCCL_ERR_SIM;
  }
  // The truth's host_enqueue_ns is when the Coll / P2p events start: after the launch (and its
  // launch cost) in NCCL's order.
  if (K().order == EventOrder::kLaunchFirst) enqueue = simNow();
  times->gpu_start = start;
  times->gpu_end = local_end;
  char line[2048];
  const int n = std::snprintf(line, sizeof(line),
                "{\"kind\":\"%s\",\"process_rank\":%d,\"rank\":%d,\"nranks\":%d,\"comm\":\"%s\","
                "\"seq\":%" PRIu64
                ",%s,\"kernel\":\"%s\",\"device\":0,\"stream\":%u,\"host_enqueue_ns\":%" PRIu64
                ",\"gpu_start_ns\":%" PRIu64 ",\"gpu_end_ns\":%" PRIu64
                ",\"true_gpu_start_ns\":%" PRIu64 ",\"true_gpu_end_ns\":%" PRIu64
                ",\"clock_offset_ns\":%" PRId64 ",\"last_rank\":%zu,\"wait_ns\":%" PRIu64
                ",\"transfer_ns\":%" PRIu64 ",\"link_bytes_per_us\":%" PRIu64 "}",
                kind == Kind::kSend || kind == Kind::kRecv ? "p2p" : "coll", ProcessRank(),
                c->info.rank,
                c->info.nranks, Hex16(c->info.hash).c_str(), seq, truth_fields.c_str(), kernel,
                simStreamId(stream), enqueue, start, local_end, mine.true_start, true_end,
                offset, last, all[last].true_start - mine.true_start, transfer,
                mine.link_bytes_per_us);
  if (n < 0 || static_cast<size_t>(n) >= sizeof(line)) return SIMNCCL_ERR_SYSTEM;  // never cut
  return TruthLine(line);
}

OpInfo MakeOp(const PendingOp& op, uint64_t seq) {
  OpInfo o;
  const KindInfo k = Info(op.kind);
  o.func = k.func;
  o.func_id = k.func_id;
  const TypeInfo& t = kTypes[op.type];
  o.count = op.bytes / t.size;
  o.datatype = t.nccl_name;
  o.datatype_id = static_cast<uint8_t>(op.type);
  o.bytes = op.bytes;
  o.seq = seq;
  o.peer = op.peer;
  o.stream = op.stream;
  return o;
}

// Hands a launched kernel's KernelCh events to the proxy thread (v3+, when asked for).
void Owe(simncclComm* c, const OwedKernel& k) {
  if (!c->plugin_on || Plugin::get().version() < 3 || (c->mask & simprof::kKernelCh) == 0) return;
  std::lock_guard<std::mutex> lock(c->mu);
  c->owed.push_back(k);
  c->cv.notify_one();
}

// One collective: the kernel, and its Coll event (start and stop: the end of the enqueue, not
// of the GPU work) right after the launch as NCCL does (before and around it with
// GPUACCT_SIM_NCCL_EVENT_ORDER=events_first), its KernelCh events owed to the proxy thread.
int EnqueueColl(simncclComm* c, const PendingOp& op, void* group) {
  const Plugin& p = Plugin::get();
  const uint64_t seq = c->coll_seq++;
  const OpInfo info = MakeOp(op, seq);
  void* parent = op.api_handle != nullptr ? op.api_handle : group;
  const bool events_first = K().order == EventOrder::kEventsFirst;
  void* h = c->plugin_on && events_first
                ? p.start_op(c->context, c->info, c->mask, info, parent, group)
                : nullptr;
  char kernel[128];
  if (op.kind == Kind::kAllGather) {
    std::snprintf(kernel, sizeof(kernel), "ncclDevKernel_AllGather_%s_%s", simnccl::kAlgo,
                  simnccl::kProto);
  } else {
    std::snprintf(kernel, sizeof(kernel), "ncclDevKernel_%s_Sum_%s_%s_%s", info.func,
                  kTypes[op.type].kernel_tag, simnccl::kAlgo, simnccl::kProto);
  }
  void* launch =
      c->plugin_on ? p.start_kernel_launch(c->context, c->info, c->mask, op.api_handle, op.stream)
                   : nullptr;
  char fields[256];
  std::snprintf(fields, sizeof(fields),
                "\"collective\":\"%s\",\"bytes\":%" PRIu64 ",\"count\":%zu,\"datatype\":\"%s\","
                "\"algo\":\"%s\",\"proto\":\"%s\"",
                info.func, op.bytes, info.count, info.datatype, simnccl::kAlgo, simnccl::kProto);
  OwedKernel k{h, 0, 0, false, {}};
  const int rc =
      RunKernel(c, c->info.hash, seq, kernel, op.kind, op.bytes, op.stream, fields, &k);
  p.stop(launch);
  if (c->plugin_on && !events_first && rc == SIMNCCL_OK) {  // NCCL: the plan's events now
    h = p.start_op(c->context, c->info, c->mask, info, parent, group);
    k.parent = h;
  }
  p.stop(h);
  if (rc == SIMNCCL_OK) Owe(c, k);
  return rc;
}

// The P2p event of one send or receive (nullptr without the plugin).
void* StartP2p(simncclComm* c, const PendingOp& op, const OpInfo& info, void* group) {
  void* parent = op.api_handle != nullptr ? op.api_handle : group;
  return c->plugin_on ? Plugin::get().start_op(c->context, c->info, c->mask, info, parent, group)
                      : nullptr;
}

// A group's sends and receives on one communicator: a P2p event each, one SendRecv kernel that
// every rank of the communicator meets at.
int EnqueueP2p(simncclComm* c, const std::vector<PendingOp>& ops, void* group) {
  const Plugin& p = Plugin::get();
  const uint64_t seq = c->p2p_seq++;
  const bool events_first = K().order == EventOrder::kEventsFirst;
  std::vector<void*> handles;
  std::vector<OpInfo> infos;
  uint64_t bytes = 0;
  std::string fields = "\"collective\":\"SendRecv\",\"ops\":[";
  for (size_t i = 0; i < ops.size(); ++i) {
    const OpInfo info = MakeOp(ops[i], seq);
    infos.push_back(info);
    if (events_first) handles.push_back(StartP2p(c, ops[i], info, group));
    bytes = std::max(bytes, ops[i].bytes);
    char one[160];
    std::snprintf(one, sizeof(one),
                  "%s{\"func\":\"%s\",\"peer\":%d,\"bytes\":%" PRIu64 ",\"datatype\":\"%s\"}",
                  i ? "," : "", info.func, info.peer, ops[i].bytes, info.datatype);
    fields += one;
  }
  fields += "],\"bytes\":" + std::to_string(bytes);
  void* launch = c->plugin_on ? p.start_kernel_launch(c->context, c->info, c->mask,
                                                      ops[0].api_handle, ops[0].stream)
                              : nullptr;
  OwedKernel k{nullptr, 0, 0, false, {}};
  const int rc = RunKernel(c, c->info.hash ^ kP2pKeySalt, seq, "ncclDevKernel_SendRecv",
                           Kind::kSend, bytes, ops[0].stream, fields, &k);
  p.stop(launch);
  if (!events_first && rc == SIMNCCL_OK) {  // NCCL: the plan's events after its launch
    for (size_t i = 0; i < ops.size(); ++i) handles.push_back(StartP2p(c, ops[i], infos[i], group));
  }
  for (void* h : handles) p.stop(h);
  if (rc == SIMNCCL_OK) {
    for (void* h : handles) Owe(c, {h, k.gpu_start, k.gpu_end, false, {}});
  }
  return rc;
}

// Enqueues what the group collected (or one ungrouped call): per communicator a Group event
// (v5: the GroupApi event's end-of-group state), its collectives in call order, then its p2p.
int Flush(std::vector<std::pair<simncclComm*, PendingOp>>& pending) {
  const Plugin& p = Plugin::get();
  int rc = SIMNCCL_OK;
  std::vector<simncclComm*> comms;
  for (auto& [c, op] : pending) {
    if (std::find(comms.begin(), comms.end(), c) == comms.end()) comms.push_back(c);
  }
  for (simncclComm* c : comms) {
    void* group = c->plugin_on ? p.start_group(c->context, c->info, c->mask) : nullptr;
    std::vector<PendingOp> p2p;
    for (auto& [oc, op] : pending) {
      if (oc != c) continue;
      if (op.kind == Kind::kSend || op.kind == Kind::kRecv) {
        p2p.push_back(op);
      } else if (rc == SIMNCCL_OK) {
        rc = EnqueueColl(c, op, group);
      }
    }
    if (!p2p.empty() && rc == SIMNCCL_OK) rc = EnqueueP2p(c, p2p, group);
    p.stop(group);
  }
  pending.clear();
  return rc;
}

int Submit(simncclComm* c, Kind kind, uint64_t bytes, simncclDataType_t type, int peer,
           simStream_t stream) {
  if (c == nullptr || stream == nullptr || !ValidType(type) || bytes == 0) {
    return SIMNCCL_ERR_INVALID;
  }
  const bool p2p = kind == Kind::kSend || kind == Kind::kRecv;
  if (p2p && (t_group_depth == 0 || peer < 0 || peer >= c->info.nranks)) {
    return SIMNCCL_ERR_INVALID;
  }
  const Plugin& p = Plugin::get();
  PendingOp op{kind, bytes, type, peer, stream, nullptr};
  // v5: the GroupApi event, of an implicit group (depth 1) around an ungrouped call, or of the
  // user's group (depth 2; opened by its first call, which names the communicator).
  void* implicit_api = nullptr;
  if (c->plugin_on && t_group_depth == 0) {
    implicit_api = p.start_group_api(c->context, c->info, c->mask, 1);
  } else if (c->plugin_on && t_group_api == nullptr) {
    t_group_api = p.start_group_api(c->context, c->info, c->mask, 2);
    p.record_state(t_group_api, simprof::kGroupStartApiStop);
  }
  if (c->plugin_on) {
    op.api_handle = p.start_op_api(c->context, c->info, c->mask, MakeOp(op, 0),
                                   t_group_depth == 0 ? implicit_api : t_group_api);
  }
  simHostWork(K().call_cost_ns);
  p.stop(op.api_handle);  // the API call returns here; its children refer to it later
  t_pending.emplace_back(c, op);
  if (t_group_depth > 0) return SIMNCCL_OK;
  p.record_state(implicit_api, simprof::kEndGroupApiStart);
  const int rc = Flush(t_pending);
  p.stop(implicit_api);
  return rc;
}

}  // namespace

extern "C" {

int simncclCommInitRank(simncclComm_t* comm, int nranks, int rank, uint64_t comm_hash,
                        const char* name, int nnodes) {
  if (comm == nullptr || nranks <= 0 || nranks > simnccl::Rendezvous::kMaxRanks || rank < 0 ||
      rank >= nranks || nnodes <= 0) {
    return SIMNCCL_ERR_INVALID;
  }
  // The name goes into the truth file's JSON as is: only bytes that need no escaping.
  for (const char* n = name != nullptr ? name : ""; *n != '\0'; ++n) {
    if (*n == '"' || *n == '\\' || static_cast<unsigned char>(*n) < 0x20) return SIMNCCL_ERR_INVALID;
  }
  auto* c = new simncclComm();
  c->info = {comm_hash, name != nullptr ? name : "", nranks, rank, nnodes};
  if (nranks > 1) {
    const char* path = std::getenv("GPUACCT_SIM_NCCL_RENDEZVOUS");
    const std::string why = c->rendezvous.open(path != nullptr ? path : "");
    if (!why.empty()) {
      std::fprintf(stderr, "[simnccl] rank %d: rendezvous: %s\n", rank, why.c_str());
      delete c;
      return SIMNCCL_ERR_SYSTEM;
    }
  }
  const Plugin& p = Plugin::get();
  c->plugin_on = p.init(c->info, &c->context, &c->mask);
  char line[640];
  std::snprintf(line, sizeof(line),
                "{\"kind\":\"comm\",\"process_rank\":%d,\"rank\":%d,\"nranks\":%d,\"nnodes\":%d,\"comm\":\"%s\","
                "\"name\":\"%s\",\"pid\":%d,\"clock_offset_ns\":%" PRId64
                ",\"plugin_version\":%d,\"plugin_initialised\":%s,\"event_mask\":%" PRIu64 "}",
                ProcessRank(), rank, nranks, nnodes, Hex16(comm_hash).c_str(), c->info.name.c_str(),
                static_cast<int>(getpid()), simClockOffset(), p.version(),
                c->plugin_on ? "true" : "false", c->mask);
  const int rc = TruthLine(line);
  c->proxy = std::thread([c] { c->ProxyLoop(); });
  *comm = c;
  return rc;
}

int simncclCommDestroy(simncclComm_t comm) {
  if (comm == nullptr) return SIMNCCL_ERR_INVALID;
  {
    std::lock_guard<std::mutex> lock(comm->mu);
    comm->stopping = true;
    comm->cv.notify_one();
  }
  comm->proxy.join();  // delivers every owed KernelCh event first
  if (comm->plugin_on) Plugin::get().finalize(comm->context);
  delete comm;
  return SIMNCCL_OK;
}

int simncclAllReduce(uint64_t bytes, simncclDataType_t type, simncclComm_t comm,
                     simStream_t stream) {
  return Submit(comm, Kind::kAllReduce, bytes, type, -1, stream);
}
int simncclAllGather(uint64_t bytes, simncclDataType_t type, simncclComm_t comm,
                     simStream_t stream) {
  return Submit(comm, Kind::kAllGather, bytes, type, -1, stream);
}
int simncclReduceScatter(uint64_t bytes, simncclDataType_t type, simncclComm_t comm,
                         simStream_t stream) {
  return Submit(comm, Kind::kReduceScatter, bytes, type, -1, stream);
}
int simncclSend(uint64_t bytes, simncclDataType_t type, int peer, simncclComm_t comm,
                simStream_t stream) {
  return Submit(comm, Kind::kSend, bytes, type, peer, stream);
}
int simncclRecv(uint64_t bytes, simncclDataType_t type, int peer, simncclComm_t comm,
                simStream_t stream) {
  return Submit(comm, Kind::kRecv, bytes, type, peer, stream);
}

int simncclGroupStart(void) {
  // v5's GroupApi event needs a communicator: it opens with the group's first call instead.
  ++t_group_depth;
  return SIMNCCL_OK;
}

int simncclGroupEnd(void) {
  if (t_group_depth == 0) return SIMNCCL_ERR_INVALID;
  if (--t_group_depth > 0) return SIMNCCL_OK;
  const Plugin& p = Plugin::get();
  void* api = t_group_api;
  t_group_api = nullptr;
  p.record_state(api, simprof::kEndGroupApiStart);
  const int rc = Flush(t_pending);
  p.stop(api);
  return rc;
}

int simncclProfilerVersion(simncclComm_t comm) {
  return comm != nullptr && comm->plugin_on ? Plugin::get().version() : 0;
}

int simncclTruthNote(const char* json_object) {
  if (json_object == nullptr || json_object[0] != '{') return SIMNCCL_ERR_INVALID;
  return TruthLine(json_object);
}

int simncclSetLinkSlowdown(double factor) {
  if (!(factor == 0 || factor >= 1)) return SIMNCCL_ERR_INVALID;
  K().slowdown_now.store(factor);
  return SIMNCCL_OK;
}

}  // extern "C"
