#include "inject/nccl/nccl_profiler.h"

#include <dlfcn.h>
#include <strings.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <mutex>
#include <new>
#include <string_view>

#include "analysis/model/nccl_names.h"
#include "analysis/model/stable_hash.h"
#include "inject/clock.h"
#include "inject/log.h"
#include "inject/nccl/nccl_profiler_abi.h"
#include "inject/recording/recorder.h"

namespace gpuacct::inject {
namespace {

namespace abi = gpuacct::nccl_abi;

// What we ask NCCL for: collectives, sends and receives, and the Group event of each kernel
// plan (the parent that says which of them one kernel ran: NCCL's event hierarchy Group ->
// Coll / P2p -> KernelCh, ext-profiler/README.md, *Event hierarchy*; 2.28 starts the Group for
// Coll / P2p anyway).  Not kernel-channel events: GPU times come from CUPTI's kernel records,
// and channel events cost on small messages (NVIDIA/nccl#1809); not proxy events (several per
// operation and channel).
constexpr int kOurMask = static_cast<int>(abi::kGroup | abi::kColl | abi::kP2p);

// ---- per-thread queues ----------------------------------------------------------------------

// Bounded single-producer / single-consumer queue (the enqueuing thread / the worker).
template <typename T>
class SpscQueue {
 public:
  explicit SpscQueue(size_t capacity_pow2)
      : mask_(capacity_pow2 - 1), slots_(new T[capacity_pow2]) {}
  bool try_push(const T& value) {
    const uint64_t head = head_.load(std::memory_order_relaxed);
    if (head - tail_cache_ > mask_) {
      tail_cache_ = tail_.load(std::memory_order_acquire);
      if (head - tail_cache_ > mask_) return false;
    }
    slots_[head & mask_] = value;
    head_.store(head + 1, std::memory_order_release);
    return true;
  }
  template <typename F>
  void drain(F&& f) {
    const uint64_t tail = tail_.load(std::memory_order_relaxed);
    const uint64_t head = head_.load(std::memory_order_acquire);
    for (uint64_t i = tail; i < head; ++i) f(slots_[i & mask_]);
    tail_.store(head, std::memory_order_release);
  }
  bool empty() const {
    return head_.load(std::memory_order_acquire) == tail_.load(std::memory_order_acquire);
  }

 private:
  alignas(64) std::atomic<uint64_t> head_{0};
  uint64_t tail_cache_ = 0;
  alignas(64) std::atomic<uint64_t> tail_{0};
  const uint64_t mask_;
  std::unique_ptr<T[]> slots_;
};

// 4096 records (~560 KB) per thread that enqueues collectives: the worker drains every flush
// period, and a rank enqueues far fewer collectives than that per period.
constexpr size_t kQueueRecords = 4096;

struct ThreadQueue {
  ThreadQueue() : queue(kQueueRecords) {}
  SpscQueue<PluginRecord> queue;
  uint32_t tid = 0;
  std::atomic<bool> orphaned{false};  // the thread exited; reused once drained
};

class QueueRegistry {
 public:
  static QueueRegistry& get() {
    static QueueRegistry* r = new QueueRegistry();  // never destroyed: used at exit
    return *r;
  }
  ThreadQueue* acquire(uint32_t tid) {
    std::lock_guard<std::mutex> lock(mu_);
    for (ThreadQueue* q : all_) {
      if (q->orphaned.load(std::memory_order_acquire) && q->queue.empty()) {
        q->tid = tid;
        q->orphaned.store(false, std::memory_order_relaxed);
        return q;
      }
    }
    auto* q = new (std::nothrow) ThreadQueue();
    if (q == nullptr) return nullptr;
    q->tid = tid;
    all_.push_back(q);
    return q;
  }
  void drain(std::vector<PluginRecord>& out) {
    std::lock_guard<std::mutex> lock(mu_);
    for (ThreadQueue* q : all_) q->queue.drain([&](const PluginRecord& r) { out.push_back(r); });
  }

