#include "analysis/input/step_stream_reader.h"

#include <cerrno>
#include <cstring>
#include <fstream>
#include <limits>

#include "analysis/model/json_text.h"
#include "analysis/report/counter_columns.h"

namespace gpuacct {

using nlohmann::json;

bool looks_like_step_stream(std::string_view first_line) {
  const size_t eol = first_line.find('\n');
  if (eol != std::string_view::npos) first_line = first_line.substr(0, eol);
  const json header = parse_json(first_line);
  if (!header.is_object()) return false;
  const auto schema = header.find("schema");
  return schema != header.end() && schema->is_string() &&
         schema->get_ref<const std::string&>() == kStepStreamSchema;
}

namespace {

// Reads the integer `key` of `j` into `out`; false if it is missing, not an integer or does not
// fit T (never a cast of 1e300, never an exception).
template <typename T>
bool integer(const json& j, const char* key, T* out) {
  const auto it = j.find(key);
  if (it == j.end()) return false;
  if (it->is_number_unsigned()) {
    const auto v = it->get<uint64_t>();
    if (v > static_cast<uint64_t>(std::numeric_limits<T>::max())) return false;
    *out = static_cast<T>(v);
    return true;
  }
  if (!it->is_number_integer()) return false;
  const auto v = it->get<int64_t>();
  if (v < static_cast<int64_t>(std::numeric_limits<T>::min())) return false;
  if (v > 0 && static_cast<uint64_t>(v) > static_cast<uint64_t>(std::numeric_limits<T>::max())) {
    return false;
  }
  *out = static_cast<T>(v);
  return true;
}

Status missing(const char* key) {
  return Status::Error(std::string("field '") + key + "' is missing or of the wrong type");
}

// Counters by name, as summary lines carry them (report.cc stats_json).
bool stat_by_name(std::string_view name, Stat* out) {
  for (size_t i = 0; i < kStatCount; ++i) {
    if (stat_info(static_cast<Stat>(i)).name == name) {
      *out = static_cast<Stat>(i);
      return true;
    }
  }
  return false;
}

// A summary line's counters replace the ones before: each line holds every non-zero counter
// of its moment.  Unknown names (a newer writer) and bad values are left out.
void take_counters(const json& line, Stats* stats) {
  Stats fresh;
  const auto list = line.find("stats");
  if (list != line.end() && list->is_array()) {
    for (const json& s : *list) {
      Stat stat{};
      int64_t value = 0;
      if (!s.is_object() || !s.contains("name") || !s["name"].is_string()) continue;
      if (!stat_by_name(s["name"].get_ref<const std::string&>(), &stat)) continue;
      if (integer(s, "value", &value) && value >= 0) fresh.set(stat, value);
    }
  }
  *stats = fresh;
}

void take_header(const json& header, RunMetadata* meta) {
  const auto text = [&](const char* key) {
    const auto it = header.find(key);
    return it != header.end() && it->is_string() ? it->get<std::string>() : std::string();
  };
  meta->source = text("source");
  meta->hostname = text("hostname");
  meta->job_id = text("job_id");
  int64_t pid = 0;
  int rank = -1;
  int world_size = 0;
  if (integer(header, "pid", &pid)) meta->pid = pid;
  if (integer(header, "rank", &rank)) meta->rank = rank;
  if (integer(header, "world_size", &world_size)) meta->world_size = world_size;
}

}  // namespace

StatusOr<StepRow> step_row_from_json(const json& j) {
  if (!j.is_object()) return Status::Error("a step row is not an object");
  StepRow r;
  int device = 0;
  if (!integer(j, "step_index", &r.step_index)) return missing("step_index");
  if (!integer(j, "step_number", &r.step_number)) return missing("step_number");
  if (!integer(j, "device", &device) || device < -1 || device >= kHostOnlyDevice) {
    return missing("device");
  }
  r.device = device < 0 ? kHostOnlyDevice : static_cast<uint16_t>(device);
  const auto warmup = j.find("warmup");
  if (warmup == j.end() || !warmup->is_boolean()) return missing("warmup");
  r.warmup = warmup->get<bool>();
  const std::pair<const char*, int64_t*> times[] = {
      {"host_begin_ns", &r.host_begin},     {"host_end_ns", &r.host_end},
      {"window_begin_ns", &r.window_begin}, {"window_end_ns", &r.window_end},
      {"comm_total_ns", &r.comm_total},     {"comm_overlapped_ns", &r.comm_overlapped},
      {"gpu_busy_ns", &r.gpu_busy}};
  for (const auto& [key, field] : times) {
    if (!integer(j, key, field)) return missing(key);
  }
  const auto cats = j.find("categories");
  if (cats == j.end() || !cats->is_object()) return missing("categories");
  for (const CategoryInfo& c : kCategories) {
    const std::string key(c.name);
    if (!integer(*cats, key.c_str(), &r.cat[c.category])) return missing("categories");
  }
  const std::pair<const char*, uint32_t*> counts[] = {
      {"kernels", &r.kernels}, {"copies", &r.copies}, {"launches", &r.launches}};
  for (const auto& [key, field] : counts) {
    if (!integer(j, key, field)) return missing(key);
  }
  const auto flops = j.find("flops");
  if (flops == j.end() || !flops->is_number()) return missing("flops");
  r.flops = flops->get<double>();
  // Declared work: rows written before gpuacct_set_step_work have none (0 = none declared).
  for (const auto& [key, field] : {std::pair<const char*, double*>{"tokens", &r.tokens},
                                   std::pair<const char*, double*>{"samples", &r.samples}}) {
    const auto it = j.find(key);
    if (it == j.end()) continue;
    if (!it->is_number() || !(it->get<double>() >= 0)) return missing(key);
    *field = it->get<double>();
  }
  // Optional (streams written before GPUACCT_SAMPLE have none): absent = traced.
  if (const auto first = j.find("first_use_kernels"); first != j.end()) {
    if (!first->is_number_unsigned() || first->get<uint64_t>() > UINT32_MAX)
      return missing("first_use_kernels");
    r.first_use_kernels = first->get<uint32_t>();
  }
  if (const auto sampled = j.find("sampled"); sampled != j.end()) {
    if (!sampled->is_boolean()) return missing("sampled");
    r.sampled = sampled->get<bool>();
  }
  // Hardware counters (docs/counters.md): only rows that had samples carry them.
  if (const auto counters = j.find("counters"); counters != j.end()) {
    const Status st = counters_from_json(*counters, &r.counters);
    if (!st.ok()) return st;
  }
  return r;
}

StatusOr<StepStreamParser::Line> StepStreamParser::feed(std::string_view text, bool has_newline) {
  ++line_number_;
  state_.bytes += text.size() + (has_newline ? 1 : 0);
  const json line = parse_json(text);
  if (line_number_ == 1) {
    if (!line.is_object() || !looks_like_step_stream(text)) {
      return Status::Error(label_ +
                           ": not a gpuacct step stream (its first line has no "
                           "\"schema\": \"" +
                           kStepStreamSchema + "\")");
    }
    take_header(line, &state_.metadata);
    return Line::kHeader;
  }
  if (!line.is_object()) {
    if (!has_newline) {  // the last line, cut before its newline
      state_.bytes_cut = text.size();
      return Line::kCut;
    }
    if (!text.empty()) {
      state_.stats.add(Stat::importer_events_skipped);
      ++skipped_;
    }
    return Line::kSkipped;
  }
  if (line.contains("step_index")) {
    auto row = step_row_from_json(line);
    if (!row.ok()) {
      return Status::Error(label_ + ": line " + std::to_string(line_number_) + ": " +
                           row.status().message());
    }
    row_ = row.value();
    return Line::kRow;
  }
  if (line.contains("summary")) {
    // Counters that reading itself counted stay (they are not the writer's).
    const int64_t skipped = state_.stats.get(Stat::importer_events_skipped);
    take_counters(line, &state_.stats);
    state_.stats.add(Stat::importer_events_skipped, skipped);
    ++state_.summary_lines;
    integer(line, "step_rows", &state_.rows_in_last_summary);
    const auto provisional = line.find("provisional");
    state_.finished =
        provisional != line.end() && provisional->is_boolean() && !provisional->get<bool>();
    return Line::kSummary;
  }
  if (line.contains("setup")) {  // the last set-up line counts (inject/output/step_stream.h)
    state_.setup = line["setup"];
    return Line::kSetup;
  }
  if (line.contains("gap")) {
    int64_t lost = 0;
    if (line["gap"].is_object() && integer(line["gap"], "rows_lost", &lost) && lost > 0) {
      state_.rows_lost += lost;
    }
    return Line::kGap;
  }
  return Line::kSkipped;  // a line of a newer writer: not ours to read
}

Status StepStreamParser::finish() {
  if (line_number_ == 0) return Status::Error(label_ + ": empty file (not a gpuacct step stream)");
  // Rows the writer could not write (gap lines) are lost whether or not a summary line after
  // them counted them already.
  state_.stats.set(Stat::stream_rows_lost,
                   std::max(state_.stats.get(Stat::stream_rows_lost), state_.rows_lost));
  if (!state_.finished) state_.stats.add(Stat::inputs_cut_off);
  return Status::Ok();
}

std::pair<int64_t, int64_t> folded_step_indices(const json& setup) {
  if (!setup.is_object()) return {0, -1};
  const auto f = setup.find("folded_step_indices");
  if (f == setup.end() || !f->is_array() || f->size() != 2 || !(*f)[0].is_number_integer() ||
      !(*f)[1].is_number_integer())
    return {0, -1};
  return {(*f)[0].get<int64_t>(), (*f)[1].get<int64_t>()};
}

StatusOr<StepStreamContents> read_step_stream(std::istream& in, const std::string& label) {
  StepStreamParser parser(label);
  std::vector<StepRow> rows;
  for (std::string text; std::getline(in, text);) {
    auto line = parser.feed(text, !in.eof());
    if (!line.ok()) return line.status();
    if (line.value() == StepStreamParser::Line::kRow) rows.push_back(parser.row());
    if (line.value() == StepStreamParser::Line::kCut) break;
  }
  if (in.bad()) return Status::Error(label + ": read error");
  GPUACCT_RETURN_IF_ERROR(parser.finish());
  StepStreamContents out = parser.contents();
  out.rows = std::move(rows);
  // Rows of detected steps that the program's own marks turned into set-up (the last set-up
  // line names them).
  const auto [first_folded, last_folded] = folded_step_indices(out.setup);
  std::erase_if(out.rows, [&, first = first_folded, last = last_folded](const StepRow& r) {
    return r.step_index >= first && r.step_index <= last;
  });
  return out;
}

StatusOr<StepStreamContents> read_step_stream_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return Status::Error("cannot open " + path + ": " + std::strerror(errno));
  return read_step_stream(in, path);
}

}  // namespace gpuacct
