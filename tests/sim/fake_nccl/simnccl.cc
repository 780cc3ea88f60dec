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
  // A user group's collectives on one communicator run as one kernel plan (1) or a plan each.
  bool fuse = EnvU64("GPUACCT_SIM_NCCL_FUSE", 1) != 0;
  // Sends and receives per kernel plan of a group.
  uint64_t p2p_per_plan = EnvU64("GPUACCT_SIM_NCCL_P2P_PER_PLAN", 2);
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

// What CUPTI names a kernel: its mangled symbol (CUpti_ActivityKernel10::name).  NCCL's device
// kernels take one ncclDevKernelArgsStorage<4096> argument; real CUPTI on an H200 reported
// "_Z22ncclDevKernel_SendRecv24ncclDevKernelArgsStorageILm4096EE" (tests/gpu, 2026-12-04).
std::string Mangled(const std::string& name) {
  return "_Z" + std::to_string(name.size()) + name + "24ncclDevKernelArgsStorageILm4096EE";
}

// The kernel of a plan and what every rank agreed on for it.
struct PlanKernel {
  OwedKernel times{};
  uint64_t enqueue = 0;  // when the plan's Coll / P2p events start (the truth's host_enqueue)
  uint64_t true_start = 0, true_end = 0, transfer = 0, link = 0, wait = 0;
  int64_t offset = 0;
  size_t last = 0;
};

