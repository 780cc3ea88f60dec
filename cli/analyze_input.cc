#include "cli/analyze_input.h"

#include "analysis/accounting/step_accountant.h"
#include "analysis/accounting/step_detection.h"
#include "analysis/import/kineto_importer.h"
#include "analysis/import/recording.h"
#include "analysis/model/file_io.h"
#include "analysis/model/name_table.h"
#include "analysis/report/report.h"
#include "analysis/report/trace_totals.h"

namespace gpuacct::cli {

StatusOr<AnalyzedInput> analyze_input(const std::string& path, AccountingConfig cfg,
                                      bool progress) {
  GPUACCT_RETURN_IF_ERROR(check_input_file(path));
  const bool is_recording = looks_like_recording(path);
  if (cfg.warmup_steps < 0) cfg.warmup_steps = is_recording ? 2 : 0;
  NameTable names;
  StepAccountant acc(cfg);
  RunMetadata meta;
  nlohmann::json extra = nlohmann::json::object();
  // Inputs that mark no steps (on-demand profiler traces have no ProfilerStep#N) get them
  // from the repeating kernel sequence, like a live run without markers.
  OfflineStepDetection detection;
  if (is_recording) {
    TeeSink tee({&acc, &detection});
    auto contents = read_recording(path, names, tee, acc.mutable_stats());
    if (!contents.ok()) return contents.status();
    meta = contents->metadata;
    if (meta.source.empty()) meta.source = "recording";
  } else {
    // One pass feeds the per-step accounting and HTA's whole-trace totals.
    TraceTotals totals(names);
    TeeSink tee({&acc, &totals, &detection});
    KinetoImportOptions opts;
    opts.progress = progress;
    // cuda_sync rows count in HTA's temporal breakdown; they are not GPU work for the steps.
    opts.on_cuda_sync = [&totals](const GpuOp& row) { totals.on_cuda_sync(row); };
    auto imported = import_kineto_trace(path, names, tee, acc.mutable_stats(), opts);
    if (!imported.ok()) return imported.status();
    meta = imported.value();
    meta.source = "kineto";
    totals.set_rank(meta.rank);
    extra["hta_totals"] = totals.to_json();
  }
  meta.source_path = path;
  if (!detection.input_marks_steps()) {
    const OfflineStepDetection::Result detected = detection.detect(names.intern("step (detected)"));
    for (const HostRange& r : detected.steps) acc.add_range(r);
    if (detected.trailing_partial) acc.mutable_stats().add(Stat::incomplete_trailing_step);
    const StepDetector& d = detection.detector();
    extra["step_detection"] = {{"source", "detected"},
                               {"locked", d.locked()},
                               {"period_ops", d.period_tokens()},
                               {"step_end", std::string(names.text(d.step_end_name()))},
                               {"step_end_is_sync", d.step_end_is_sync()},
                               {"boundaries", detected.boundaries},
                               {"leading_partial_step_dropped", detected.leading_partial},
                               {"trailing_partial_step_dropped", detected.trailing_partial}};
  }
  acc.finish();
  AnalyzedInput out;
  out.report = build_report(acc, meta, names, extra);
  out.rows = acc.rows();
  return out;
}

}  // namespace gpuacct::cli
