// Loading the ranks of a job (docs/job_view.md, *Loading ranks*): `gpuacct job DIR|FILES...`.
//
// Files are grouped by rank base name: <base>.report.json (or report.json in a rank's own
// folder), <base>.steps.jsonl, <base>.collectives.csv, <base>.gpuacct, a profiler trace
// (<base>.json / .json.gz).  A rank's step rows come from, in order: its report's "steps"
// array (the report every rank writes), its step stream, its recording or trace through the
// front door (analysis/input).  Its collectives come from its rows file, else -- for a
// recording or trace -- from the front door (InputOptions / AccountingObservers::on_collective:
// a trace's collective args, or NCCL kernels by order), held.  Its rank id, world
// size, host and job id from the run metadata of whichever file has them (report "run"
// section, stream header, rows header); a rank with no id takes its position.
//
// Memory: a step stream and a rows file are read in windows of steps (RankStream), so a job
// of many ranks and steps is merged in bounded memory.  A report's or a recording's rows are
// held whole (the report holds them whole anyway).
//
// Bad input never stops the others: a rank that cannot be read, a duplicate rank, a rank of
// another job, a missing rank (world_size says 8, 7 present), a file cut off by its writer's
// death -- each is one line in JobInputs::problems, and the job view is made of the ranks that
// are there.
#pragma once

#include <cstdint>
#include <functional>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "analysis/accounting/step_row.h"
#include "analysis/model/collective.h"
#include "analysis/model/status.h"

namespace gpuacct {

inline constexpr int64_t kNoMoreSteps = std::numeric_limits<int64_t>::max();

// One rank's rows in step order, read a window of steps at a time.
class RankStream {
 public:
  virtual ~RankStream() = default;
  // Appends the step rows with step_index < step_end and the collectives with step_index <
  // step_end (or -1: no step) that come before the first one past it; null: read, not kept.
  virtual void read_until(int64_t step_end, std::vector<StepRow>* rows,
                          std::vector<CollectiveRecord>* collectives) = 0;
  // The lowest step index not read yet (kNoMoreSteps when done).
  virtual int64_t next_step() const = 0;
  // What reading found wrong (a file cut off, lines that did not parse): one line each.
  virtual std::vector<std::string> notes() const = 0;
};

// Pulls rows one at a time: false at the end.
class StepRowPull {
 public:
  virtual ~StepRowPull() = default;
  virtual bool next(StepRow* row) = 0;
  virtual std::vector<std::string> notes() const { return {}; }
};
class CollectivePull {
 public:
  virtual ~CollectivePull() = default;
  virtual bool next(CollectiveRecord* record) = 0;
  virtual std::vector<std::string> notes() const { return {}; }
};

// Rows held in memory (reports, recordings, tests).
std::unique_ptr<StepRowPull> pull_rows(std::shared_ptr<const std::vector<StepRow>> rows);
std::unique_ptr<CollectivePull> pull_collectives(
    std::shared_ptr<const std::vector<CollectiveRecord>> records);
// A step stream file, line by line (header checked; a cut last line is a note).
StatusOr<std::unique_ptr<StepRowPull>> pull_step_stream(const std::string& path);
// A collectives rows file, a chunk of lines at a time (collective_rows.h).
StatusOr<std::unique_ptr<CollectivePull>> pull_collective_rows(const std::string& path);

// Either pull may be null (no rows of that kind).
std::unique_ptr<RankStream> make_rank_stream(std::unique_ptr<StepRowPull> rows,
                                             std::unique_ptr<CollectivePull> collectives);

struct JobRank {
  int rank = -1;        // from the run metadata; -1 before load_job_inputs numbers it
  int world_size = 0;   // 0 = unknown
  std::string hostname;  // empty = unknown: the rank is a clock of its own
  std::string job_id;
  std::string label;          // the base name the files share (for messages and tables)
  std::string verdict_bound;  // the rank's own verdict ("communication", ...), when known
  std::string step_source;    // where its step rows come from: "report", "step_stream", ...
  bool has_collectives = false;
  // Opens the rank's rows anew (each pass of the merge reads them once).
  // steps=false: the collectives alone (the clock pass).
  std::function<StatusOr<std::unique_ptr<RankStream>>(bool steps)> open;
};

// A rank whose rows are in memory (a report, an input `gpuacct analyze` accounted): its
// identity from the report's "run" section, its verdict from "verdict"; its collectives from
// `collectives_path` when not empty (a rows file).
JobRank rank_from_report(const nlohmann::json& report, std::vector<StepRow> rows,
                         std::string label, std::string step_source,
                         std::string collectives_path = "");
// The same with its collectives in memory (a recording's or trace's, from the front door);
// none when `records` is empty.
JobRank rank_from_report(const nlohmann::json& report, std::vector<StepRow> rows,
                         std::string label, std::string step_source,
                         std::vector<CollectiveRecord> records);

struct JobInputs {
  std::vector<JobRank> ranks;  // sorted by rank id
  std::string job_id;          // the job the ranks belong to (empty: unknown)
  int world_size = 0;
  std::vector<std::string> problems;  // one line each, for stderr and job.json
};

// Group `paths` (files, directories: their files and their sub-folders' files, one level)
// into ranks and load each, `jobs` ranks at once (analysis/model/ordered_parallel.h: the result
// and its problem lines are the same for any `jobs`).  No rank at all: `ranks` is empty
// (problems say why).
JobInputs load_job_inputs(const std::vector<std::string>& paths, unsigned jobs = 1);

// Numbering, duplicates, job ids and missing ranks over loaded ranks: fills `out` (the
// ranks kept, sorted by rank) and its problems.  Exposed for tests.
void check_job_ranks(std::vector<JobRank> ranks, JobInputs* out);

}  // namespace gpuacct