// Meets the other ranks at (key, seq) and launches the plan's kernel: it starts at this rank's
// own stream-ordered start and ends when the last rank arrived plus the transfer of
// `moved_bytes` over the slowest link.
int RunKernel(simncclComm* c, uint64_t key, uint64_t seq, const std::string& kernel,
              const char* what, double moved_bytes, simStream_t stream, PlanKernel* out) {
  const int64_t offset = simClockOffset();
  out->enqueue = simNow();
  const uint64_t start = simNextOpStart(stream);
  if (start == 0) return SIMNCCL_ERR_SIM;
  simnccl::Arrival mine{start - static_cast<uint64_t>(offset), K().link_bytes_per_us()};
  std::vector<simnccl::Arrival> all{mine};
  if (c->info.nranks > 1) {
    const std::string why =
        c->rendezvous.meet(key, seq, c->info.rank, c->info.nranks, mine, K().timeout_s, &all);
    if (!why.empty()) {
      std::fprintf(stderr, "[simnccl] rank %d, comm %s, %s seq %" PRIu64 ": %s\n", c->info.rank,
                   Hex16(c->info.hash).c_str(), what, seq, why.c_str());
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
      static_cast<uint64_t>(moved_bytes * 1000.0 / static_cast<double>(slowest));
  const uint64_t true_end = all[last].true_start + transfer;
  const uint64_t local_end = true_end + static_cast<uint64_t>(offset);
  uint64_t got = 0;
  if (simLaunchKernelUntil(stream, kernel.c_str(), local_end, &got) != SIM_OK)
    return SIMNCCL_ERR_SIM;
  if (got != start) {
    std::fprintf(stderr, "[simnccl] rank %d: kernel started at %" PRIu64 ", predicted %" PRIu64
                 " (another thread used the stream or the clock)\n", c->info.rank, got, start);
    return SIMNCCL_ERR_SIM;
  }
  // The truth's host_enqueue_ns is when the Coll / P2p events start: after the launch (and its
  // launch cost) in NCCL's order.
  if (K().order == EventOrder::kLaunchFirst) out->enqueue = simNow();
  out->times.gpu_start = start;
  out->times.gpu_end = local_end;
  out->true_start = mine.true_start;
  out->true_end = true_end;
  out->transfer = transfer;
  out->link = mine.link_bytes_per_us;
  out->wait = all[last].true_start - mine.true_start;
  out->offset = offset;
  out->last = last;
  return SIMNCCL_OK;
}

// One truth line of an operation (coll) or of a plan's sends and receives (p2p) that ran on
// `k`, a kernel that carried `kernel_ops` operations.
int WriteTruth(simncclComm* c, bool p2p, uint64_t seq, const std::string& fields,
               const std::string& kernel, simStream_t stream, const PlanKernel& k,
               size_t kernel_ops) {
  char line[2048];
  const int n = std::snprintf(
      line, sizeof(line),
      "{\"kind\":\"%s\",\"process_rank\":%d,\"rank\":%d,\"nranks\":%d,\"comm\":\"%s\","
      "\"seq\":%" PRIu64
      ",%s,\"kernel\":\"%s\",\"kernel_ops\":%zu,\"device\":0,\"stream\":%u,"
      "\"host_enqueue_ns\":%" PRIu64 ",\"gpu_start_ns\":%" PRIu64 ",\"gpu_end_ns\":%" PRIu64
      ",\"true_gpu_start_ns\":%" PRIu64 ",\"true_gpu_end_ns\":%" PRIu64
      ",\"clock_offset_ns\":%" PRId64 ",\"last_rank\":%zu,\"wait_ns\":%" PRIu64
      ",\"transfer_ns\":%" PRIu64 ",\"link_bytes_per_us\":%" PRIu64 "}",
      p2p ? "p2p" : "coll", ProcessRank(), c->info.rank, c->info.nranks,
      Hex16(c->info.hash).c_str(), seq, fields.c_str(), kernel.c_str(), kernel_ops,
      simStreamId(stream), k.enqueue, k.times.gpu_start, k.times.gpu_end, k.true_start, k.true_end,
      k.offset, k.last, k.wait, k.transfer, k.link);
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

// The demangled name of a collective plan's kernel: one collective's own kernel, several of one
// function and type theirs, a mix the generic kernel (ASSUMED: NCCL's plan of differing works
// runs ncclDevKernel_Generic, its functions dispatched through ncclDevFuncTable).
std::string CollKernelName(const std::vector<PendingOp>& ops) {
  const PendingOp& op = ops[0];
  for (const PendingOp& o : ops) {
    if (o.kind != op.kind || o.type != op.type) return "ncclDevKernel_Generic";
  }
  char kernel[128];
  if (op.kind == Kind::kAllGather) {
    std::snprintf(kernel, sizeof(kernel), "ncclDevKernel_AllGather_%s_%s", simnccl::kAlgo,
                  simnccl::kProto);
  } else {
    std::snprintf(kernel, sizeof(kernel), "ncclDevKernel_%s_Sum_%s_%s_%s", Info(op.kind).func,
                  kTypes[op.type].kernel_tag, simnccl::kAlgo, simnccl::kProto);
  }
  return kernel;
}

// One kernel plan, as NCCL runs it (src/enqueue.cc, 2.23-2.28): the plan's kernel is launched
// (v5: inside a KernelLaunch event), then hostStreamPlanTask starts the plan's Group event and
// the Coll / P2p event of each of its operations (their group: that Group; v5's parent: the
// operation's API event), stops them (the end of the enqueue, not of the GPU work) and the
// Group.  With GPUACCT_SIM_NCCL_EVENT_ORDER=events_first the events come before the launch.
// Every rank meets once per plan: at (comm, the first collective's seq), or for p2p at (comm's
// p2p key, the plan's p2p seq).  Each operation's KernelCh events are owed to the proxy thread.
int RunPlan(simncclComm* c, bool p2p, const std::vector<PendingOp>& ops) {
  const Plugin& p = Plugin::get();
  const bool events_first = K().order == EventOrder::kEventsFirst;
  std::vector<OpInfo> infos;
  const uint64_t p2p_seq = p2p ? c->p2p_seq++ : 0;
  double moved = 0;
  uint64_t largest = 0;
  for (const PendingOp& op : ops) {
    infos.push_back(MakeOp(op, p2p ? p2p_seq : c->coll_seq++));
    largest = std::max(largest, op.bytes);
    if (!p2p) moved += MovedBytes(op.kind, op.bytes, c->info.nranks);
  }
  if (p2p) moved = MovedBytes(Kind::kSend, largest, c->info.nranks);
  const std::string kernel =
      Mangled(p2p ? std::string("ncclDevKernel_SendRecv") : CollKernelName(ops));
  void* group = nullptr;
  std::vector<void*> handles(ops.size(), nullptr);
  auto start_events = [&] {
    if (!c->plugin_on) return;
    group = p.start_group(c->context, c->info, c->mask);
    for (size_t i = 0; i < ops.size(); ++i) {
      void* parent = ops[i].api_handle != nullptr ? ops[i].api_handle : group;
      handles[i] = p.start_op(c->context, c->info, c->mask, infos[i], parent, group);
    }
  };
  if (events_first) start_events();
  void* launch = c->plugin_on ? p.start_kernel_launch(c->context, c->info, c->mask,
                                                      ops[0].api_handle, ops[0].stream)
                              : nullptr;
  PlanKernel k;
  const uint64_t key = p2p ? c->info.hash ^ kP2pKeySalt : c->info.hash;
  const int rc = RunKernel(c, key, p2p ? p2p_seq : infos[0].seq, kernel,
                           p2p ? "SendRecv" : infos[0].func, moved, ops[0].stream, &k);
  p.stop(launch);
  if (!events_first && rc == SIMNCCL_OK) start_events();  // NCCL: the plan's events now
  for (void* h : handles) p.stop(h);
  p.stop(group);
  if (rc != SIMNCCL_OK) return rc;
  int wrc = SIMNCCL_OK;
  if (p2p) {
    std::string fields = "\"collective\":\"SendRecv\",\"ops\":[";
    for (size_t i = 0; i < ops.size(); ++i) {
      char one[160];
      std::snprintf(one, sizeof(one),
                    "%s{\"func\":\"%s\",\"peer\":%d,\"bytes\":%" PRIu64 ",\"datatype\":\"%s\"}",
                    i ? "," : "", infos[i].func, infos[i].peer, ops[i].bytes, infos[i].datatype);
      fields += one;
    }
    fields += "],\"bytes\":" + std::to_string(largest);
    wrc = WriteTruth(c, true, p2p_seq, fields, kernel, ops[0].stream, k, ops.size());
  } else {
    for (size_t i = 0; i < ops.size() && wrc == SIMNCCL_OK; ++i) {
      char fields[256];
      std::snprintf(fields, sizeof(fields),
                    "\"collective\":\"%s\",\"bytes\":%" PRIu64
                    ",\"count\":%zu,\"datatype\":\"%s\","
                    "\"algo\":\"%s\",\"proto\":\"%s\"",
                    infos[i].func, ops[i].bytes, infos[i].count, infos[i].datatype, simnccl::kAlgo,
                    simnccl::kProto);
      wrc = WriteTruth(c, false, infos[i].seq, fields, kernel, ops[0].stream, k, ops.size());
    }
  }
  for (void* h : handles) Owe(c, {h, k.times.gpu_start, k.times.gpu_end, false, {}});
  return wrc;
}

// Enqueues what the group collected (or one ungrouped call), per communicator: its collectives
// -- fused into one plan when the user grouped several (GPUACCT_SIM_NCCL_FUSE, default 1), else
// a plan each -- then its sends and receives in plans of GPUACCT_SIM_NCCL_P2P_PER_PLAN (default
// 2: a send and a receive, as NCCL 2.28 ran a group of two send/receive pairs to its own rank
// on an H200: two SendRecv kernels).
int Flush(std::vector<std::pair<simncclComm*, PendingOp>>& pending) {
  int rc = SIMNCCL_OK;
  std::vector<simncclComm*> comms;
  for (auto& [c, op] : pending) {
    if (std::find(comms.begin(), comms.end(), c) == comms.end()) comms.push_back(c);
  }
  const bool fuse = K().fuse;
  const size_t per_plan = std::max<size_t>(1, K().p2p_per_plan);
  for (simncclComm* c : comms) {
    std::vector<PendingOp> colls, p2p;
    for (auto& [oc, op] : pending) {
      if (oc != c) continue;
      (op.kind == Kind::kSend || op.kind == Kind::kRecv ? p2p : colls).push_back(op);
    }
    if (fuse && !colls.empty() && rc == SIMNCCL_OK) rc = RunPlan(c, false, colls);
    for (size_t i = 0; !fuse && i < colls.size() && rc == SIMNCCL_OK; ++i) {
      rc = RunPlan(c, false, {colls[i]});
    }
    for (size_t i = 0; i < p2p.size() && rc == SIMNCCL_OK; i += per_plan) {
      const auto first = p2p.begin() + static_cast<std::ptrdiff_t>(i);
      const auto last =
          p2p.begin() + static_cast<std::ptrdiff_t>(std::min(p2p.size(), i + per_plan));
      rc = RunPlan(c, true, std::vector<PendingOp>(first, last));
    }
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
  if (!p2p && c->info.nranks == 1) {
    // NCCL runs a single-rank collective without a task (src/enqueue.cc: taskAppend returns
    // after ncclLaunchOneRank, a device-to-device copy for an out-of-place call): no kernel
    // plan, no profiler event (none in 2.28 for its API call either).  Copied at ~2 TB/s.
    simHostWork(K().call_cost_ns);
    return simMemcpyAsync(stream, SIM_MEMCPY_D2D, bytes, std::max<uint64_t>(1000, bytes / 2000),
                          0) == SIM_OK
               ? SIMNCCL_OK
               : SIMNCCL_ERR_SIM;
  }
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
