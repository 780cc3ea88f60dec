// The names of one rank's files (docs/job_view.md, *A rank's files*): the one place that knows
// them.  What the library and the tools write for a base name, which file a name says it is,
// which files sit beside an input as the same rank's, and which files are the tools' own
// outputs.  `gpuacct analyze`, `gpuacct job`, `gpuacct diff`, the live library's output names
// and the Python loader (python_shim/gpuacct/rank_files.py) all take them from here.
//
// The table is analysis/job/rank_files.json, compiled in (CMake writes it into a generated
// header); python_shim/gpuacct/rank_files.json is a link to the same file, so C++ and Python
// read one table.
//
// The report's name, settled: `<base>.report.json`, whoever writes it (the library at exit,
// `gpuacct analyze`).  Outputs written before that named the library's report `<base>.json`:
// still read -- a `<base>.json` is a profiler trace or such a report, the content says which
// (RankFileName::by_content).
//
// Grouping (group_folder): the files of one folder are grouped by base name, one group per
// rank.  A file named after its kind alone (`report.json`, `steps.jsonl`, `collectives.csv`)
// names its folder as the rank: every file of that folder is then that one rank's, whatever
// its name (a rank's own output folder: `rank3/report.json`, `rank3/report.steps.jsonl`, ...).
// Groups of one folder written by one process (the same job id, rank and pid in their step
// stream's or rows file's first line, or their report's run section) are one rank.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "analysis/model/status.h"

namespace gpuacct {

enum class RankFileKind { kReport, kStepStream, kCollectives, kRecording, kTrace, kOther };
// The table's names: "report", "step_stream", "collectives", "recording", "trace", "other".
const char* to_string(RankFileKind kind);

struct RankFileName {
  RankFileKind kind = RankFileKind::kOther;
  // The name without its kind's suffix ("run" for run.steps.jsonl); empty for a file named
  // after its kind alone (report.json, steps.jsonl, collectives.csv).
  std::string base;
  bool alone = false;  // named after its kind alone: the rank is its folder
  // The name leaves it open: the content says which of `kind` and `or_by_content` it is, or
  // that it is none of a rank's files (a <base>.json is a trace or a report under its old name;
  // a <base>.jsonl a step stream or nothing of ours).
  bool by_content = false;
  RankFileKind or_by_content = RankFileKind::kOther;
  bool tool_output = false;  // job.json, *.timeline.json, *.steps.csv, the export tables
};
// What a file's name (no folder) says it is.
RankFileName rank_file_name(std::string_view file_name);

// The file a writer gives `base` (a path without suffix) for a kind: <base>.report.json,
// <base>.steps.jsonl, <base>.collectives.csv, <base>.gpuacct; "" for kTrace and kOther (no
// tool writes those).
std::string rank_file(const std::string& base, RankFileKind kind);
// `gpuacct analyze`'s table of step rows beside its report: <base>.steps.csv (a tool output).
std::string step_rows_csv_file(const std::string& base);

// The stem of an input's outputs (`gpuacct analyze`): its file name without its kind's suffix
// (run.steps.jsonl -> run, x.pt.trace.json.gz -> x); a file named after its kind alone takes
// its folder's name (rank3/report.json -> rank3; "report" when it has none); a name the table
// does not know is kept whole.
std::string output_stem(const std::string& input_path);

// One rank's files, by kind (paths; empty: none).
struct RankFiles {
  std::string label;  // folder/base, or the folder for a rank named by its folder
  std::string report, step_stream, collectives, recording, trace;
  // Files of a kind already filled, left out ("<path>: a second <kind> for <label> (<used> is
  // used)"): one line each.
  std::vector<std::string> left_out;
  // The slot for a kind (kOther: null).
  std::string* slot(RankFileKind kind);
  const std::string* slot(RankFileKind kind) const;
};

// The kind a file's content says (the front door, analysis/input/input.h: a report, a step
// stream, a recording, a trace), for a name that leaves it open; kOther when it is none of
// those or cannot be read.
RankFileKind rank_file_kind_by_content(const std::string& path);

// The files of one folder grouped into ranks (see the top of this file), in path order.
// `files`: the folder's regular files (any order).  A file whose kind its name leaves open is
// asked its content (rank_file_kind_by_content); tool outputs and files that are none of a
// rank's are left out.  `preferred`: a file the user named takes its kind's slot before any
// other of its group (empty: none).
std::vector<RankFiles> group_folder(std::vector<std::string> files,
                                    const std::string& preferred = "");

// The rank files of `input`'s folder that `input` belongs with (its group; input first for its
// kind).  Used by `gpuacct analyze` (the collectives rows file beside its input) and
// `gpuacct job` (a file named on the command line brings its rank's other files), so both see
// one rank the same way.
RankFiles files_beside(const std::string& input);

// The kinds a rank's step rows come from, in the table's order (its "step_sources": the report
// the rank wrote first, then its step stream, recording, trace).
const std::vector<RankFileKind>& step_source_order();

// A run given as a folder (`gpuacct diff DIR`): the folder must hold one rank's files; its
// input is the first of step_source_order() it has.  An error when it holds none or several
// ranks' files.
StatusOr<std::string> rank_input_of_folder(const std::string& folder);

// A folder's regular files (not its sub-folders'), sorted; none when it cannot be listed.
std::vector<std::string> folder_files(const std::string& folder);

}  // namespace gpuacct
