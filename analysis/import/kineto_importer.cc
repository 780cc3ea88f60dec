#include "analysis/import/kineto_importer.h"

#include <unistd.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cmath>
#include <cstddef>
#include <cstdio>
#include <cstring>
#include <deque>
#include <limits>
#include <type_traits>
#include <unordered_map>
#include <vector>

#include <nlohmann/json.hpp>

#include "analysis/import/byte_source.h"
#include "analysis/import/json_scanner.h"
#include "analysis/import/kineto_collectives.h"
#include "analysis/import/kineto_format.h"
#include "analysis/model/nccl_names.h"

namespace gpuacct {
namespace {

constexpr size_t kMaxValueBytes = size_t{256} << 20;  // largest single event / top-level value
constexpr size_t kFlowMemory = 1 << 16;               // recent ac2g flows kept for fallback
constexpr size_t kMaxPending = 1 << 16;               // events waiting for their flow

using json_scan::Cursor;
using json_scan::Result;
using json_scan::Value;
using json_scan::ValueType;
using kineto::CatKind;
using kineto::classify_api;
using kineto::classify_cat;
using kineto::copy_dir_from_name;
using kineto::is_data_range;
using kineto::parse_span_ns;
using kineto::profiler_step_number;

// ---------------------------------------------------------------------------------------------
// One trace event, as read.

struct RawEvent {
  Value ph, cat, name, ts, dur, pid, tid, id, bp;
  bool args_is_object = false;
  bool has_args = false;
  bool comm_used = false;  // a slot of `comm` was written (it is all zero otherwise)
  Value device, stream, correlation, bytes, graph_id;
  KinetoCommValues comm;  // the collective args ("Collective name", "External id", ...)
  // Every field back to "absent", for each event: a memset (assigning a fresh RawEvent built a
  // temporary and copied it, ~5 % of the import).  All-zero bytes are an empty RawEvent:
  // ValueType::kNone is 0, an empty string_view is {0, nullptr}.  `comm` (half of the bytes)
  // is cleared only after an event that wrote one of its slots: most events have none.
  void clear() {
    const bool comm_dirty = comm_used;
    std::memset(static_cast<void*>(this), 0, offsetof(RawEvent, comm));
    if (comm_dirty) std::memset(static_cast<void*>(&comm), 0, sizeof(comm));
  }
};
static_assert(std::is_trivially_copyable_v<RawEvent>);
static_assert(static_cast<int>(ValueType::kNone) == 0);

// key == lit, as a fixed-size compare the compiler inlines (string_view's == called memcmp for
// every key of every event).
template <size_t N>
bool key_is(std::string_view key, const char (&lit)[N]) {
  return key.size() == N - 1 && std::memcmp(key.data(), lit, N - 1) == 0;
}

// ---------------------------------------------------------------------------------------------

struct FlowKey {
  int64_t pid, tid, ts;
  bool operator==(const FlowKey& o) const { return pid == o.pid && tid == o.tid && ts == o.ts; }
};
struct FlowKeyHash {
  size_t operator()(const FlowKey& k) const {
    uint64_t h = static_cast<uint64_t>(k.ts) * 0x9E3779B97F4A7C15ull;
    h ^= static_cast<uint64_t>(k.pid) + 0x7F4A7C159E3779B9ull + (h << 6) + (h >> 2);
    h ^= static_cast<uint64_t>(k.tid) + 0x1234567ull + (h << 6) + (h >> 2);
    return static_cast<size_t>(h);
  }
};

class Importer final : json_scan::StreamErrors {
 public:
  Importer(ByteSource& src, NameTable& names, EventSink& sink, Stats& stats,
           const KinetoImportOptions& opts)
      : src_(src),
        names_(names),
        sink_(sink),
        stats_(stats),
        opts_(opts),
        in_(src, *this, kMaxValueBytes),
        scan_(in_.scanner()) {
    show_progress_ = opts_.progress && ::isatty(STDERR_FILENO);
    in_.on_read([this] { progress(false); });
  }

  Status run(RunMetadata* meta);

 private:
  // json_scan::StreamErrors: the messages name the trace event being read.
  Status syntax(uint64_t offset, const char* what) override {
    std::string msg = "invalid JSON at byte offset " + std::to_string(offset);
    if (src_.compressed()) msg += " (of the decompressed text)";
    msg += ": ";
    msg += what;
    if (in_events_) msg += " (in traceEvents element " + std::to_string(event_index_) + ")";
    return Status::Error(msg);
  }
  Status truncated(uint64_t offset, const char* where) override {
    std::string msg = "unexpected end of input at byte offset " + std::to_string(offset);
    if (src_.compressed()) msg += " (of the decompressed text)";
    msg += " while reading ";
    msg += where;
    if (in_events_) msg += " (traceEvents element " + std::to_string(event_index_) + ")";
    msg += ": the file is truncated or not a complete JSON document";
    return Status::Error(msg);
  }
  Status oversize(uint64_t offset, size_t limit) override {
    return Status::Error("a single JSON value starting at byte offset " + std::to_string(offset) +
                         " is larger than " + std::to_string(limit >> 20) + " MiB (event index " +
                         std::to_string(event_index_) + "); not a Kineto trace?");
  }
  template <typename F>
  Status with_refill(const char* what, F&& attempt) {
    return in_.with_refill(what, std::forward<F>(attempt));
  }

