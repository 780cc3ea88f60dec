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
  // `file`: where the text goes a megabyte at a time (none: it all stays in `s`).
  explicit Out(TimeNs origin, OutputFile* file = nullptr) : origin_(origin), file_(file) {
    s.reserve(kSpillBytes + 4096);
  }
  std::string s;

  void begin_event() {
    if (file_ != nullptr && s.size() >= kSpillBytes) spill();
    s += first_ ? "\n" : ",\n";
    first_ = false;
  }
  // Hands `s` to the file; the first failure sticks (and nothing more is written).
  void spill() {
    if (status_.ok()) status_ = file_->write(s);
    s.clear();
  }
  const Status& status() const { return status_; }
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

  static constexpr size_t kSpillBytes = size_t{1} << 20;
  TimeNs origin_;
  OutputFile* file_;
  Status status_;
  bool first_ = true;
};

void TimelineWriter::on_step_row(const StepRow& row) {
  steps_seen_ = std::max(steps_seen_, row.step_index + 1);
  const TimeNs begin = std::min(row.window_begin, row.host_begin);
  const TimeNs end = std::max(row.window_end, row.host_end);
  if (row.step_index < range_.first) {
    // A step before the range: once the next one arrives its rows are all in, and no row of a
    // later step begins before the earliest of them.
    if (row.step_index != before_index_) {
      if (before_index_ >= 0) raise_floor(before_begin_);
      before_index_ = row.step_index;
      before_begin_ = begin;
    } else {
      before_begin_ = std::min(before_begin_, begin);
    }
    return;
  }
  if (row.step_index >= range_.end) {
    // Past the range: every row in it has arrived, so the span ends where they end.
    if (ceiling_ == std::numeric_limits<TimeNs>::max()) {
      ceiling_ = span_end_ == kNoTime ? floor_ : span_end_;
      drop_unwanted();
    }
    return;
  }
  if (before_index_ >= 0) raise_floor(before_begin_);
  span_begin_ = std::min(span_begin_, begin);
  span_end_ = std::max(span_end_, end);
  rows_.push_back(row);
}

size_t TimelineWriter::events() const {
  size_t n = segments_.size() + rows_.size();
  for (const auto& o : ops_) n += shown(o.start, o.end) ? 1U : 0U;
  for (const auto& c : calls_) n += shown(c.start, c.end) ? 1U : 0U;
  for (const auto& r : ranges_) n += shown(r.start, r.end) ? 1U : 0U;
  for (const auto& m : markers_) n += shown(m.ts, m.ts) ? 1U : 0U;
  return n;
}

void TimelineWriter::raise_floor(TimeNs t) {
  if (t > floor_) floor_ = t;
}

void TimelineWriter::held() {
  // Amortised: a pass over what is held each time it doubled.
  const size_t now = held_events();
  if (floor_ != kNoTime && now >= 2 * held_at_last_drop_ + 4096) drop_unwanted();
}

void TimelineWriter::drop_unwanted() {
  auto drop = [this](auto& v, auto start, auto end) {
    v.erase(std::remove_if(v.begin(), v.end(),
                           [&](const auto& e) { return !wanted(start(e), end(e)); }),
            v.end());
  };
  drop(ops_, [](const GpuOp& o) { return o.start; }, [](const GpuOp& o) { return o.end; });
  drop(calls_, [](const HostApiCall& c) { return c.start; },
       [](const HostApiCall& c) { return c.end; });
  drop(ranges_, [](const HostRange& r) { return r.start; }, [](const HostRange& r) { return r.end; });
  drop(markers_, [](const Marker& m) { return m.ts; }, [](const Marker& m) { return m.ts; });
  held_at_last_drop_ = held_events();
}

TimeNs TimelineWriter::origin() const {
  TimeNs origin = std::numeric_limits<TimeNs>::max();
  for (const auto& o : ops_) {
    if (shown(o.start, o.end)) origin = std::min(origin, o.start);
  }
  for (const auto& c : calls_) {
    if (shown(c.start, c.end)) origin = std::min(origin, c.start);
  }
  for (const auto& r : ranges_) {
    if (shown(r.start, r.end)) origin = std::min(origin, r.start);
  }
  for (const auto& m : markers_) {
    if (shown(m.ts, m.ts)) origin = std::min(origin, m.ts);
  }
  for (const auto& g : segments_) origin = std::min(origin, g.start);
  for (const auto& r : rows_) origin = std::min(origin, r.window_begin);
  if (origin == std::numeric_limits<TimeNs>::max()) origin = 0;
  return origin;
}

void TimelineWriter::write_track_names(Out& out) const {
  std::set<uint16_t> devices;
  std::set<std::pair<uint16_t, uint32_t>> streams;
  for (const auto& o : ops_) {
    if (!shown(o.start, o.end)) continue;
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
  for (const auto& c : calls_) {
    if (shown(c.start, c.end)) threads.insert(c.thread);
  }
  for (const auto& r : ranges_) {
    if (shown(r.start, r.end)) threads.insert(r.thread);
  }
  for (const auto& m : markers_) {
    if (shown(m.ts, m.ts)) threads.insert(m.thread);
  }
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
    if (!shown(o.start, o.end)) continue;
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
    if (!shown(r.start, r.end)) continue;
    out.complete(names_.text(r.name), range_cat(r.kind), kHostPid, r.thread, r.start, r.end);
    if (r.number >= 0) {
      out.s += ",\"args\":{";
      out.num("number", r.number);
      out.s += "}";
    }
    out.s += "}";
  }
  for (const auto& c : calls_) {
    if (!shown(c.start, c.end)) continue;
    out.complete(names_.text(c.name), "cuda_api", kHostPid, c.thread, c.start, c.end);
    out.s += ",\"args\":{";
    out.num("correlation", static_cast<int64_t>(c.correlation_id));
    out.s += ',';
    out.str("kind", to_string(c.kind));
    out.s += "}}";
  }
  for (const auto& m : markers_) {
    if (!shown(m.ts, m.ts)) continue;
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

void TimelineWriter::write_all(Out& out) const {
  out.s += "{\"displayTimeUnit\":\"ms\",\"otherData\":{";
  out.str("generator", "gpuacct timeline");
  out.s += ',';
  out.str("source", meta_.source);
  out.s += ',';
  out.str("source_path", meta_.source_path);
  out.s += ',';
  out.num("rank", meta_.rank);
  out.s += ',';
  out.num("origin_ns", origin());
  out.s += "},\"traceEvents\":[";

  write_track_names(out);
  write_accounting(out);
  write_gpu_ops(out);
  write_host(out);
  out.s += "\n]}\n";
}

std::string TimelineWriter::to_json() const {
  Out out(origin());
  write_all(out);
  return std::move(out.s);
}

Status TimelineWriter::write(const std::string& path) const {
  OutputFile file;
  GPUACCT_RETURN_IF_ERROR(file.open(path));
  Out out(origin(), &file);
  write_all(out);
  out.spill();
  if (!out.status().ok()) {
    file.abandon();
    return out.status();
  }
  return file.commit();
}

}  // namespace gpuacct
