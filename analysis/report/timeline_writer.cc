#include "analysis/report/timeline_writer.h"

#include <algorithm>
#include <cinttypes>
#include <cstdio>
#include <limits>
#include <map>
#include <set>
#include <utility>

#include "analysis/model/file_io.h"
#include "analysis/model/json_text.h"

namespace gpuacct {

namespace {

const char* kind_cat(GpuOpKind k) {
  switch (k) {
    case GpuOpKind::kKernel:
      return "kernel";
    case GpuOpKind::kMemcpy:
      return "gpu_memcpy";
    case GpuOpKind::kMemset:
      return "gpu_memset";
  }
  return "kernel";
}

const char* range_cat(RangeKind k) {
  switch (k) {
    case RangeKind::kStep:
      return "step";
    case RangeKind::kData:
      return "data";
    case RangeKind::kUser:
      return "user_annotation";
  }
  return "user_annotation";
}

}  // namespace

class TimelineWriter::Out {
 public:
  explicit Out(TimeNs origin) : origin_(origin) { s.reserve(1 << 20); }
  std::string s;

  void begin_event() {
    s += first_ ? "\n" : ",\n";
    first_ = false;
  }
  // Every event starts at or after the origin; the difference of two int64 can exceed int64
  // (an op at INT64_MIN, another at INT64_MAX), so it is taken in uint64.
  void ts(const char* key, TimeNs t) { us_digits(key, "", span(origin_, t)); }
  void us_value(const char* key, int64_t ns) {
    const uint64_t a = ns < 0 ? static_cast<uint64_t>(-(ns + 1)) + 1 : static_cast<uint64_t>(ns);
    us_digits(key, ns < 0 ? "-" : "", a);
  }
  // to - from in nanoseconds, 0 when `to` is not after `from`; exact over the whole int64 range.
  static uint64_t span(TimeNs from, TimeNs to) {
    return to > from ? static_cast<uint64_t>(to) - static_cast<uint64_t>(from) : 0;
  }
  void us_digits(const char* key, const char* sign, uint64_t ns) {
    char buf[64];
    std::snprintf(buf, sizeof(buf), "\"%s\":%s%" PRIu64 ".%03" PRIu64, key, sign, ns / 1000,
                  ns % 1000);
    s += buf;
  }
  void num(const char* key, int64_t v) {
    s += '"';
    s += key;
    s += "\":";
    s += std::to_string(v);
  }
  void str(const char* key, std::string_view v) {
    s += '"';
    s += key;
    s += "\":";
    append_json_string(s, v);
  }

  // {"ph":"X","name":..,"cat":..,"pid":..,"tid":..,"ts":..,"dur":..,"args":{ ... }}
  void complete(std::string_view name, const char* cat, int64_t pid, int64_t tid, TimeNs start,
                TimeNs end) {
    begin_event();
    s += "{\"ph\":\"X\",";
    str("name", name);
    s += ",\"cat\":\"";
    s += cat;
    s += "\",";
    num("pid", pid);
    s += ',';
    num("tid", tid);
    s += ',';
    ts("ts", start);
    s += ',';
    us_digits("dur", "", span(start, end));
  }
  void meta(const char* what, int64_t pid, int64_t tid, std::string_view name) {
    begin_meta(what, pid, tid);
    str("name", name);
    s += "}}";
  }
  void sort_index(const char* what, int64_t pid, int64_t tid, int64_t index) {
    begin_meta(what, pid, tid);
    num("sort_index", index);
    s += "}}";
  }

 private:
  // A metadata event up to its open "args" object.
  void begin_meta(const char* what, int64_t pid, int64_t tid) {
    begin_event();
    s += "{\"ph\":\"M\",\"name\":\"";
    s += what;
    s += "\",";
    num("pid", pid);
    s += ',';
    num("tid", tid);
    s += ",\"args\":{";
  }