  void progress(bool final) {
    if (!show_progress_) return;
    const auto now = std::chrono::steady_clock::now();
    if (!final && now - last_progress_ < std::chrono::milliseconds(250)) return;
    last_progress_ = now;
    const double mib = 1024.0 * 1024.0;
    const uint64_t done = src_.raw_consumed(), total = src_.raw_total();
    if (total > 0) {
      std::fprintf(stderr, "\rgpuacct: reading trace %.1f / %.1f MiB (%3.0f%%), %llu events",
                   static_cast<double>(done) / mib, static_cast<double>(total) / mib,
                   100.0 * static_cast<double>(done) / static_cast<double>(total),
                   static_cast<unsigned long long>(event_index_));
    } else {
      std::fprintf(stderr, "\rgpuacct: reading trace %.1f MiB", static_cast<double>(done) / mib);
    }
    if (final) std::fputc('\n', stderr);
    std::fflush(stderr);
  }

  // Parsing ----------------------------------------------------------------------------------
  Status parse_top_object();
  Status parse_events_array();
  Status parse_small_json(const char* what, nlohmann::json* out);
  Result parse_event(Cursor& c);
  Result parse_args(Cursor& c);
  // Kineto writes "cat" and "name" before "args": a host operator or annotation uses none of
  // its args (map_x_event) unless it is record_param_comms, so they are skipped unread (a
  // fifth of a trace's events; validated all the same).  False when cat or name comes later.
  bool args_unused() const {
    if (ev_.cat.type != ValueType::kString || ev_.name.type != ValueType::kString) return false;
    const CatKind kind = classify_cat(ev_.cat.text);
    if (kind == CatKind::kUserAnnotation) return true;
    return kind == CatKind::kCpuOp &&
           (opts_.collectives == nullptr || ev_.name.text != "record_param_comms");
  }
  void handle_event();
  // The fields every X event has.
  struct XEvent {
    int64_t ts = 0, end = 0;
    std::string_view name;
    int64_t pid = -1, tid = -1;
    bool pid_ok = false, tid_ok = false;
  };
  void map_x_event(CatKind kind);
  void map_gpu_op(CatKind kind, const XEvent& x);
  void map_api_call(const XEvent& x);
  void map_range(CatKind kind, const XEvent& x);
  void emit_gpu_step_annotation();
  void param_comms();
  bool device_and_stream(const XEvent& x, int64_t* device, int64_t* stream);
  bool correlation(int64_t* corr);
  void handle_flow();
  void emit_gpu(GpuOp op, const FlowKey& key, bool need_corr);
  void emit_api(HostApiCall call, const FlowKey& key, bool need_corr);
  struct Pending {
    bool is_gpu;
    GpuOp op;
    HostApiCall call;
  };
  bool correlate_or_wait(const FlowKey& key, const Pending& p, uint64_t* corr);
  void emit_pending(const Pending& p);
  void emit_cuda_sync(int64_t ts, int64_t end, std::string_view name, int64_t pid, bool pid_ok);
  void skip_event() { stats_.add(Stat::importer_events_skipped); }
  void apply_metadata(const std::string& key, const nlohmann::json& v, RunMetadata* meta);
  // Counts another accelerator's events by category; at most kMaxAcceleratorCategories names
  // are kept (crafted input could invent endless ones), the rest are counted together.
  void count_other_accelerator(std::string_view cat) {
    constexpr size_t kMaxAcceleratorCategories = 32;
    auto it = other_accelerator_.find(std::string(cat));
    if (it == other_accelerator_.end()) {
      const bool room = other_accelerator_.size() < kMaxAcceleratorCategories;
      it = other_accelerator_.emplace(room ? std::string(cat) : "(other categories)", 0).first;
    }
    ++it->second;
  }
  void flush_pending();
  // names_.intern(text), exactly, through a small direct-mapped cache: the table hashes the
  // whole name (kernel names run to hundreds of bytes) and compares it again, for every op,
  // while a trace repeats a few hundred names.  A hit compares the full text with the table's
  // own copy (stable: NameTable keeps its strings in a deque), so a collision is only a miss.
  NameId intern(std::string_view text) {
    uint64_t head = 0, tail = 0;
    if (!text.empty()) std::memcpy(&head, text.data(), std::min<size_t>(text.size(), 8));
    if (text.size() > 8) std::memcpy(&tail, text.data() + text.size() - 8, 8);
    const uint64_t h = (head ^ (tail * 0x9E3779B97F4A7C15ull) ^ text.size()) * 0xFF51AFD7ED558CCDull;
    CachedName& slot = name_cache_[static_cast<size_t>(h >> 56)];
    if (slot.id != kNoName && slot.text == text) return slot.id;
    const NameId id = names_.intern(text);
    if (id != kNoName) slot = CachedName{names_.text(id), id};
    return id;
  }
  struct CachedName {
    std::string_view text;
    NameId id = kNoName;
  };

