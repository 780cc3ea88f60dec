// Cross-rank comparison: when several ranks of one job are analysed together, exposed
// communication splits into what the transfer itself costs and what a rank spent waiting for
// slower ranks to reach the collective (skew).
//
// For each step index present in every rank (and each rank's first device), the rank with the
// least exposed communication sets the transfer floor; every rank's excess over that floor is
// its skew — time it sat in a collective because another rank arrived later (in the spirit of
// torch-tb-profiler's "Data Transfer" = cross-rank minimum).  The rank that most often has the
// longest compute + data + launch + other time (the work before the collective) is the
// straggler candidate.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "analysis/accounting/step_row.h"

namespace gpuacct {

struct RankRows {
  int rank = -1;      // -1: unknown (the input's position is used)
  std::string label;  // file name, for the table
  std::vector<StepRow> rows;
};

struct RankComparison {
  struct PerRank {
    int rank = -1;
    std::string label;
    int64_t steps = 0;  // common summary steps compared
    double step_ms_mean = 0;
    double comm_exposed_ms = 0;      // mean per step
    double transfer_ms = 0;          // mean per step: the cross-rank floor
    double skew_ms = 0;              // mean per step: waiting for other ranks
    double work_ms = 0;              // mean per step: everything but exposed communication
    int64_t slowest_work_steps = 0;  // steps where this rank had the most work
  };
  std::vector<PerRank> ranks;
  int64_t common_steps = 0;
  int straggler = -1;  // index into ranks, -1 = none stands out
  std::string headline;
};

// Rows with warmup=true are left out; each rank uses its lowest device id.
RankComparison compare_ranks(const std::vector<RankRows>& inputs);
nlohmann::json rank_comparison_to_json(const RankComparison& c);
std::string render_rank_comparison(const RankComparison& c);

}  // namespace gpuacct
