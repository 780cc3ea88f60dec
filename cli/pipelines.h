// The library side of `gpuacct analyze` and `gpuacct timeline` for one input, both through the
// analysis front door (analysis/input/input.h) with the same config: the same input gives the
// same steps and rows in both (cli/pipelines_test.cc).
#pragma once

#include <memory>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "analysis/accounting/accounting_config.h"
#include "analysis/accounting/step_row.h"
#include "analysis/model/collective_rows.h"
#include "analysis/model/name_table.h"
#include "analysis/model/status.h"
#include "analysis/report/cost.h"
#include "analysis/report/timeline_writer.h"
#include "cli/collective_spool.h"

namespace gpuacct::cli {

// `gpuacct analyze`: the report and the step rows of one input.
// `given`: the settings whose flag was given (parse_accounting_options).
struct AnalyzedInput {
  nlohmann::json report;
  std::vector<StepRow> rows;
  std::string cut_off;  // the input was cut off (a killed job): what was lost, one line
  std::string settings_note;  // a given setting differs from the run's own, one line
  // The input's collective instances with their steps (none for a step stream), and the header
  // of their rows file (<name>.collectives.csv, analysis/model/collective_rows.h).
  std::unique_ptr<CollectiveSpool> collectives;
  CollectiveRowsHeader collectives_header;
  // False for a step stream: it holds rows, not events; its collectives are in the live run's
  // own <base>.collectives.csv.
  bool collectives_known = true;
};
StatusOr<AnalyzedInput> analyze_input(const std::string& path, const AccountingConfig& cfg,
                                      bool progress, const std::set<std::string>& given = {},
                                      const CostModel& cost = {});

// `gpuacct timeline`: the filled timeline of one input (rows arrive through on_step_row).
struct InputTimeline {
  std::unique_ptr<NameTable> names;  // the writer refers to it
  std::unique_ptr<TimelineWriter> writer;
};
// `steps`: the steps it shows (TimelineWriter::set_step_range; all by default).
StatusOr<InputTimeline> timeline_of_input(const std::string& path, const AccountingConfig& cfg,
                                          bool progress, const std::set<std::string>& given = {},
                                          TimelineWriter::StepRange steps = {});

}  // namespace gpuacct::cli