  ByteSource& src_;
  NameTable& names_;
  EventSink& sink_;
  Stats& stats_;
  KinetoImportOptions opts_;
  bool show_progress_ = false;
  std::chrono::steady_clock::time_point last_progress_{};

  json_scan::Stream in_;
  json_scan::Scanner& scan_;
  RawEvent ev_;
  uint64_t event_index_ = 0;
  bool in_events_ = false;
  bool saw_events_ = false;
  uint64_t object_events_ = 0;
  int64_t host_pid_ = 0;
  bool need_flows_ = false;
  RunMetadata* meta_ = nullptr;

  // ac2g fallback: recent flows by (pid, tid, ts), and events waiting for their flow.
  std::unordered_map<FlowKey, uint64_t, FlowKeyHash> flows_;
  std::deque<FlowKey> flow_order_;
  std::unordered_map<FlowKey, Pending, FlowKeyHash> pending_;
  std::deque<FlowKey> pending_order_;
  std::unordered_map<std::string, int64_t> other_accelerator_;
  std::array<CachedName, 256> name_cache_{};
};

Result Importer::parse_args(Cursor& c) {
  return scan_.object(c, [&](std::string_view key, Cursor& cc) -> Result {
    Value* dst = nullptr;
    switch (key.size()) {
      case 5:
        if (key_is(key, "bytes")) dst = &ev_.bytes;
        break;
      case 6:
        if (key_is(key, "device"))
          dst = &ev_.device;
        else if (key_is(key, "stream"))
          dst = &ev_.stream;
        break;
      case 8:
        if (key_is(key, "graph id")) dst = &ev_.graph_id;
        break;
      case 11:
        if (key_is(key, "correlation")) dst = &ev_.correlation;
        break;
      default:
        break;
    }
    if (!dst && (dst = ev_.comm.slot(key)) != nullptr) ev_.comm_used = true;
    if (dst) return scan_.value(cc, dst);
    return scan_.skip_value_inline(cc, 2);
  });
}

Result Importer::parse_event(Cursor& c) {
  ev_.clear();
  return scan_.object(c, [&](std::string_view key, Cursor& cc) -> Result {
    Value* dst = nullptr;
    switch (key.size()) {
      case 2:
        if (key_is(key, "ph"))
          dst = &ev_.ph;
        else if (key_is(key, "ts"))
          dst = &ev_.ts;
        else if (key_is(key, "id"))
          dst = &ev_.id;
        else if (key_is(key, "bp"))
          dst = &ev_.bp;
        break;
      case 3:
        if (key_is(key, "cat"))
          dst = &ev_.cat;
        else if (key_is(key, "dur"))
          dst = &ev_.dur;
        else if (key_is(key, "pid"))
          dst = &ev_.pid;
        else if (key_is(key, "tid"))
          dst = &ev_.tid;
        break;
      case 4:
        if (key_is(key, "name"))
          dst = &ev_.name;
        else if (key_is(key, "args")) {
          ev_.has_args = true;
          if (*cc.p == '{') {
            ev_.args_is_object = true;
            return args_unused() ? scan_.skip_value(cc, 1) : parse_args(cc);
          }
          return scan_.skip_value(cc, 1);
        }
        break;
      default:
        break;
    }
    if (dst) return scan_.value(cc, dst);
    return scan_.skip_value_inline(cc, 1);
  });
}

bool num_i64(const Value& v, int64_t* out) {
  return v.type == ValueType::kNumber && json_scan::parse_integer(v.text, out);
}

void Importer::handle_flow() {
  // ac2g flow: id = correlation; 's' sits on the runtime call, 'f' on the GPU op.  Only needed
  // once an event without args.correlation has been seen (Kineto writes a flow right after
  // its event, so the event waits in pending_ for it); otherwise flows cost nothing.
  if (!need_flows_) return;
  int64_t id = 0, pid = 0, tid = 0, ts = 0;
  bool id_ok = num_i64(ev_.id, &id);
  if (!id_ok && ev_.id.type == ValueType::kString)
    id_ok = json_scan::parse_integer(ev_.id.text, &id);
  if (!id_ok || id < 0 || !num_i64(ev_.pid, &pid) || !num_i64(ev_.tid, &tid) ||
      ev_.ts.type != ValueType::kNumber || !parse_us_to_ns(ev_.ts.text, &ts)) {
    return;  // flows only help the fallback; a broken one is not worth a counter
  }
  FlowKey key{pid, tid, ts};
  auto it = pending_.find(key);
  if (it != pending_.end()) {
    Pending p = it->second;
    pending_.erase(it);
    if (p.is_gpu) {
      p.op.correlation_id = static_cast<uint64_t>(id);
      sink_.on_gpu_op(p.op);
    } else {
      p.call.correlation_id = static_cast<uint64_t>(id);
      sink_.on_api_call(p.call);
    }
    return;
  }
  if (flows_.emplace(key, static_cast<uint64_t>(id)).second) {
    flow_order_.push_back(key);
    if (flow_order_.size() > kFlowMemory) {
      flows_.erase(flow_order_.front());
      flow_order_.pop_front();
    }
  }
}

void Importer::emit_pending(const Pending& p) {
  if (p.is_gpu) {
    sink_.on_gpu_op(p.op);
  } else {
    sink_.on_api_call(p.call);
  }
}

// An event without args.correlation takes it from its ac2g flow: true with *corr set when the
// flow was already seen; false when the event now waits for it in pending_ (the oldest waiting
// event goes on without one beyond kMaxPending); true, *corr untouched, when another event
// already waits on the same key.
bool Importer::correlate_or_wait(const FlowKey& key, const Pending& p, uint64_t* corr) {
  need_flows_ = true;
  if (auto it = flows_.find(key); it != flows_.end()) {
    *corr = it->second;
    return true;
  }
  if (!pending_.emplace(key, p).second) return true;
  pending_order_.push_back(key);
  while (pending_order_.size() > kMaxPending) {
    auto old = pending_.find(pending_order_.front());
    pending_order_.pop_front();
    if (old == pending_.end()) continue;
    emit_pending(old->second);
    pending_.erase(old);
  }
  return false;
}

void Importer::emit_gpu(GpuOp op, const FlowKey& key, bool need_corr) {
  if (need_corr && !correlate_or_wait(key, Pending{true, op, {}}, &op.correlation_id)) return;
  sink_.on_gpu_op(op);
}

void Importer::emit_api(HostApiCall call, const FlowKey& key, bool need_corr) {
  if (need_corr && !correlate_or_wait(key, Pending{false, {}, call}, &call.correlation_id)) return;
  sink_.on_api_call(call);
}

void Importer::flush_pending() {
  for (const FlowKey& k : pending_order_) {
    auto it = pending_.find(k);
    if (it == pending_.end()) continue;
    emit_pending(it->second);
    pending_.erase(it);
  }
  pending_order_.clear();
}

void Importer::map_x_event(CatKind kind) {
  // Ordinary CPU operators (most of a trace) matter only when they are steps or data waits.
  if (kind == CatKind::kCpuOp) {
    if (ev_.name.type != ValueType::kString) return;
    int64_t n = 0;
    if (!profiler_step_number(ev_.name.text, &n) && !is_data_range(ev_.name.text)) {
      if (opts_.collectives != nullptr && ev_.name.text == "record_param_comms") param_comms();
      return;
    }
  }
  // Common fields: name, ts, dur.
  XEvent x;
  if (ev_.name.type != ValueType::kString || ev_.ts.type != ValueType::kNumber ||
      ev_.dur.type != ValueType::kNumber ||
      !parse_span_ns(ev_.ts.text, ev_.dur.text, &x.ts, &x.end)) {
    skip_event();
    return;
  }
  x.name = ev_.name.text;
  x.pid_ok = num_i64(ev_.pid, &x.pid);
  x.tid_ok = num_i64(ev_.tid, &x.tid);
  switch (kind) {
    case CatKind::kKernel:
    case CatKind::kMemcpy:
    case CatKind::kMemset:
      map_gpu_op(kind, x);
      return;
    case CatKind::kCudaSync:
      emit_cuda_sync(x.ts, x.end, x.name, x.pid, x.pid_ok);
      return;
    case CatKind::kRuntime:
      map_api_call(x);
      return;
    case CatKind::kUserAnnotation:
    case CatKind::kCpuOp:
      map_range(kind, x);
      return;
    default:
      return;
  }
}

// The op's device and stream: args.device / args.stream, else pid / tid.  False (the event is
// skipped) when missing or out of range.
bool Importer::device_and_stream(const XEvent& x, int64_t* device, int64_t* stream) {
  if (!num_i64(ev_.device, device)) {
    if (ev_.device.type != ValueType::kNone || !x.pid_ok) return false;
    *device = x.pid;
  }
  if (!num_i64(ev_.stream, stream)) {
    if (ev_.stream.type != ValueType::kNone || !x.tid_ok) return false;
    *stream = x.tid;
  }
  return *device >= 0 && *device <= 0xFFFF && *stream >= 0 && *stream <= 0xFFFFFFFFll;
}

// args.correlation: true with *corr >= 0 when present and valid, *corr = -1 when absent; false
// (skip the event) when present but not a non-negative integer.
bool Importer::correlation(int64_t* corr) {
  *corr = -1;
  const bool has_corr = num_i64(ev_.correlation, corr) && *corr >= 0;
  if (!has_corr) *corr = -1;
  return has_corr || ev_.correlation.type == ValueType::kNone;
}

void Importer::map_gpu_op(CatKind kind, const XEvent& x) {
  int64_t device = -1, stream = -1, corr = -1, bytes = 0, graph = 0;
  if (!device_and_stream(x, &device, &stream) || !correlation(&corr) ||
      (ev_.bytes.type != ValueType::kNone && (!num_i64(ev_.bytes, &bytes) || bytes < 0))) {
    skip_event();
    return;
  }
  if (num_i64(ev_.graph_id, &graph) && (graph < 0 || graph > 0xFFFFFFFFll)) graph = 0;
  GpuOp op;
  op.start = x.ts;
  op.end = x.end;
  op.correlation_id = corr >= 0 ? static_cast<uint64_t>(corr) : 0;
  op.bytes = static_cast<uint64_t>(bytes);
  op.stream = static_cast<uint32_t>(stream);
  op.graph_id = static_cast<uint32_t>(graph);
  op.name = intern(x.name);
  op.device = static_cast<uint16_t>(device);
  if (kind == CatKind::kKernel) {
    op.kind = GpuOpKind::kKernel;
    op.bytes = 0;
    op.collective = classify_collective(x.name);
    if (ev_.comm.collective_name.type == ValueType::kString) {
      CollectiveType byname = classify_collective_name(ev_.comm.collective_name.text);
      if (byname != CollectiveType::kNone &&
          (op.collective == CollectiveType::kNone || op.collective == CollectiveType::kOther ||
           byname != CollectiveType::kOther))
        op.collective = byname;
    }
  } else if (kind == CatKind::kMemcpy) {
    op.kind = GpuOpKind::kMemcpy;
    op.copy_dir = copy_dir_from_name(x.name);
    if (x.name.find("Pageable") != std::string_view::npos) op.flags |= kGpuOpPageable;
  } else {
    op.kind = GpuOpKind::kMemset;
  }
  if (opts_.collectives != nullptr && op.is_communication())
    opts_.collectives->on_collective_kernel(op, ev_.comm);
  emit_gpu(op, FlowKey{x.pid, x.tid, x.ts}, corr < 0 && x.pid_ok && x.tid_ok);
}

void Importer::map_api_call(const XEvent& x) {
  int64_t corr = -1;
  if (!correlation(&corr)) {
    skip_event();
    return;
  }
  if (host_pid_ == 0 && x.pid_ok) host_pid_ = x.pid;
  HostApiCall call;
  call.start = x.ts;
  call.end = x.end;
  call.correlation_id = corr >= 0 ? static_cast<uint64_t>(corr) : 0;
  call.thread = x.tid_ok ? static_cast<uint32_t>(static_cast<uint64_t>(x.tid)) : 0;
  call.name = intern(x.name);
  call.kind = classify_api(x.name);
  emit_api(call, FlowKey{x.pid, x.tid, x.ts}, corr < 0 && x.pid_ok && x.tid_ok);
}

void Importer::map_range(CatKind kind, const XEvent& x) {
  HostRange r;
  int64_t number = -1;
  if (profiler_step_number(x.name, &number)) {
    r.kind = RangeKind::kStep;
    r.number = number;
  } else if (is_data_range(x.name)) {
    r.kind = RangeKind::kData;
  } else if (kind == CatKind::kUserAnnotation) {
    r.kind = RangeKind::kUser;
  } else {
    return;  // ordinary operators are not ranges gpuacct uses
  }
  r.start = x.ts;
  r.end = x.end;
  r.thread = x.tid_ok ? static_cast<uint32_t>(static_cast<uint64_t>(x.tid)) : 0;
  r.name = intern(x.name);
  sink_.on_range(r);
}

// A cuda_sync row with a stream, to KinetoImportOptions::on_cuda_sync (the caller checked it
// is set).  HTA's GPU rows are the events with a stream: Context / Event Sync (stream -1) are
// not.
void Importer::emit_cuda_sync(int64_t ts, int64_t end, std::string_view name, int64_t pid,
                              bool pid_ok) {
  int64_t stream = -1, device = -1, corr = -1;
  if (!num_i64(ev_.stream, &stream) || stream < 0 || stream > 0xFFFFFFFFll) return;
  if (!num_i64(ev_.device, &device) && !(ev_.device.type == ValueType::kNone && pid_ok)) {
    skip_event();
    return;
  }
  if (ev_.device.type == ValueType::kNone) device = pid;
  if (device < 0 || device > 0xFFFF) {
    skip_event();
    return;
  }
  GpuOp row;
  row.start = ts;
  row.end = end;
  row.correlation_id =
      num_i64(ev_.correlation, &corr) && corr > 0 ? static_cast<uint64_t>(corr) : 0;
  row.stream = static_cast<uint32_t>(stream);
  row.device = static_cast<uint16_t>(device);
  row.name = intern(name);
  opts_.on_cuda_sync(row);
}

// A record_param_comms CPU op, to KinetoImportOptions::collectives (the caller checked it is
// set): the collective args of the NCCL kernel with its External id.
void Importer::param_comms() {
  int64_t ts = 0, end = 0;
  if (ev_.ts.type != ValueType::kNumber || ev_.dur.type != ValueType::kNumber ||
      !parse_span_ns(ev_.ts.text, ev_.dur.text, &ts, &end))
    return;  // not an event the accounting uses: no counter
  opts_.collectives->on_param_comms(ts, ev_.comm);
}

// A gpu_user_annotation ProfilerStep#N, to KinetoImportOptions::on_gpu_step_annotation (the
// caller checked it is set) when it is one of HTA's CPU rows: no stream (or -1), a ts and a
// dur (HTA drops rows without a dur).  Anything else of the kind is left out silently, as
// before: annotations are not events of the model.
void Importer::emit_gpu_step_annotation() {
  int64_t number = 0, stream = -1, ts = 0, end = 0;
  if (ev_.name.type != ValueType::kString || !profiler_step_number(ev_.name.text, &number)) return;
  if (ev_.stream.type != ValueType::kNone && (!num_i64(ev_.stream, &stream) || stream != -1))
    return;
  if (ev_.ts.type != ValueType::kNumber || ev_.dur.type != ValueType::kNumber ||
      !parse_span_ns(ev_.ts.text, ev_.dur.text, &ts, &end))
    return;
  opts_.on_gpu_step_annotation(ts);
}

void Importer::handle_event() {
  ++event_index_;
  std::string_view ph = ev_.ph.type == ValueType::kString ? ev_.ph.text : std::string_view();
  CatKind kind = CatKind::kIgnored;
  if (ev_.cat.type == ValueType::kString) {
    kind = classify_cat(ev_.cat.text);
  } else if (ev_.cat.type != ValueType::kNone) {
    skip_event();  // a cat that is not a string
    return;
  }
  if (kind == CatKind::kUnknown) {
    stats_.add(Stat::importer_unknown_categories);
    return;
  }
  if (kind == CatKind::kOtherAccelerator) {
    stats_.add(Stat::importer_unknown_categories);  // not handled either, and named below
    count_other_accelerator(ev_.cat.text);
    return;
  }
  if (kind == CatKind::kGpuUserAnnotation) {
    if (opts_.on_gpu_step_annotation && ph == "X") emit_gpu_step_annotation();
    return;  // nothing else of it is used, and nothing of it is an error
  }
  if (ev_.ph.type == ValueType::kNone) {
    // Events without a phase are meaningless in Chrome traces; count the ones we would use.
    if (kind != CatKind::kIgnored) skip_event();
    return;
  }
  if (ev_.ph.type != ValueType::kString) {
    skip_event();
    return;
  }
  if (kind == CatKind::kFlow) {
    if (ph == "s" || ph == "f" || ph == "t") handle_flow();
    return;
  }
  if (ph != "X" || kind == CatKind::kIgnored) return;
  if (kind == CatKind::kCudaSync && !opts_.on_cuda_sync) return;
  map_x_event(kind);
}

Status Importer::parse_small_json(const char* what, nlohmann::json* out) {
  std::string_view bytes;
  GPUACCT_RETURN_IF_ERROR(in_.read_raw_value(what, &bytes));
  *out = nlohmann::json::parse(bytes.begin(), bytes.end(), nullptr, false);
  return Status::Ok();
}

void Importer::apply_metadata(const std::string& key, const nlohmann::json& v, RunMetadata* meta) {
  auto get_int = [](const nlohmann::json& o, const char* k, int64_t dflt) -> int64_t {
    auto it = o.find(k);
    if (it == o.end()) return dflt;
    if (it->is_number_integer()) return it->get<int64_t>();
    if (it->is_number_unsigned()) return static_cast<int64_t>(it->get<uint64_t>());
    if (it->is_number_float()) {
      const double d = it->get<double>();
      // Only integral values in range (a cast of anything else is undefined behaviour).
      if (!(d >= -9.2e18 && d <= 9.2e18) || d != std::floor(d)) return dflt;
      return static_cast<int64_t>(d);
    }
    return dflt;
  };
  auto get_i32 = [&](const nlohmann::json& o, const char* k) -> int {
    const int64_t x = get_int(o, k, 0);
    return x >= 0 && x <= std::numeric_limits<int>::max() ? static_cast<int>(x) : 0;
  };
  if (key == "distributedInfo" && v.is_object()) {
    int64_t rank = get_int(v, "rank", -1);
    int64_t ws = get_int(v, "world_size", 0);
    if (rank >= 0 && rank <= std::numeric_limits<int>::max()) meta->rank = static_cast<int>(rank);
    if (ws >= 0 && ws <= std::numeric_limits<int>::max()) meta->world_size = static_cast<int>(ws);
  } else if (key == "deviceProperties" && v.is_array()) {
    for (const auto& d : v) {
      if (!d.is_object()) continue;
      DeviceInfo info;
      info.id = get_i32(d, "id");
      auto n = d.find("name");
      if (n != d.end() && n->is_string()) info.name = n->get<std::string>();
      info.sm_count = get_i32(d, "numSms");
      info.compute_major = get_i32(d, "computeMajor");
      info.compute_minor = get_i32(d, "computeMinor");
      int64_t mem = get_int(d, "totalGlobalMem", 0);
      info.total_memory = mem > 0 ? static_cast<uint64_t>(mem) : 0;
      meta->devices.push_back(std::move(info));
    }
  }
}

Status Importer::parse_events_array() {
  // At '['.
  in_.advance();
  in_events_ = true;
  saw_events_ = true;
  bool first = true;
  for (;;) {
    bool at_end = false;
    GPUACCT_RETURN_IF_ERROR(in_.next_nonws(&at_end));
    if (at_end) return truncated(in_.end_offset(), "the traceEvents array");
    char ch = in_.peek();
    if (ch == ']') {
      in_.advance();
      in_events_ = false;
      return Status::Ok();
    }
    if (!first) {
      if (ch != ',') {
        return in_.syntax_error_here("expected ',' or ']' between trace events");
      }
      in_.advance();
      GPUACCT_RETURN_IF_ERROR(in_.next_nonws(&at_end));
      if (at_end) return truncated(in_.end_offset(), "the traceEvents array");
      ch = in_.peek();
    }
    first = false;
    if (ch == '{') {
      GPUACCT_RETURN_IF_ERROR(
          with_refill("a trace event", [&](Cursor& c) { return parse_event(c); }));
      ++object_events_;
      handle_event();
    } else {
      GPUACCT_RETURN_IF_ERROR(
          with_refill("a trace event", [&](Cursor& c) { return scan_.skip_value(c, 1); }));
      ++event_index_;
      skip_event();  // an element that is not an object
    }
  }
}

Status Importer::parse_top_object() {
  // At '{'.
  in_.advance();
  bool first = true;
  RunMetadata* meta = meta_;
  for (;;) {
    bool at_end = false;
    GPUACCT_RETURN_IF_ERROR(in_.next_nonws(&at_end));
    if (at_end) return truncated(in_.end_offset(), "the top-level object");
    char ch = in_.peek();
    if (ch == '}') {
      in_.advance();
      return Status::Ok();
    }
    if (!first) {
      if (ch != ',') {
        return in_.syntax_error_here("expected ',' or '}' in the top-level object");
      }
      in_.advance();
      GPUACCT_RETURN_IF_ERROR(in_.next_nonws(&at_end));
      if (at_end) return truncated(in_.end_offset(), "the top-level object");
    }
    first = false;
    std::string key;
    GPUACCT_RETURN_IF_ERROR(with_refill("a key", [&](Cursor& c) -> Result {
      if (*c.p != '"') return scan_.fail(c.p, "expected a string key");
      std::string_view k;
      Result r = scan_.string(c, &k, true);
      if (r != Result::kOk) return r;
      if ((r = skip_ws(c)) != Result::kOk) return r;
      if (*c.p != ':') return scan_.fail(c.p, "expected ':' after key");
      ++c.p;
      key.assign(k);
      return Result::kOk;
    }));
    GPUACCT_RETURN_IF_ERROR(in_.next_nonws(&at_end));
    if (at_end) return truncated(in_.end_offset(), "a top-level value");
    if (key == "traceEvents") {
      if (in_.peek() != '[') {
        return Status::Error("not a Kineto trace: \"traceEvents\" at byte offset " +
                             std::to_string(in_.offset()) + " is not an array");
      }
      GPUACCT_RETURN_IF_ERROR(parse_events_array());
    } else if (key == "distributedInfo" || key == "deviceProperties") {
      nlohmann::json v;
      GPUACCT_RETURN_IF_ERROR(parse_small_json("a top-level value", &v));
      apply_metadata(key, v, meta);
    } else {
      GPUACCT_RETURN_IF_ERROR(
          with_refill("a top-level value", [&](Cursor& c) { return scan_.skip_value(c, 1); }));
    }
  }
}

Status Importer::run(RunMetadata* meta) {
  meta_ = meta;
  bool at_end = false;
  GPUACCT_RETURN_IF_ERROR(in_.next_nonws(&at_end));
  if (at_end) {
    return Status::Error(in_.end_offset() == 0 ? "empty input: not a Kineto trace (0 bytes)"
                                               : "input holds only whitespace: not a Kineto trace");
  }
  // UTF-8 byte order mark.
  if (in_.starts_with("\xEF\xBB\xBF")) {
    in_.advance(3);
    GPUACCT_RETURN_IF_ERROR(in_.next_nonws(&at_end));
    if (at_end) return Status::Error("input holds only a byte order mark: not a Kineto trace");
  }
  const char ch = in_.peek();
  if (ch == '{') {
    GPUACCT_RETURN_IF_ERROR(parse_top_object());
  } else if (ch == '[') {
    // Chrome's "JSON array format": the file is the event list itself.
    GPUACCT_RETURN_IF_ERROR(parse_events_array());
    if (object_events_ == 0 && event_index_ > 0) {
      return Status::Error("not a Kineto trace: a JSON array without a single event object");
    }
  } else {
    return Status::Error(
        "not a Kineto trace: expected a JSON object with \"traceEvents\", found byte 0x" +
        [&] {
          char hex[8];
          std::snprintf(hex, sizeof(hex), "%02x", static_cast<unsigned char>(ch));
          return std::string(hex);
        }() +
        " at byte offset " + std::to_string(in_.offset()));
  }
  GPUACCT_RETURN_IF_ERROR(in_.next_nonws(&at_end));
  if (!at_end) {
    return Status::Error("unexpected data after the end of the JSON document at byte offset " +
                         std::to_string(in_.offset()));
  }
  if (!saw_events_) {
    return Status::Error("not a Kineto trace: the top-level object has no \"traceEvents\" array (" +
                         std::to_string(in_.offset()) + " bytes read)");
  }
  flush_pending();
  progress(true);
  meta->pid = host_pid_;
  meta->other_accelerator_events.assign(other_accelerator_.begin(), other_accelerator_.end());
  std::sort(meta->other_accelerator_events.begin(), meta->other_accelerator_events.end(),
            [](const auto& a, const auto& b) {
              return a.second != b.second ? a.second > b.second : a.first < b.first;
            });
  return Status::Ok();
}

StatusOr<RunMetadata> run_import(ByteSource& src, const std::string& path, NameTable& names,
                                 EventSink& sink, Stats& stats, const KinetoImportOptions& opts) {
  RunMetadata meta;
  meta.source = "kineto";
  meta.source_path = path;
  Importer imp(src, names, sink, stats, opts);
  Status st = imp.run(&meta);
  if (!st.ok()) {
    if (!path.empty()) return Status::Error(path + ": " + st.message());
    return st;
  }
  return meta;
}

}  // namespace

bool parse_us_to_ns(std::string_view text, int64_t* out_ns) {
  return json_scan::parse_scaled(text, 3, out_ns);
}

StatusOr<RunMetadata> import_kineto_trace(const std::string& path, NameTable& names,
                                          EventSink& sink, Stats& stats,
                                          const KinetoImportOptions& opts) {
  auto src = open_byte_source(path);
  if (!src.ok()) return src.status();
  return run_import(*src.value(), path, names, sink, stats, opts);
}

StatusOr<RunMetadata> import_kineto_buffer(std::string_view data, NameTable& names, EventSink& sink,
                                           Stats& stats, const KinetoImportOptions& opts) {
  auto src = memory_byte_source(data);
  return run_import(*src, "", names, sink, stats, opts);
}

bool looks_like_kineto_trace(const std::string& path) {
  ByteSourceOptions sniff;
  sniff.background_min_bytes = UINT64_MAX;  // a few bytes: no thread inflating megabytes ahead
  auto src = open_byte_source(path, sniff);
  if (!src.ok()) return false;
  if (src.value()->compressed()) return true;
  char buf[256];
  size_t got = 0;
  if (!src.value()->read(buf, sizeof(buf), &got).ok()) return false;
  size_t i = 0;
  if (got >= 3 && std::memcmp(buf, "\xEF\xBB\xBF", 3) == 0) i = 3;
  while (i < got && json_scan::is_ws(buf[i])) ++i;
  return i < got && (buf[i] == '{' || buf[i] == '[');
}

}  // namespace gpuacct
