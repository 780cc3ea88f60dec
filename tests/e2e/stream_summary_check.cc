// stream_summary_check STREAM.jsonl: checks every summary line of a library's step stream
// against the C++ summary of the step rows before it.  For each line (provisional or final)
// the rows above it are read back into StepRows and summarised with the library's own
// functions (report/report.h summary_report, inject/pipeline.h summary_line: summarize +
// report_to_json), with the counters the line carries; summary, verdict, data_loss and step_rows must be equal.
// Exit status 0 when every line matches (prints how many were checked), 1 on a mismatch, 2 on
// bad input or a stream that lost rows (gap lines: the rows to check are not all there).
//
// Not checked: the model-FLOPs peak (it needs the device names, which a stream does not carry).
#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "analysis/accounting/step_row.h"
#include "analysis/model/run_metadata.h"
#include "analysis/model/stats.h"
#include "analysis/report/report.h"
#include "inject/pipeline.h"

namespace {

using gpuacct::StepRow;
using nlohmann::json;

StepRow row_from_json(const json& j) {
  StepRow r;
  r.step_index = j.at("step_index").get<int64_t>();
  r.step_number = j.at("step_number").get<int64_t>();
  const int device = j.at("device").get<int>();
  r.device = device < 0 ? uint16_t{0xFFFF} : static_cast<uint16_t>(device);
  r.warmup = j.at("warmup").get<bool>();
  r.host_begin = j.at("host_begin_ns").get<int64_t>();
  r.host_end = j.at("host_end_ns").get<int64_t>();
  r.window_begin = j.at("window_begin_ns").get<int64_t>();
  r.window_end = j.at("window_end_ns").get<int64_t>();
  const json& c = j.at("categories");
  r.cat.compute = c.at("compute").get<int64_t>();
  r.cat.comm_exposed = c.at("comm_exposed").get<int64_t>();
  r.cat.copy_input = c.at("copy_input").get<int64_t>();
  r.cat.copy_other = c.at("copy_other").get<int64_t>();
  r.cat.data_wait = c.at("data_wait").get<int64_t>();
  r.cat.launch_gap = c.at("launch_gap").get<int64_t>();
  r.cat.host_other = c.at("host_other").get<int64_t>();
  r.comm_total = j.at("comm_total_ns").get<int64_t>();
  r.comm_overlapped = j.at("comm_overlapped_ns").get<int64_t>();
  r.gpu_busy = j.at("gpu_busy_ns").get<int64_t>();
  r.kernels = j.at("kernels").get<uint32_t>();
  r.copies = j.at("copies").get<uint32_t>();
  r.launches = j.at("launches").get<uint32_t>();
  r.flops = j.at("flops").get<double>();
  return r;
}

gpuacct::Stats stats_from_line(const json& line) {
  gpuacct::Stats stats;
  for (const json& s : line.value("stats", json::array())) {
    const std::string name = s.at("name").get<std::string>();
    for (size_t i = 0; i < gpuacct::kStatCount; ++i) {
      const auto stat = static_cast<gpuacct::Stat>(i);
      if (gpuacct::stat_info(stat).name == name) stats.set(stat, s.at("value").get<int64_t>());
    }
  }
  return stats;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: stream_summary_check STREAM.jsonl\n");
    return 2;
  }
  std::ifstream in(argv[1]);
  if (!in) {
    std::fprintf(stderr, "stream_summary_check: cannot open %s\n", argv[1]);
    return 2;
  }
  std::vector<StepRow> rows;
  int checked = 0;
  gpuacct::RunMetadata meta;
  meta.source = "injected";
  try {
    for (std::string text; std::getline(in, text);) {
      const json line = json::parse(text, nullptr, /*allow_exceptions=*/false);
      if (line.is_discarded()) continue;  // a running job's unfinished last line
      if (line.contains("gap")) {
        std::fprintf(stderr, "stream_summary_check: the stream lost rows (a gap line)\n");
        return 2;
      }
      if (line.contains("step_index")) {
        rows.push_back(row_from_json(line));
        continue;
      }
      if (!line.contains("summary")) continue;  // the header
      const json expected = gpuacct::inject::summary_line(
          gpuacct::summary_report(rows, stats_from_line(line), {}, meta),
          static_cast<int64_t>(rows.size()), line.value("provisional", false));
      json got = line;
      json want = expected;
      for (json* j : {&got, &want}) {
        if ((*j)["summary"].contains("model_flops")) (*j)["summary"].erase("model_flops");
      }
      for (const char* key : {"summary", "verdict", "data_loss", "step_rows"}) {
        if (got[key] != want[key]) {
          std::fprintf(stderr, "stream_summary_check: line %d (%zu rows): %s differs\n  %s\n  %s\n",
                       checked + 1, rows.size(), key, got[key].dump().c_str(),
                       want[key].dump().c_str());
          return 1;
        }
      }
      ++checked;
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "stream_summary_check: %s\n", e.what());
    return 2;
  }
  std::printf("%d summary lines match the C++ summary of the rows before them\n", checked);
  return 0;
}
