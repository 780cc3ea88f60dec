// Runs the accounting on one input file, whatever its format.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "analysis/accounting_config.h"
#include "analysis/status.h"
#include "analysis/step_row.h"

namespace gpuacct::cli {

struct AnalyzedInput {
  nlohmann::json report;
  std::vector<StepRow> rows;
};

// Recordings are recognised by their magic bytes; anything else is read as a PyTorch-profiler
// (Kineto) trace.
StatusOr<AnalyzedInput> analyze_input(const std::string& path, const AccountingConfig& cfg,
                                      bool progress);

}  // namespace gpuacct::cli
