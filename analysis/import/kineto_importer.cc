#include "analysis/import/kineto_importer.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "analysis/import/byte_source.h"
#include "analysis/import/json_scanner.h"
#include "analysis/import/kineto_importer_internal.h"
#include "analysis/model/json_text.h"

namespace gpuacct {
namespace kineto_import {

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

void Importer::flush_pending() {
  for (const FlowKey& k : pending_order_) {
    auto it = pending_.find(k);
    if (it == pending_.end()) continue;
    emit_pending(it->second);
    pending_.erase(it);
  }
  pending_order_.clear();
}

Status Importer::parse_small_json(const char* what, nlohmann::json* out) {
  std::string_view bytes;
  GPUACCT_RETURN_IF_ERROR(in_.read_raw_value(what, &bytes));
  *out = parse_json(bytes);
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

}  // namespace kineto_import

namespace {

using kineto_import::Importer;

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
