// The Kineto importer's internals, shared by its two files (not a public interface; the entry
// points are in kineto_importer.h):
//   kineto_events.cc    the hot path, once per trace event: the traceEvents array, each
//                       event's fields into a RawEvent, its mapping to the event model;
//   kineto_importer.cc  the document around the array (top-level object, metadata, errors),
//                       the ac2g flow fallback, the entry points.
#pragma once

#include <unistd.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <deque>
#include <string>
#include <string_view>
#include <type_traits>
#include <unordered_map>

#include <nlohmann/json_fwd.hpp>

#include "analysis/import/byte_source.h"
#include "analysis/import/json_scanner.h"
#include "analysis/import/kineto_collectives.h"
#include "analysis/import/kineto_format.h"
#include "analysis/import/kineto_importer.h"

namespace gpuacct::kineto_import {

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
    const uint64_t h =
        (head ^ (tail * 0x9E3779B97F4A7C15ull) ^ text.size()) * 0xFF51AFD7ED558CCDull;
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

inline bool num_i64(const Value& v, int64_t* out) {
  return v.type == ValueType::kNumber && json_scan::parse_integer(v.text, out);
}

}  // namespace gpuacct::kineto_import