  TimeNs origin_;
  bool first_ = true;
};

TimeNs TimelineWriter::origin() const {
  TimeNs origin = std::numeric_limits<TimeNs>::max();
  for (const auto& o : ops_) origin = std::min(origin, o.start);
  for (const auto& c : calls_) origin = std::min(origin, c.start);
  for (const auto& r : ranges_) origin = std::min(origin, r.start);
  for (const auto& m : markers_) origin = std::min(origin, m.ts);
  for (const auto& g : segments_) origin = std::min(origin, g.start);
  for (const auto& r : rows_) origin = std::min(origin, r.window_begin);
  if (origin == std::numeric_limits<TimeNs>::max()) origin = 0;
  return origin;
}

void TimelineWriter::write_track_names(Out& out) const {
  std::set<uint16_t> devices;
  std::set<std::pair<uint16_t, uint32_t>> streams;
  for (const auto& o : ops_) {
    devices.insert(o.device);
    streams.insert({o.device, o.stream});
  }
  for (const auto& g : segments_) devices.insert(g.device);
  for (const auto& r : rows_) devices.insert(r.device);
  for (uint16_t d : devices) {
    std::string label = "GPU " + std::to_string(d);
    for (const auto& info : meta_.devices) {
      if (info.id == d && !info.name.empty()) label += " (" + info.name + ")";
    }
    out.meta("process_name", d, 0, label);
    out.sort_index("process_sort_index", d, 0, d);
    out.meta("thread_name", d, kWallTid, "wall (gpuacct category)");
    out.sort_index("thread_sort_index", d, kWallTid, -2);
    out.meta("thread_name", d, kStepTid, "steps");
    out.sort_index("thread_sort_index", d, kStepTid, -1);
  }
  for (const auto& [d, s] : streams) {
    out.meta("thread_name", d, s, "stream " + std::to_string(s));
    out.sort_index("thread_sort_index", d, s, s);
  }
  std::set<uint32_t> threads;
  for (const auto& c : calls_) threads.insert(c.thread);
  for (const auto& r : ranges_) threads.insert(r.thread);
  for (const auto& m : markers_) threads.insert(m.thread);
  if (!threads.empty()) {
    std::string label = "host";
    if (meta_.pid > 0) label += " (pid " + std::to_string(meta_.pid) + ")";
    if (meta_.rank >= 0) label += " rank " + std::to_string(meta_.rank);
    out.meta("process_name", kHostPid, 0, label);
    out.sort_index("process_sort_index", kHostPid, 0, -1);
    for (uint32_t t : threads) out.meta("thread_name", kHostPid, t, "thread " + std::to_string(t));
  }

}

void TimelineWriter::write_accounting(Out& out) const {
  // Category ("wall") track.
  for (const auto& g : segments_) {
    out.complete(to_string(g.category), "gpuacct_wall", g.device, kWallTid, g.start, g.end);
    out.s += ",\"cname\":\"";
    out.s += wall_info(wall_of(g.category)).colour;
    out.s += "\",\"args\":{";
    out.str("wall", to_string(wall_of(g.category)));
    out.s += ',';
    out.num("step_index", g.step_index);
    out.s += "}}";
  }
  // Step windows.
  for (const auto& r : rows_) {
    std::string name = "step " + std::to_string(r.step_number >= 0 ? r.step_number : r.step_index);
    if (r.warmup) name += " (warm-up)";
    out.complete(name, "gpuacct_step", r.device, kStepTid, r.window_begin, r.window_end);
    out.s += ",\"args\":{";
    out.num("step_index", r.step_index);
    out.s += ',';
    out.num("step_number", r.step_number);
    const WallBreakdown w = r.walls();
    for (const WallInfo& wall : kWalls) {
      out.s += ',';
      out.us_value((std::string(wall.name) + "_us").c_str(), w[wall.wall]);
    }
    out.s += ',';
    out.num("kernels", r.kernels);
    out.s += "}}";
  }
}

void TimelineWriter::write_gpu_ops(Out& out) const {
  for (const auto& o : ops_) {
    out.complete(names_.text(o.name), kind_cat(o.kind), o.device, o.stream, o.start, o.end);
    out.s += ",\"args\":{";
    out.num("correlation", static_cast<int64_t>(o.correlation_id));
    if (o.bytes) {
      out.s += ',';
      out.num("bytes", static_cast<int64_t>(o.bytes));
    }
    if (o.kind == GpuOpKind::kMemcpy) {
      out.s += ',';
      out.str("direction", to_string(o.copy_dir));
    }
    if (o.collective != CollectiveType::kNone) {
      out.s += ',';
      out.str("collective", to_string(o.collective));
    }
    if (o.graph_id) {
      out.s += ',';
      out.num("graph", o.graph_id);
    }
    out.s += "}}";
  }
}

void TimelineWriter::write_host(Out& out) const {
  for (const auto& r : ranges_) {
    out.complete(names_.text(r.name), range_cat(r.kind), kHostPid, r.thread, r.start, r.end);
    if (r.number >= 0) {
      out.s += ",\"args\":{";
      out.num("number", r.number);
      out.s += "}";
    }
    out.s += "}";
  }
  for (const auto& c : calls_) {
    out.complete(names_.text(c.name), "cuda_api", kHostPid, c.thread, c.start, c.end);
    out.s += ",\"args\":{";
    out.num("correlation", static_cast<int64_t>(c.correlation_id));
    out.s += ',';
    out.str("kind", to_string(c.kind));
    out.s += "}}";
  }
  for (const auto& m : markers_) {
    out.begin_event();
    out.s += "{\"ph\":\"i\",\"s\":\"t\",";
    out.str("name", names_.text(m.name));
    out.s += ",\"cat\":\"marker\",";
    out.num("pid", kHostPid);
    out.s += ',';
    out.num("tid", m.thread);
    out.s += ',';
    out.ts("ts", m.ts);
    out.s += "}";
  }
}

std::string TimelineWriter::to_json() const {
  const TimeNs origin = this->origin();
  Out out(origin);
  out.s += "{\"displayTimeUnit\":\"ms\",\"otherData\":{";
  out.str("generator", "gpuacct timeline");
  out.s += ',';
  out.str("source", meta_.source);
  out.s += ',';
  out.str("source_path", meta_.source_path);
  out.s += ',';
  out.num("rank", meta_.rank);
  out.s += ',';
  out.num("origin_ns", origin);
  out.s += "},\"traceEvents\":[";

  write_track_names(out);
  write_accounting(out);
  write_gpu_ops(out);
  write_host(out);
  out.s += "\n]}\n";
  return std::move(out.s);
}

Status TimelineWriter::write(const std::string& path) const {
  return write_file_atomic(path, to_json());
}

}  // namespace gpuacct
