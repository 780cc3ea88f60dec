// `gpuacct job --export DIR`: the two CSV tables of docs/job_view.md (*gpuacct job --export*),
// streamed as the merge goes (one line per rank row; nothing held), committed atomically.
// The Python layer (python_shim: gpuacct.job) turns them into Parquet with exactly these
// columns: change one here only with the doc.
//   job_steps.csv:        job,host,rank, the step-rows CSV columns (report.h step_row_csv,
//                         times on the job clock), clock_offset_ns, job_step_ns, waited_ns,
//                         late_ns
//   job_collectives.csv:  job,host,rank, the rows-file columns (collective_rows.h
//                         collective_row_csv, times on the job clock), arrival_ns, last_rank,
//                         wait_ns, transfer_ns, busbw_gbs
#pragma once

#include <cstdint>
#include <string>

#include "analysis/accounting/step_row.h"
#include "analysis/model/collective.h"
#include "analysis/model/file_io.h"
#include "analysis/model/status.h"

namespace gpuacct {

inline constexpr const char* kJobStepsCsv = "job_steps.csv";
inline constexpr const char* kJobCollectivesCsv = "job_collectives.csv";

// Who a row belongs to.
struct ExportRank {
  const std::string* job = nullptr;
  const std::string* host = nullptr;
  int rank = -1;
};

class JobExport {
 public:
  // Creates DIR if needed and opens both tables (their column lines written).
  Status open(const std::string& dir);
  // `row` with its times already on the job clock.
  void step(const ExportRank& who, const StepRow& row, int64_t clock_offset_ns, int64_t job_step_ns,
            int64_t waited_ns, int64_t late_ns);
  // `record` with its times already on the job clock; busbw 0 = unknown.
  void collective(const ExportRank& who, const CollectiveRecord& record, int last_rank,
                  int64_t wait_ns, int64_t transfer_ns, double busbw_gbs);
  // Commits both (or neither: a failed write leaves no table behind).
  Status finish();
  int64_t step_lines() const { return step_lines_; }
  int64_t collective_lines() const { return collective_lines_; }

 private:
  void write(OutputFile& file, const std::string& line);
  OutputFile steps_;
  OutputFile collectives_;
  Status error_;
  std::string line_;
  int64_t step_lines_ = 0;
  int64_t collective_lines_ = 0;
};

// A CSV field: as it is unless it holds a comma, quote or line break (then quoted, quotes
// doubled).
std::string csv_field(const std::string& text);

}  // namespace gpuacct
