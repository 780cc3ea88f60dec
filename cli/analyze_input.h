// Runs the accounting on one input file, whatever its format.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "analysis/accounting/accounting_config.h"
#include "analysis/accounting/step_row.h"
#include "analysis/model/status.h"

namespace gpuacct::cli {

struct AnalyzedInput {
  nlohmann::json report;
  std::vector<StepRow> rows;
};

// Recordings are recognised by their magic bytes; anything else is read as a PyTorch-profiler
// (Kineto) trace.  cfg.warmup_steps < 0 means the source's default (2 for recordings, 0 for
// profiler traces, which are already steady-state captures).
StatusOr<AnalyzedInput> analyze_input(const std::string& path, AccountingConfig cfg, bool progress);

}  // namespace gpuacct::cli