 private:
  std::mutex mu_;
  std::vector<ThreadQueue*> all_;  // never freed: a handful per process
};

struct QueueExitGuard {
  ThreadQueue* queue = nullptr;
  ~QueueExitGuard() {
    if (queue != nullptr) queue->orphaned.store(true, std::memory_order_release);
  }
};
thread_local ThreadQueue* t_queue = nullptr;
thread_local bool t_queue_failed = false;

ThreadQueue* current_queue() {
  if (t_queue != nullptr || t_queue_failed) return t_queue;
  static thread_local QueueExitGuard guard;
  t_queue = QueueRegistry::get().acquire(static_cast<uint32_t>(syscall(SYS_gettid)));
  t_queue_failed = t_queue == nullptr;
  guard.queue = t_queue;
  return t_queue;
}

// ---- counters -------------------------------------------------------------------------------

std::atomic<int> g_version{0};
std::atomic<uint64_t> g_communicators{0};
std::atomic<uint64_t> g_records{0};
std::atomic<uint64_t> g_dropped{0};

void count_drop() {
  g_dropped.fetch_add(1, std::memory_order_relaxed);
}

// ---- event handles --------------------------------------------------------------------------

// A handle NCCL holds for an event: the other plugin's handle when it gets the event.  From a
// fixed pool, claimed lock-free round-robin: a released slot is reused only after the cursor has
// gone round the pool, so a child event started after its parent stopped (a proxy op after its
// collective's enqueue ended) still finds the parent's forwarded handle (unless 64 Ki events
// came in between).
struct Handle {
  std::atomic<uint32_t> in_use{0};
  std::atomic<void*> forwarded{nullptr};
  std::atomic<uint64_t> group{0};  // a Group event's id (0: another event)
};
constexpr size_t kHandles = size_t{1} << 16;
constexpr size_t kHandleProbes = 64;
Handle g_handles[kHandles];
std::atomic<uint64_t> g_handle_cursor{0};

Handle* claim_handle() {
  const uint64_t start = g_handle_cursor.fetch_add(1, std::memory_order_relaxed);
  for (size_t i = 0; i < kHandleProbes; ++i) {
    Handle& h = g_handles[(start + i) & (kHandles - 1)];
    uint32_t expected = 0;
    if (h.in_use.compare_exchange_strong(expected, 1, std::memory_order_acq_rel)) {
      h.forwarded.store(nullptr, std::memory_order_relaxed);
      h.group.store(0, std::memory_order_relaxed);
      return &h;
    }
  }
  return nullptr;
}

Handle* as_handle(void* p) {
  const auto a = reinterpret_cast<uintptr_t>(p);
  const auto lo = reinterpret_cast<uintptr_t>(&g_handles[0]);
  const auto hi = reinterpret_cast<uintptr_t>(&g_handles[kHandles]);
  if (a < lo || a >= hi || (a - lo) % sizeof(Handle) != 0) return nullptr;
  return static_cast<Handle*>(p);
}

// The Group event ids handed out (one per kernel plan NCCL runs; never 0).
std::atomic<uint64_t> g_group_ids{0};

uint64_t group_of_handle(void* ours) {
  Handle* h = as_handle(ours);
  return h != nullptr ? h->group.load(std::memory_order_acquire) : 0;
}

void* forwarded_of(void* ours) {
  Handle* h = as_handle(ours);
  return h != nullptr ? h->forwarded.load(std::memory_order_acquire) : nullptr;
}

// ---- forwarding -----------------------------------------------------------------------------

struct Forward {
  std::mutex mu;
  bool resolved = false;
  int version = 0;         // the version whose table `table` is; 0 = not forwarding
  const void* table = nullptr;
  std::string note;
};
Forward& forward() {
  static Forward* f = new Forward();  // never destroyed
  return *f;
}
std::atomic<const void*> g_forward_table{nullptr};
std::atomic<int> g_forward_version{0};

const void* our_table(int version);

// Loads the other plugin once, at the first init (never at load: no dlopen in a constructor).
// Rule: it gets our events only when it exports the very version NCCL called us with; a layout
// translation between versions is not attempted (docs/injection.md).
void resolve_forward(int version) {
  Forward& f = forward();
  std::lock_guard<std::mutex> lock(f.mu);
  if (f.resolved) return;
  f.resolved = true;
  const char* next = std::getenv(kNcclNextPluginEnv);
  if (next == nullptr || next[0] == '\0') return;
  const std::string name(next);
  void* lib = dlopen(name.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (lib == nullptr && name.find('/') == std::string::npos) {
    // NCCL's own rule for a bare name.
    lib = dlopen(("libnccl-profiler-" + name + ".so").c_str(), RTLD_NOW | RTLD_LOCAL);
  }
  if (lib == nullptr) {
    f.note = "cannot load the NCCL profiler plugin " + name + " named by NCCL_PROFILER_PLUGIN";
    log_line(f.note + "; it gets no events (gpuacct records collectives)");
    return;
  }
  const std::string symbol = "ncclProfiler_v" + std::to_string(version);
  const void* table = dlsym(lib, symbol.c_str());
  if (table == our_table(version)) {
    f.note = name + " is gpuacct itself: nothing to forward";
    return;
  }
  if (table == nullptr) {
    f.note = "the NCCL profiler plugin " + name + " has no " + symbol +
             " (NCCL called gpuacct with v" + std::to_string(version) + ")";
    log_line(f.note + "; it gets no events");
    return;
  }
  f.version = version;
  f.table = table;
  f.note = "forwards NCCL profiler events to " + name + " (" + symbol + ")";
  g_forward_version.store(version, std::memory_order_release);
  g_forward_table.store(table, std::memory_order_release);
}

template <typename Table>
const Table* forward_table(int version) {
  if (g_forward_version.load(std::memory_order_acquire) != version) return nullptr;
  return static_cast<const Table*>(g_forward_table.load(std::memory_order_acquire));
}

// ---- communicators --------------------------------------------------------------------------

constexpr uint64_t kContextMagic = 0x6770756163637421ull;  // "gpuacct!"

struct Context {
  uint64_t magic = kContextMagic;
  int version = 0;
  uint64_t comm_hash = 0;  // v4+: from init; v1-v3: from each descriptor
  int nranks = 0;          // v4+; 0 = unknown
  int rank = -1;           // v4+; v1-v3: from each descriptor
  int nodes = 0;           // v4+
  ShortName name;
  void* forwarded = nullptr;  // the other plugin's context
  int their_mask = 0;         // what the other plugin asked for (it may write it later)
  bool forwarding = false;
  // p2p sequence numbers per (peer, direction): the k-th send from A to B is B's k-th receive
  // from A.  Sized by nranks (v4+) or kUnknownRanks.
  std::unique_ptr<std::atomic<uint32_t>[]> p2p_seq;
  int p2p_peers = 0;
};
constexpr int kUnknownRanks = 4096;

Context* as_context(void* p) {
  auto* c = static_cast<Context*>(p);
  return c != nullptr && c->magic == kContextMagic ? c : nullptr;
}

void copy_short(const char* s, ShortName* out) {
  if (s == nullptr) return;
  size_t i = 0;
  for (; i + 1 < sizeof(out->text) && s[i] != '\0'; ++i) {
    const char c = s[i];
    out->text[i] = (c > ' ' && c < 127) ? c : '_';
  }
  out->text[i] = '\0';
}

Context* new_context(int version, const char* name, uint64_t hash, int nodes, int nranks,
                     int rank) {
  auto* c = new (std::nothrow) Context();
  if (c == nullptr) return nullptr;
  c->version = version;
  c->comm_hash = hash;
  c->nodes = nodes;
  c->nranks = nranks;
  c->rank = rank;
  copy_short(name, &c->name);
  c->p2p_peers = nranks > 0 ? nranks : kUnknownRanks;
  c->p2p_seq.reset(new (std::nothrow) std::atomic<uint32_t>[2 * static_cast<size_t>(c->p2p_peers)]());
  if (c->p2p_seq == nullptr) c->p2p_peers = 0;
  g_version.store(version, std::memory_order_relaxed);
  g_communicators.fetch_add(1, std::memory_order_relaxed);
  return c;
}

// ---- descriptor -> record -------------------------------------------------------------------

// Element sizes by NCCL's datatype names ("ncclFloat32"; v1's enum codes map to these).
size_t datatype_bytes(std::string_view n) {
  if (n.substr(0, 4) == "nccl") n.remove_prefix(4);
  struct Size {
    std::string_view name;
    size_t bytes;
  };
  static constexpr Size kSizes[] = {
      {"Int8", 1},     {"Char", 1},       {"Uint8", 1},      {"Int32", 4},
      {"Int", 4},      {"Uint32", 4},     {"Int64", 8},      {"Uint64", 8},
      {"Float16", 2},  {"Half", 2},       {"Float32", 4},    {"Float", 4},
      {"Float64", 8},  {"Double", 8},     {"Bfloat16", 2},   {"Float8e4m3", 1},
      {"Float8e5m2", 1}};
  for (const Size& s : kSizes) {
    if (s.name == n) return s.bytes;
  }
  return 0;
}

// v1 codes (ASSUMED from NCCL 2.23's ncclFunc_t, ncclDataType_t, NCCL_ALGO_*, NCCL_PROTO_*).
const char* v1_func(uint8_t code) {
  static constexpr const char* kNames[] = {"Broadcast",     "Reduce",    "AllGather",
                                           "ReduceScatter", "AllReduce", "SendRecv",
                                           "Send",          "Recv"};
  return code < 8 ? kNames[code] : nullptr;
}
const char* v1_datatype(uint8_t code) {
  static constexpr const char* kNames[] = {"ncclInt8",    "ncclUint8",    "ncclInt32",
                                           "ncclUint32",  "ncclInt64",    "ncclUint64",
                                           "ncclFloat16", "ncclFloat32",  "ncclFloat64",
                                           "ncclBfloat16", "ncclFloat8e4m3", "ncclFloat8e5m2"};
  return code < 12 ? kNames[code] : nullptr;
}
const char* v1_algo(uint8_t code) {
  static constexpr const char* kNames[] = {"TREE", "RING",     "COLLNET_DIRECT", "COLLNET_CHAIN",
                                           "NVLS", "NVLS_TREE", "PAT"};
  return code < 7 ? kNames[code] : nullptr;
}
const char* v1_proto(uint8_t code) {
  static constexpr const char* kNames[] = {"LL", "LL128", "SIMPLE"};
  return code < 3 ? kNames[code] : nullptr;
}

// The fields every version gives, as pointers/values (null / 0 when a version lacks them).
struct OpFields {
  uint64_t comm_hash = 0;
  bool has_comm_hash = false;  // v1-v3: in the descriptor
  uint64_t seq = 0;
  const char* func = nullptr;
  size_t count = 0;
  const char* datatype = nullptr;
  const char* algo = nullptr;
  const char* proto = nullptr;
  int peer = -1;
  bool p2p = false;
};

// The datatype without NCCL's "nccl" prefix ("Float32"), as the rows file shows it.
void copy_datatype(const char* d, ShortName* out) {
  if (d == nullptr) return;
  copy_short(std::strncmp(d, "nccl", 4) == 0 ? d + 4 : d, out);
}

// The communicator of one sender -> receiver pair's transfers (see record_op): the same on both
// ranks, distinct from the communicator's own hash.  FNV-1a of "p2p", the communicator hash
// (8 bytes) and the two ranks (4 bytes each), little-endian whatever the machine
// (docs/job_view.md, *Identity*).
uint64_t p2p_pair_hash(uint64_t comm, int sender, int receiver) noexcept {
  char key[3 + 8 + 4 + 4] = {'p', '2', 'p'};
  for (int i = 0; i < 8; ++i) key[3 + i] = static_cast<char>((comm >> (8 * i)) & 0xFF);
  const auto u_sender = static_cast<uint32_t>(sender);
  const auto u_receiver = static_cast<uint32_t>(receiver);
  for (int i = 0; i < 4; ++i) {
    key[11 + i] = static_cast<char>((u_sender >> (8 * i)) & 0xFF);
    key[15 + i] = static_cast<char>((u_receiver >> (8 * i)) & 0xFF);
  }
  return stable_hash64(std::string_view(key, sizeof key));
}

// Hot path: one record into the calling thread's queue.  No lock, no allocation after the
// thread's first call (classify_collective_name folds at most 15 bytes: small-string storage).
void record_op(Context& ctx, int rank, const OpFields& f, uint64_t group) {
  const int64_t now = now_ns();
  const int mode = g_mode.load(std::memory_order_relaxed);
  if (mode == kModeStopped || (mode == kModeIdle && !start_lazily())) return;
  ThreadQueue* q = current_queue();
  if (q == nullptr) {
    count_drop();
    return;
  }
  PluginRecord r;
  CollectiveRecord& c = r.record;
  c.source = CollectiveSource::kNcclPlugin;
  c.comm_hash = f.has_comm_hash ? f.comm_hash : ctx.comm_hash;
  c.host_enqueue = now;
  c.rank = ctx.rank >= 0 ? ctx.rank : rank;
  c.nranks = ctx.nranks;
  const size_t elem = f.datatype != nullptr ? datatype_bytes(f.datatype) : 0;
  c.bytes = static_cast<uint64_t>(f.count * elem);
  char func[16] = {};
  if (f.func != nullptr) std::strncpy(func, f.func, sizeof func - 1);
  c.type = classify_collective_name(std::string_view(func));
  if (c.type == CollectiveType::kNone) c.type = CollectiveType::kOther;
  copy_datatype(f.datatype, &c.datatype);
  copy_short(f.algo, &c.algo);
  copy_short(f.proto, &c.proto);
  if (f.p2p) {
    r.peer = f.peer;
    const bool send = func[0] == 'S';
    // One transfer is a send on one rank and a receive on another: both name it by the
    // communicator and the (sender, receiver) pair, numbered per pair -- the k-th send of a to b
    // is the k-th receive of b from a.  Never the communicator's own hash: NCCL gives p2p no
    // sequence number, and (comm, k) is already its k-th collective.
    if (c.rank >= 0 && f.peer >= 0) c.comm_hash = p2p_pair_hash(c.comm_hash, send ? c.rank : f.peer,
                                                                send ? f.peer : c.rank);
    if (f.peer >= 0 && f.peer < ctx.p2p_peers && ctx.p2p_seq != nullptr) {
      auto& counter = ctx.p2p_seq[static_cast<size_t>(f.peer) * 2 + (send ? size_t{1} : size_t{0})];
      c.seq = counter.fetch_add(1, std::memory_order_relaxed) + 1;
    }
  } else {
    c.seq = f.seq;
  }
  r.thread = q->tid;
  r.group = group;
  if (!q->queue.try_push(r)) {
    count_drop();
    return;
  }
  g_records.fetch_add(1, std::memory_order_relaxed);
}

// Per-version field extraction.
OpFields coll_fields(const abi::DescrV1& d) {
  OpFields f;
  f.comm_hash = d.coll.comm_hash;
  f.has_comm_hash = true;
  f.seq = d.coll.seq;
  f.func = v1_func(d.coll.func);
  f.count = d.coll.count;
  f.datatype = v1_datatype(d.coll.datatype);
  f.algo = v1_algo(d.coll.algo);
  f.proto = v1_proto(d.coll.proto);
  return f;
}
OpFields p2p_fields(const abi::DescrV1& d) {
  OpFields f;
  f.comm_hash = d.p2p.comm_hash;
  f.has_comm_hash = true;
  f.func = v1_func(d.p2p.func);
  f.count = d.p2p.count;
  f.datatype = v1_datatype(d.p2p.datatype);
  f.peer = d.p2p.peer;
  f.p2p = true;
  return f;
}
template <typename Coll>
OpFields coll_fields_named(const Coll& c) {  // v2, v3
  OpFields f;
  f.comm_hash = c.comm_hash;
  f.has_comm_hash = true;
  f.seq = c.seq;
  f.func = c.func;
  f.count = c.count;
  f.datatype = c.datatype;
  f.algo = c.algo;
  f.proto = c.proto;
  return f;
}
OpFields coll_fields(const abi::DescrV2& d) { return coll_fields_named(d.coll); }
OpFields coll_fields(const abi::DescrV3& d) { return coll_fields_named(d.coll); }
OpFields p2p_fields_v2(const abi::P2pV2& p) {
  OpFields f;
  f.comm_hash = p.comm_hash;
  f.has_comm_hash = true;
  f.func = p.func;
  f.count = p.count;
  f.datatype = p.datatype;
  f.peer = p.peer;
  f.p2p = true;
  return f;
}
OpFields p2p_fields(const abi::DescrV2& d) { return p2p_fields_v2(d.p2p); }
OpFields p2p_fields(const abi::DescrV3& d) { return p2p_fields_v2(d.p2p); }
OpFields coll_fields_v4(const abi::CollV4& c) {
  OpFields f;
  f.seq = c.seq;
  f.func = c.func;
  f.count = c.count;
  f.datatype = c.datatype;
  f.algo = c.algo;
  f.proto = c.proto;
  return f;
}
OpFields p2p_fields_v4(const abi::P2pV4& p) {
  OpFields f;
  f.func = p.func;
  f.count = p.count;
  f.datatype = p.datatype;
  f.peer = p.peer;
  f.p2p = true;
  return f;
}
OpFields coll_fields(const abi::DescrV4& d) { return coll_fields_v4(d.coll); }
OpFields p2p_fields(const abi::DescrV4& d) { return p2p_fields_v4(d.p2p); }
OpFields coll_fields(const abi::DescrV5& d) { return coll_fields_v4(d.coll.v4); }
OpFields p2p_fields(const abi::DescrV5& d) { return p2p_fields_v4(d.p2p.v4); }

// The Group event an operation's descriptor names: v5 in its body (parentGroup; `parent` is
// its API event there), v1-v4 as its parent.
void* group_handle(const abi::DescrV5& d) {
  return d.type == abi::kColl ? d.coll.parent_group : d.p2p.parent_group;
}
template <typename Descr>
void* group_handle(const Descr& d) {
  return d.parent;
}

// v5's coll / p2p also name their group in the body: translated like `parent`.
void translate_extra_parents(abi::DescrV5& d) {
  if (d.type == abi::kColl) d.coll.parent_group = forwarded_of(d.coll.parent_group);
  if (d.type == abi::kP2p) d.p2p.parent_group = forwarded_of(d.p2p.parent_group);
}
template <typename Descr>
void translate_extra_parents(Descr&) {}


// ---- entry points (one template per call, instantiated per version) -------------------------

template <typename Table, typename Descr, typename Args, int kVersion>
struct Entry {
  static abi::Result start_event(void* context, void** handle, Descr* descr) noexcept {
    try {
      if (handle != nullptr) *handle = nullptr;
      Context* ctx = as_context(context);
      if (ctx == nullptr || descr == nullptr || handle == nullptr) return abi::kSuccess;
      const uint64_t type = descr->type;
      if (type == abi::kColl) {
        record_op(*ctx, descr->rank, coll_fields(*descr), group_of_handle(group_handle(*descr)));
      }
      if (type == abi::kP2p) {
        record_op(*ctx, descr->rank, p2p_fields(*descr), group_of_handle(group_handle(*descr)));
      }
      const Table* fwd = ctx->forwarding ? forward_table<Table>(kVersion) : nullptr;
      const int their_mask = __atomic_load_n(&ctx->their_mask, __ATOMIC_RELAXED);
      const bool forward = fwd != nullptr && (type & static_cast<uint64_t>(their_mask)) != 0;
      // A Group event always gets a handle of ours: its operations name it as their group.
      // Other events need one only to reach the other plugin.
      if (!forward && type != abi::kGroup) return abi::kSuccess;
      Handle* h = claim_handle();
      if (h == nullptr) {
        if (forward) count_drop();  // a lost group id only makes matching fall back to timing
        return abi::kSuccess;
      }
      if (type == abi::kGroup) {
        h->group.store(g_group_ids.fetch_add(1, std::memory_order_relaxed) + 1,
                       std::memory_order_release);
      }
      if (!forward) {
        *handle = h;
        return abi::kSuccess;
      }
      Descr copy = *descr;
      copy.parent = forwarded_of(descr->parent);
      translate_extra_parents(copy);
      void* theirs = nullptr;
      if (fwd->start_event != nullptr) fwd->start_event(ctx->forwarded, &theirs, &copy);
      h->forwarded.store(theirs, std::memory_order_release);
      *handle = h;
    } catch (...) {
      count_drop();
    }
    return abi::kSuccess;
  }

  static abi::Result stop_event(void* handle) noexcept {
    try {
      Handle* h = as_handle(handle);
      if (h == nullptr || h->in_use.load(std::memory_order_acquire) == 0) return abi::kSuccess;
      void* theirs = h->forwarded.load(std::memory_order_acquire);
      const Table* fwd = forward_table<Table>(kVersion);
      if (theirs != nullptr && fwd != nullptr && fwd->stop_event != nullptr) fwd->stop_event(theirs);
      h->in_use.store(0, std::memory_order_release);  // `forwarded` kept for late children
    } catch (...) {
    }
    return abi::kSuccess;
  }

  static abi::Result record_event_state(void* handle, abi::EventState state, Args* args) noexcept {
    try {
      Handle* h = as_handle(handle);
      if (h == nullptr || h->in_use.load(std::memory_order_acquire) == 0) return abi::kSuccess;
      void* theirs = h->forwarded.load(std::memory_order_acquire);
      const Table* fwd = forward_table<Table>(kVersion);
      if (theirs != nullptr && fwd != nullptr && fwd->record_event_state != nullptr)
        fwd->record_event_state(theirs, state, args);
    } catch (...) {
    }
    return abi::kSuccess;
  }

  static abi::Result finalize(void* context) noexcept {
    try {
      Context* ctx = as_context(context);
      if (ctx == nullptr) return abi::kSuccess;
      const Table* fwd = ctx->forwarding ? forward_table<Table>(kVersion) : nullptr;
      if (fwd != nullptr && fwd->finalize != nullptr) fwd->finalize(ctx->forwarded);
      ctx->magic = 0;
      delete ctx;
    } catch (...) {
    }
    return abi::kSuccess;
  }

  // Our context, then the other plugin's init with a mask of its own (`call` runs it with its
  // context and mask pointers); NCCL gets our mask OR-ed with it.  A plugin that refuses the
  // communicator gets nothing of it.
  template <typename CallInit>
  static void* make_context(int* mask, const char* name, uint64_t hash, int nodes, int nranks,
                            int rank, CallInit call) {
    *mask = 0;
    Context* ctx = new_context(kVersion, name, hash, nodes, nranks, rank);
    if (ctx == nullptr) return nullptr;
    *mask = kOurMask;
    resolve_forward(kVersion);
    const Table* fwd = forward_table<Table>(kVersion);
    if (fwd == nullptr || fwd->init == nullptr) return ctx;
    int theirs = 0;
    void* their_ctx = nullptr;
    if (call(fwd, &their_ctx, &theirs) != abi::kSuccess) return ctx;
    ctx->forwarded = their_ctx;
    __atomic_store_n(&ctx->their_mask, theirs, __ATOMIC_RELAXED);
    ctx->forwarding = true;
    *mask |= theirs;
    return ctx;
  }

  static abi::Result init_v1(void** context, int* mask) noexcept {
    try {
      if (context == nullptr || mask == nullptr) return abi::kSuccess;
      *context = make_context(mask, nullptr, 0, 0, 0, -1, [](const Table* fwd, void** c, int* m) {
        return fwd->init(c, m);
      });
    } catch (...) {
    }
    return abi::kSuccess;
  }
};

using E1 = Entry<abi::ProfilerV1, abi::DescrV1, abi::StateArgsV1, 1>;
using E2 = Entry<abi::ProfilerV2, abi::DescrV2, abi::StateArgsV2, 2>;
using E3 = Entry<abi::ProfilerV3, abi::DescrV3, abi::StateArgsV3, 3>;
using E4 = Entry<abi::ProfilerV4, abi::DescrV4, abi::StateArgsV4, 4>;
using E5 = Entry<abi::ProfilerV5, abi::DescrV5, abi::StateArgsV5, 5>;

abi::Result init_v4(void** context, int* mask, const char* name, uint64_t hash, int nodes,
                    int nranks, int rank, abi::Logger log) noexcept {
  try {
    if (context == nullptr || mask == nullptr) return abi::kSuccess;
    *context = E4::make_context(mask, name, hash, nodes, nranks, rank,
                                [&](const abi::ProfilerV4* fwd, void** c, int* m) {
                                  return fwd->init(c, m, name, hash, nodes, nranks, rank, log);
                                });
  } catch (...) {
  }
  return abi::kSuccess;
}

abi::Result init_v5(void** context, uint64_t comm_id, int* mask, const char* name, int nodes,
                    int nranks, int rank, abi::Logger log) noexcept {
  try {
    if (context == nullptr || mask == nullptr) return abi::kSuccess;
    *context = E5::make_context(mask, name, comm_id, nodes, nranks, rank,
                                [&](const abi::ProfilerV5* fwd, void** c, int* m) {
                                  return fwd->init(c, comm_id, m, name, nodes, nranks, rank, log);
                                });
  } catch (...) {
  }
  return abi::kSuccess;
}

}  // namespace
}  // namespace gpuacct::inject

// ---- the exported objects NCCL looks up ---------------------------------------------------

#define GPUACCT_PROFILER_EXPORT extern "C" __attribute__((visibility("default")))

GPUACCT_PROFILER_EXPORT const gpuacct::nccl_abi::ProfilerV5 ncclProfiler_v5 = {
    "gpuacct", &gpuacct::inject::init_v5, &gpuacct::inject::E5::start_event,
    &gpuacct::inject::E5::stop_event, &gpuacct::inject::E5::record_event_state,
    &gpuacct::inject::E5::finalize};
GPUACCT_PROFILER_EXPORT const gpuacct::nccl_abi::ProfilerV4 ncclProfiler_v4 = {
    "gpuacct", &gpuacct::inject::init_v4, &gpuacct::inject::E4::start_event,
    &gpuacct::inject::E4::stop_event, &gpuacct::inject::E4::record_event_state,
    &gpuacct::inject::E4::finalize};
GPUACCT_PROFILER_EXPORT const gpuacct::nccl_abi::ProfilerV3 ncclProfiler_v3 = {
    "gpuacct", &gpuacct::inject::E3::init_v1, &gpuacct::inject::E3::start_event,
    &gpuacct::inject::E3::stop_event, &gpuacct::inject::E3::record_event_state,
    &gpuacct::inject::E3::finalize};
GPUACCT_PROFILER_EXPORT const gpuacct::nccl_abi::ProfilerV2 ncclProfiler_v2 = {
    "gpuacct", &gpuacct::inject::E2::init_v1, &gpuacct::inject::E2::start_event,
    &gpuacct::inject::E2::stop_event, &gpuacct::inject::E2::record_event_state,
    &gpuacct::inject::E2::finalize};
GPUACCT_PROFILER_EXPORT const gpuacct::nccl_abi::ProfilerV1 ncclProfiler_v1 = {
    "gpuacct", &gpuacct::inject::E1::init_v1, &gpuacct::inject::E1::start_event,
    &gpuacct::inject::E1::stop_event, &gpuacct::inject::E1::record_event_state,
    &gpuacct::inject::E1::finalize};

namespace gpuacct::inject {
namespace {

const void* our_table(int version) {
  switch (version) {
    case 1: return &ncclProfiler_v1;
    case 2: return &ncclProfiler_v2;
    case 3: return &ncclProfiler_v3;
    case 4: return &ncclProfiler_v4;
    case 5: return &ncclProfiler_v5;
    default: return nullptr;
  }
}

}  // namespace

NcclPluginCounters nccl_plugin_counters() {
  NcclPluginCounters c;
  c.version = g_version.load(std::memory_order_relaxed);
  c.communicators = g_communicators.load(std::memory_order_relaxed);
  c.records = g_records.load(std::memory_order_relaxed);
  c.events_dropped = g_dropped.load(std::memory_order_relaxed);
  c.forwarding = g_forward_table.load(std::memory_order_acquire) != nullptr;
  return c;
}

std::string nccl_plugin_forward_note() {
  Forward& f = forward();
  std::lock_guard<std::mutex> lock(f.mu);
  return f.note;
}

void drain_nccl_records(std::vector<PluginRecord>& out) {
  QueueRegistry::get().drain(out);
}

void prepare_nccl_profiler_env(const char* self) {
  if (self == nullptr || self[0] != '/') return;
  const char* current = std::getenv("NCCL_PROFILER_PLUGIN");
  if (current != nullptr && current[0] != '\0') {
    if (std::strcmp(current, self) == 0 || strcasecmp(current, "none") == 0) return;
    // Another plugin: keep it for forwarding (a parent's choice wins), then take its place.
    setenv(kNcclNextPluginEnv, current, /*overwrite=*/0);
    setenv("NCCL_PROFILER_PLUGIN", self, /*overwrite=*/1);
    return;
  }
  setenv("NCCL_PROFILER_PLUGIN", self, /*overwrite=*/0);
}

}  // namespace gpuacct::inject
