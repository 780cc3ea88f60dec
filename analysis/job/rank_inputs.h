// Loading the ranks of a job (docs/job_view.md, *Loading ranks*): `gpuacct job DIR|FILES...`.
//
// Files are grouped into ranks by analysis/job/rank_files.h (the one place that knows a rank's
// file names): by base name within a folder, a folder with a file named after its kind alone
// (rank3/report.json) being one rank; a file named on the command line brings its rank's other
// files.  A rank's step rows come from, in order: its report's "steps" array (the report every
// rank writes), its step stream, its recording or trace through the front door
// (analysis/input).  Its collectives come from its rows file, else -- for a recording or trace
// -- from the front door (InputOptions / AccountingObservers::on_collective: a trace's
// collective args, or NCCL kernels by order), held; a rank without a rows file takes its
// recording or trace before its report (the richest input: one line says so).  Its rank id,
// world size, host and job id from the run metadata of whichever file has them
// (report "run" section, stream header, rows header); a rank with no id takes its position.
// `gpuacct analyze` of several inputs builds its ranks with rank_of_analysed_input, the same
// way.
//
// Memory: a step stream and a rows file are read in windows of steps (RankStream), so a job
// of many ranks and steps is merged in bounded memory.  A report's or a recording's rows are
// held whole (the report holds them whole anyway).
//
// Bad input never stops the others: a rank that cannot be read, a duplicate rank (the one with
// collectives is kept), a rank of another job, a missing rank (world_size says 8, 7 present), a
// file cut off by its writer's death -- each is one line in JobInputs::problems, and the job
// view is made of the ranks that are there.
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
  std::string hostname;  // empty = unknown: the job view infers hosts (job_hosts.h)
  std::string job_id;
  std::string label;          // the base name the files share (for messages and tables)
  std::string verdict_bound;  // the rank's own verdict ("communication", ...), when known
  std::string step_source;    // where its step rows come from: "report", "step_stream", ...
  bool has_collectives = false;
  // Opens the rank's rows anew (each pass of the merge reads them once).
  // steps=false: the collectives alone (the clock pass).
  std::function<StatusOr<std::unique_ptr<RankStream>>(bool steps)> open;
};

// Where a rank's collectives come from: its rows file (collective_rows.h) when it has one, else
// the records the front door found in its recording or trace (held in memory); neither: none.
struct RankCollectives {
  std::string rows_file;
  std::vector<CollectiveRecord> held;
};

// A rank whose rows are in memory (a report, an input accounted through the front door): its
// identity from the report's "run" section, its verdict from "verdict".
JobRank rank_from_report(const nlohmann::json& report, std::vector<StepRow> rows, std::string label,
                         std::string step_source, RankCollectives collectives = {});

// The rank of one input `gpuacct analyze` accounted, as `gpuacct job` would load it: labelled
// as its rank files (rank_files.h files_beside), its collectives as analyze wrote them
// (`written`: the rows file), else as the front door found them (`held`), else the rows file
// beside the input (the live run's, beside a step stream or report).
JobRank rank_of_analysed_input(const std::string& input, const nlohmann::json& report,
                               std::vector<StepRow> rows, const std::string& written,
                               std::vector<CollectiveRecord> held);

// A step stream read through once (the one parser, step_stream_reader.h): an error when it is
// no step stream or a row line holds no row -- the same policy as `gpuacct analyze` of it.
Status check_step_stream(const std::string& path);

// A host name as the run metadata gives it, or "" when it names no host ("unknown": what the
// library writes when gethostname fails).
std::string known_hostname(const std::string& hostname);

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
