// The per-collective rows file, <base>.collectives.csv (schema gpuacct.collectives/1): one row
// per collective / p2p instance of one rank, besides that rank's step rows.  Written by the live
// library (streamed by its worker, atomic at exit) and by `gpuacct analyze` for recordings and
// traces; read by the job view (analysis/job/).  docs/job_view.md, *Formats*, is the spec:
//
//   # gpuacct.collectives/1 {"rank":R,"world_size":W,"hostname":H,"pid":P,"job_id":J,
//                            "source":S,"identity":I, ...}        <- header: one JSON object
//   step_index,comm,seq,collective,bytes,datatype,algo,proto,rank,nranks,device,stream,
//     host_enqueue_ns,gpu_start_ns,gpu_end_ns,source                 <- column names (one line)
//   3,9f2c0a11d2e4b7aa,120,AllReduce,67108864,bf16,RING,SIMPLE,2,8,0,13,...,nccl_plugin
//   ...
//   # end {"rows":N,"rows_lost":M}                                   <- trailer
//
//   - `identity` says how collectives were identified for the whole file (to_string of
//     CollectiveSource: nccl_plugin, kernel_order, kineto, none) and why when it is a fallback
//     ("identity_note"); the header may carry more keys (nccl_version, plugin_version...);
//   - comm: 16 lower-case hex digits; collective: to_string(CollectiveType); unknown numbers
//     are empty fields, unknown times 0; datatype/algo/proto hold only [A-Za-z0-9_.+-] (other
//     bytes become '_'), so no field is ever quoted;
//   - a file without the trailer was cut off (its writer was killed): the reader returns the
//     whole rows before the cut and says so (cut_off);
//   - rows are in the order their steps were finalised, not sorted by time.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "analysis/model/collective.h"
#include "analysis/model/file_io.h"
#include "analysis/model/run_metadata.h"
#include "analysis/model/status.h"

namespace gpuacct {

inline constexpr const char* kCollectiveRowsSchema = "gpuacct.collectives/1";
inline constexpr const char* kCollectiveRowsSuffix = ".collectives.csv";

// What a rows file says about itself (its header and trailer).
struct CollectiveRowsHeader {
  RunMetadata metadata;  // rank, world_size, hostname, pid, job_id, source
  CollectiveSource identity = CollectiveSource::kNone;
  std::string identity_note;  // why a fallback was used; empty for nccl_plugin
};

// Streams rows into a file.  open() writes the header; append() one row (buffered: O(1), no
// allocation per row once warm); finish() writes the trailer and commits (temp file + rename,
// OutputFile).  A write that fails is counted in rows_lost() and never throws.
class CollectiveRowWriter {
 public:
  Status open(const std::string& path, const CollectiveRowsHeader& header,
              OutputPolicy policy = OutputPolicy::kUserPath);
  void append(const CollectiveRecord& row);
  // Rows the caller had and could not hand over (its bounded buffers were full): added to
  // rows_lost, which the trailer carries, so the loss is said in the file.
  void count_lost(int64_t rows) { rows_lost_ += rows; }
  // Hands the buffered rows to the kernel (OutputFile::flush, no fsync): a writer killed after
  // it leaves them in the temporary file, which the reader takes as cut off.  For a live writer
  // that streams: call it now and then (each tick), not per row.
  Status flush();
  Status finish();
  int64_t rows() const { return rows_; }
  int64_t rows_lost() const { return rows_lost_; }
  const std::string& path() const { return file_.path(); }
  const std::string& temp_path() const { return file_.temp_path(); }  // written until finish()
  const std::string& note() const { return file_.note(); }

 private:
  OutputFile file_;
  std::string line_;
  int64_t rows_ = 0;
  int64_t rows_lost_ = 0;
  bool failed_ = false;
};

// One line of the rows file (no newline): what append() writes.
std::string collective_row_csv(const CollectiveRecord& row);
// The column line of the rows collective_row_csv writes (no newline).
std::string_view collective_rows_columns();

struct CollectiveRowsContents {
  CollectiveRowsHeader header;
  int64_t rows_read = 0;
  int64_t rows_lost = 0;     // the trailer's rows_lost (the writer's own losses)
  bool cut_off = false;      // no trailer: the writer was killed
  int64_t bad_lines = 0;     // lines that did not parse (skipped, counted)
};

// Reads a rows file, calling `on_row` for each row in file order (the reader keeps no rows:
// memory does not grow with the file).  Errors: not a rows file, unreadable, a header that is
// not the schema.  Rows that do not parse are skipped and counted.
StatusOr<CollectiveRowsContents> read_collective_rows(
    const std::string& path, const std::function<void(const CollectiveRecord&)>& on_row);
// The same over bytes in memory (tests, fuzzers); `label` stands for the path in messages.
StatusOr<CollectiveRowsContents> read_collective_rows_buffer(
    std::string_view bytes, const std::string& label,
    const std::function<void(const CollectiveRecord&)>& on_row);

}  // namespace gpuacct
