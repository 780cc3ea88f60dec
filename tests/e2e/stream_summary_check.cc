// stream_summary_check STREAM.jsonl: checks every summary line of a library's step stream
// against the C++ summary of the step rows before it.  For each line (provisional or final)
// the rows above it are read back into StepRows and summarised with the library's own
// functions (report/report.h summary_report, inject/pipeline/pipeline.h summary_line: summarize +
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
#include "analysis/input/step_stream_reader.h"
#include "analysis/model/run_metadata.h"
#include "analysis/model/stats.h"
#include "analysis/report/report.h"
#include "inject/pipeline/pipeline.h"

namespace {

using gpuacct::StepRow;
using nlohmann::json;

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
        auto row = gpuacct::step_row_from_json(line);
        if (!row.ok()) {
          std::fprintf(stderr, "stream_summary_check: %s\n", row.status().message().c_str());
          return 2;
        }
        rows.push_back(row.value());
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
