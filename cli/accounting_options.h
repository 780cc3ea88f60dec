// The accounting options `gpuacct analyze` and `gpuacct timeline` share (--warmup,
// --launch-latency-us, --host-pause-us): one parser, one help text, the defaults of
// AccountingConfig (analysis/accounting/accounting_config.h), so both commands account an
// input the same way.
#pragma once

#include <set>
#include <string>

#include "analysis/accounting/accounting_config.h"
#include "analysis/report/cost.h"
#include "cli/args.h"

namespace gpuacct::cli {

// The option names, for Args' list of valued options.
std::set<std::string> accounting_option_names();

// The options' help lines (with their defaults), in the commands' --help format.
std::string accounting_options_help();

// Reads the options into a config; what is not given keeps AccountingConfig's default, and the
// warm-up is left to the input (AccountingConfig::kWarmupBySource) unless --warmup is given.
// *given receives the settings whose flag was given (InputOptions::given_settings names): they
// win over a recording's own settings, which the input applies for the others (input.h
// resolve).  False on a usage error: *error holds the message (exit status 2).
bool parse_accounting_options(Args& args, AccountingConfig* cfg, std::set<std::string>* given,
                              std::string* error);

// The cost options of `analyze` and `report` (--gpu-hour-price, the owned-GPU model): the
// report's cost section (analysis/report/cost.h, docs/cost.md).
std::set<std::string> cost_option_names();
std::string cost_options_help();
// What is not given stays 0 (no price, no owned model: no cost section).  False on a usage
// error: *error holds the message.
bool parse_cost_options(Args& args, CostModel* model, std::string* error);

}  // namespace gpuacct::cli
