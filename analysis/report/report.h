// Report output: JSON (versioned schema, docs/report_schema.md), CSV of step rows, JSONL step
// stream, and the ten-second terminal summary.  Every file is written atomically.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "analysis/accounting/accounting_config.h"
#include "analysis/accounting/step_accountant.h"
#include "analysis/accounting/step_detection.h"
#include "analysis/accounting/step_row.h"
#include "analysis/model/name_table.h"
#include "analysis/model/run_metadata.h"
#include "analysis/model/stats.h"
#include "analysis/model/status.h"
#include "analysis/report/cost.h"
#include "analysis/report/run_summary.h"

namespace gpuacct {

inline constexpr const char* kReportSchema = "gpuacct.report/1";

struct ReportInputs {
  const RunMetadata* metadata = nullptr;
  const AccountingConfig* config = nullptr;
  const std::vector<StepRow>* rows = nullptr;
  const RunSummary* summary = nullptr;
  const Stats* stats = nullptr;
  const NameTable* names = nullptr;
  std::vector<KernelExposure> kernels;  // any order; the writer sorts and truncates
  std::vector<IdleGap> gaps;            // longest first
  // Extra sections a source adds (e.g. "hta_totals" from the trace importer).
  nlohmann::json extra = nlohmann::json::object();
};

nlohmann::json step_row_to_json(const StepRow& row);

// The report's "step_detection" section, for a run whose input marked no steps: what the
// detector found (docs/report_schema.md).  Written into `sections` (the extra sections that
// build_report places at the top level of the report), the same for every source.
void add_step_detection_section(const StepDetectionSummary& detection, const NameTable& names,
                                nlohmann::json* sections);
nlohmann::json report_to_json(const ReportInputs& in);

// The report's "setup" section (docs/report_schema.md): null until set-up is known.  Its
// "line" is what the terminal summary prints.
nlohmann::json setup_json(const SetupTally& setup, const NameTable* names);

// The report's summary, verdict, config, stats and data_loss over `rows` (no rows, kernels
// or gaps): what a provisional summary line of the live stream holds (inject/output/step_stream.h).
// with_rows: also the steps and the change_points section (a step stream's report).
nlohmann::json summary_report(const std::vector<StepRow>& rows, const Stats& stats,
                              const AccountingConfig& config, const RunMetadata& meta,
                              bool with_rows = false);

// What a report holds besides what its rows give, from whichever source has it: the live
// library ("collection", "sampling"), a file ("hta_totals", "accounting_settings",
// "cut_off"), both ("step_detection"; a step stream's "setup" line), and the price of a
// GPU-hour.  The report is assembled in one place -- build_report, build_rows_report and,
// when either failed, add_report_parts -- for the live library and every tool alike, so the
// sections cannot drift apart (issue 27).
struct ReportParts {
  nlohmann::json sections = nlohmann::json::object();
  CostModel cost;  // none: no "cost" section
};

// The parts onto a report already made: the sections, then the cost (which reads the
// summary).  What build_report and build_rows_report end with.
void add_report_parts(const ReportParts& parts, nlohmann::json* report);

// The whole report of a finished accountant: its rows, summary, kernels and gaps, its set-up
// ("setup", setup_json) and delivery, then `parts`.
nlohmann::json build_report(const StepAccountant& acc, const RunMetadata& meta,
                            const NameTable& names, const ReportParts& parts = {});

// The report of accounted rows without their events (a step stream): summary_report with the
// rows, then `parts`.
nlohmann::json build_rows_report(const std::vector<StepRow>& rows, const Stats& stats,
                                 const AccountingConfig& config, const RunMetadata& meta,
                                 const ReportParts& parts);

// Renders the terminal summary from a report JSON (so `gpuacct report` reuses it).
// Returns an error if the JSON is not a gpuacct report.
StatusOr<std::string> render_terminal_summary(const nlohmann::json& report, bool color = false);

std::string step_rows_csv(const std::vector<StepRow>& rows);
// Its column names and one row (no newline): for writers that stream rows (the job view's
// export, analysis/job/job_export.h).
std::string step_rows_csv_header();
std::string step_row_csv(const StepRow& row);

}  // namespace gpuacct
