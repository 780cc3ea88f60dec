#include "cli/analyze_input.h"

#include <filesystem>

#include "analysis/name_table.h"
#include "analysis/recording.h"
#include "analysis/report.h"
#include "analysis/step_accountant.h"

namespace gpuacct::cli {

StatusOr<AnalyzedInput> analyze_input(const std::string& path, const AccountingConfig& cfg,
                                      bool progress) {
  (void)progress;
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec)) {
    return Status::Error(path + ": no such file");
  }
  NameTable names;
  StepAccountant acc(cfg);
  RunMetadata meta;
  nlohmann::json extra = nlohmann::json::object();
  if (looks_like_recording(path)) {
    auto contents = read_recording(path, names, acc, acc.mutable_stats());
    if (!contents.ok()) return contents.status();
    meta = contents->metadata;
    if (meta.source.empty()) meta.source = "recording";
  } else {
    return Status::Error(path + ": not a gpuacct recording, and PyTorch-profiler traces are not "
                                "supported by this build");
  }
  meta.source_path = path;
  acc.finish();
  AnalyzedInput out;
  out.report = build_report(acc, meta, names, extra);
  out.rows = acc.rows();
  return out;
}

}  // namespace gpuacct::cli
