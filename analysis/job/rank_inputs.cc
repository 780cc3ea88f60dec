#include "analysis/job/rank_inputs.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>

#include <nlohmann/json.hpp>

#include "analysis/input/input.h"
#include "analysis/input/step_stream_reader.h"
#include "analysis/model/json_text.h"
#include "analysis/model/ordered_parallel.h"
#include "analysis/model/collective_rows.h"

namespace gpuacct {
namespace fs = std::filesystem;
using nlohmann::json;

// ---- pulls ---------------------------------------------------------------------------------

namespace {

template <typename Row, typename Base>
class VectorPull : public Base {
 public:
  explicit VectorPull(std::shared_ptr<const std::vector<Row>> rows) : rows_(std::move(rows)) {}
  bool next(Row* out) override {
    if (rows_ == nullptr || at_ >= rows_->size()) return false;
    *out = (*rows_)[at_++];
    return true;
  }

 private:
  std::shared_ptr<const std::vector<Row>> rows_;
  size_t at_ = 0;
};

// A step stream, one line at a time: rows parsed, summary and gap lines skipped.
class StepStreamPull : public StepRowPull {
 public:
  StepStreamPull(std::string path, std::ifstream in) : path_(std::move(path)), in_(std::move(in)) {}
  bool next(StepRow* out) override {
    std::string text;
    while (std::getline(in_, text)) {
      ++line_;
      const bool has_newline = !in_.eof();
      const json line = parse_json(text);
      if (!line.is_object()) {
        if (!text.empty()) ++(has_newline ? bad_lines_ : cut_lines_);
        continue;
      }
      const auto provisional = line.find("provisional");
      if (line.contains("summary") && provisional != line.end() && provisional->is_boolean() &&
          !provisional->get<bool>()) {
        finished_ = true;
      }
      if (!line.contains("step_index")) continue;
      auto row = step_row_from_json(line);
      if (!row.ok()) {
        ++bad_lines_;
        continue;
      }
      *out = row.value();
      return true;
    }
    done_ = true;
    return false;
  }
  std::vector<std::string> notes() const override {
    std::vector<std::string> out;
    if (done_ && !finished_) {
      out.push_back(path_ + ": the step stream has no closing summary line (its writer was "
                            "killed?): its rows up to the cut are used");
    }
    if (cut_lines_ > 0) out.push_back(path_ + ": its last line was cut before its newline");
    if (bad_lines_ > 0) {
      out.push_back(path_ + ": " + std::to_string(bad_lines_) + " lines that did not parse, skipped");
    }
    return out;
  }

 private:
  std::string path_;
  std::ifstream in_;
  int64_t line_ = 1;
  int64_t bad_lines_ = 0;
  int64_t cut_lines_ = 0;
  bool finished_ = false;
  bool done_ = false;
};

// A rows file a chunk of lines at a time: each chunk, behind the file's header and column
// lines, goes through the one rows parser (collective_rows.h), so memory holds one chunk.
class RowsFilePull : public CollectivePull {
 public:
  // Small: every rank holds one chunk (1024 ranks x 256 rows x 128 bytes = 32 MiB).
  static constexpr size_t kChunkLines = 256;
  RowsFilePull(std::string path, std::ifstream in, std::string head)
      : path_(std::move(path)), in_(std::move(in)), head_(std::move(head)) {}
  bool next(CollectiveRecord* out) override {
    if (at_ >= chunk_.size()) {
      if (!refill()) return false;
    }
    *out = chunk_[at_++];
    return true;
  }
  std::vector<std::string> notes() const override {
    std::vector<std::string> out;
    if (eof_ && !trailer_) {
      out.push_back(path_ + ": the rows file has no end line (its writer was killed?): its rows "
                            "up to the cut are used");
    }
    if (bad_lines_ > 0) {
      out.push_back(path_ + ": " + std::to_string(bad_lines_) + " rows that did not parse, skipped");
    }
    if (rows_lost_ > 0) {
      out.push_back(path_ + ": its writer lost " + std::to_string(rows_lost_) + " rows");
    }
    return out;
  }

 private:
  bool refill() {
    chunk_.clear();
    at_ = 0;
    while (chunk_.empty() && !eof_) {
      std::string text = head_;
      std::string line;
      size_t lines = 0;
      while (lines < kChunkLines && std::getline(in_, line)) {
        if (line.rfind("# end", 0) == 0) trailer_ = true;
        text += line;
        text += '\n';
        ++lines;
      }
      if (lines < kChunkLines) eof_ = true;
      auto parsed = read_collective_rows_buffer(
          text, path_, [this](const CollectiveRecord& r) { chunk_.push_back(r); });
      if (!parsed.ok()) {
        eof_ = true;
        break;
      }
      bad_lines_ += parsed->bad_lines;
      rows_lost_ += parsed->rows_lost;
    }
    return !chunk_.empty();
  }

  std::string path_;
  std::ifstream in_;
  std::string head_;  // the header and column lines
  std::vector<CollectiveRecord> chunk_;
  size_t at_ = 0;
  bool eof_ = false;
  bool trailer_ = false;
  int64_t bad_lines_ = 0;
  int64_t rows_lost_ = 0;
};

class PullRankStream : public RankStream {
 public:
  PullRankStream(std::unique_ptr<StepRowPull> rows, std::unique_ptr<CollectivePull> collectives)
      : rows_(std::move(rows)), collectives_(std::move(collectives)) {
    advance_row();
    advance_collective();
  }
  void read_until(int64_t step_end, std::vector<StepRow>* rows,
                  std::vector<CollectiveRecord>* collectives) override {
    while (row_ahead_ && row_ahead_->step_index < step_end) {
      if (rows != nullptr) rows->push_back(*row_ahead_);
      advance_row();
    }
    while (collective_ahead_ && collective_ahead_->step_index < step_end) {
      if (collectives != nullptr) collectives->push_back(*collective_ahead_);
      advance_collective();
    }
  }
  int64_t next_step() const override {
    int64_t next = kNoMoreSteps;
    if (row_ahead_) next = std::min(next, row_ahead_->step_index);
    if (collective_ahead_) next = std::min(next, collective_ahead_->step_index);
    return next;
  }
  std::vector<std::string> notes() const override {
    std::vector<std::string> out;
    if (rows_ != nullptr) out = rows_->notes();
    if (collectives_ != nullptr) {
      for (std::string& n : collectives_->notes()) out.push_back(std::move(n));
    }
    return out;
  }

 private:
  void advance_row() {
    StepRow r;
    if (rows_ != nullptr && rows_->next(&r)) {
      row_ahead_ = r;
    } else {
      row_ahead_.reset();
    }
  }
  void advance_collective() {
    CollectiveRecord r;
    if (collectives_ != nullptr && collectives_->next(&r)) {
      collective_ahead_ = r;
    } else {
      collective_ahead_.reset();
    }
  }

  std::unique_ptr<StepRowPull> rows_;
  std::unique_ptr<CollectivePull> collectives_;
  std::optional<StepRow> row_ahead_;
  std::optional<CollectiveRecord> collective_ahead_;
};

}  // namespace

std::unique_ptr<StepRowPull> pull_rows(std::shared_ptr<const std::vector<StepRow>> rows) {
  return std::make_unique<VectorPull<StepRow, StepRowPull>>(std::move(rows));
}

std::unique_ptr<CollectivePull> pull_collectives(
    std::shared_ptr<const std::vector<CollectiveRecord>> records) {
  return std::make_unique<VectorPull<CollectiveRecord, CollectivePull>>(std::move(records));
}

StatusOr<std::unique_ptr<StepRowPull>> pull_step_stream(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::string header;
  if (!in || !std::getline(in, header)) return Status::Error(path + ": cannot be read");
  if (!looks_like_step_stream(header)) {
    return Status::Error(path + ": not a gpuacct step stream");
  }
  return std::unique_ptr<StepRowPull>(std::make_unique<StepStreamPull>(path, std::move(in)));
}

StatusOr<std::unique_ptr<CollectivePull>> pull_collective_rows(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::string header, columns;
  if (!in || !std::getline(in, header) || !std::getline(in, columns)) {
    return Status::Error(path + ": cannot be read (or has no header)");
  }
  std::string head = header + "\n" + columns + "\n";
  // The header alone through the parser: an error here is the file's error.
  auto checked = read_collective_rows_buffer(head, path, [](const CollectiveRecord&) {});
  if (!checked.ok()) return checked.status();
  return std::unique_ptr<CollectivePull>(
      std::make_unique<RowsFilePull>(path, std::move(in), std::move(head)));
}

std::unique_ptr<RankStream> make_rank_stream(std::unique_ptr<StepRowPull> rows,
                                             std::unique_ptr<CollectivePull> collectives) {
  return std::make_unique<PullRankStream>(std::move(rows), std::move(collectives));
}

// ---- grouping files into ranks -------------------------------------------------------------

namespace {

enum class FileKind { kReport, kStepStream, kCollectives, kRecording, kTrace, kOther };

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

// What a file is by its name, and the rank base name it carries (empty: the file is named
// after its kind alone, as rank0/report.json: its folder names the rank).
FileKind kind_by_name(const std::string& name, std::string* base) {
  struct Suffix {
    const char* text;
    FileKind kind;
  };
  static const Suffix kSuffixes[] = {
      {"report.json", FileKind::kReport},      {"steps.jsonl", FileKind::kStepStream},
      {"collectives.csv", FileKind::kCollectives}, {".gpuacct", FileKind::kRecording},
      {".pt.trace.json.gz", FileKind::kTrace},  {".pt.trace.json", FileKind::kTrace},
      {".json.gz", FileKind::kTrace},           {".json", FileKind::kTrace},
  };
  for (const Suffix& s : kSuffixes) {
    const std::string suffix = s.text;
    if (!ends_with(name, suffix)) continue;
    *base = name.substr(0, name.size() - suffix.size());
    if (!base->empty() && base->back() == '.') base->pop_back();
    if (s.kind != FileKind::kTrace && s.kind != FileKind::kRecording && !base->empty() &&
        name[base->size()] != '.') {
      continue;  // "xreport.json" is no report by its name
    }
    return s.kind;
  }
  return FileKind::kOther;
}

// Files a directory holds that are not a rank's: the job view's and the timeline's outputs.
bool is_output_of_tools(const std::string& name) {
  return name == "job.json" || name == "ranks.json" || ends_with(name, ".timeline.json") ||
         ends_with(name, ".steps.csv") || name == "job_steps.csv" || name == "job_collectives.csv";
}

struct RankFiles {
  std::string label;
  std::string report, step_stream, collectives, recording, trace;
};

void add_file(const fs::path& path, bool named_by_user, std::map<std::string, RankFiles>* groups,
              std::vector<std::string>* problems) {
  const std::string name = path.filename().string();
  if (is_output_of_tools(name)) return;
  std::string base;
  FileKind kind = kind_by_name(name, &base);
  if (kind == FileKind::kOther || kind == FileKind::kTrace) {
    // By content where the name does not say (or says only "JSON"): the front door knows.
    auto input = Input::open(path.string());
    if (!input.ok()) {
      if (named_by_user) problems->push_back(input.status().message());
      return;
    }
    if (kind == FileKind::kOther && !named_by_user) return;
    switch (input->format()) {
      case InputFormat::kReport:
        kind = FileKind::kReport;
        break;
      case InputFormat::kStepStream:
        kind = FileKind::kStepStream;
        break;
      case InputFormat::kRecording:
        kind = FileKind::kRecording;
        break;
      case InputFormat::kKinetoTrace:
        kind = FileKind::kTrace;
        break;
    }
    if (base.empty()) base = path.stem().string();
  }
  const fs::path parent = path.parent_path();
  const std::string key = (parent / base).string();
  RankFiles& g = (*groups)[key];
  if (g.label.empty()) {
    g.label = base.empty() ? (parent.empty() ? std::string(".") : parent.string()) : key;
  }
  std::string* slot = nullptr;
  switch (kind) {
    case FileKind::kReport: slot = &g.report; break;
    case FileKind::kStepStream: slot = &g.step_stream; break;
    case FileKind::kCollectives: slot = &g.collectives; break;
    case FileKind::kRecording: slot = &g.recording; break;
    case FileKind::kTrace: slot = &g.trace; break;
    case FileKind::kOther: return;
  }
  if (!slot->empty() && *slot != path.string()) {
    problems->push_back(path.string() + ": a second file of its kind for " + g.label + " (" +
                        *slot + " is used)");
    return;
  }
  *slot = path.string();
}

void expand(const std::string& arg, std::map<std::string, RankFiles>* groups,
            std::vector<std::string>* problems) {
  std::error_code ec;
  if (!fs::is_directory(arg, ec)) {
    if (!fs::exists(arg, ec)) {
      problems->push_back(arg + ": no such file or directory");
      return;
    }
    add_file(arg, /*named_by_user=*/true, groups, problems);
    return;
  }
  std::vector<fs::path> files;
  for (const auto& entry : fs::directory_iterator(arg, ec)) {
    if (entry.is_regular_file(ec)) {
      files.push_back(entry.path());
    } else if (entry.is_directory(ec)) {
      for (const auto& inner : fs::directory_iterator(entry.path(), ec)) {
        if (inner.is_regular_file(ec)) files.push_back(inner.path());
      }
    }
  }
  std::sort(files.begin(), files.end());
  for (const fs::path& f : files) add_file(f, /*named_by_user=*/false, groups, problems);
}

// The identity a run-metadata JSON object (report "run", stream header, rows header) gives.
void take_identity(const json& meta, JobRank* rank) {
  if (!meta.is_object()) return;
  const auto integer = [&](const char* key, int fallback) {
    const auto it = meta.find(key);
    return it != meta.end() && it->is_number_integer() ? it->get<int>() : fallback;
  };
  const auto text = [&](const char* key) {
    const auto it = meta.find(key);
    return it != meta.end() && it->is_string() ? it->get<std::string>() : std::string();
  };
  if (rank->rank < 0) rank->rank = integer("rank", -1);
  if (rank->world_size <= 0) rank->world_size = integer("world_size", 0);
  if (rank->hostname.empty()) rank->hostname = text("hostname");
  if (rank->job_id.empty()) rank->job_id = text("job_id");
}

void take_identity(const RunMetadata& meta, JobRank* rank) {
  take_identity(json{{"rank", meta.rank},
                     {"world_size", meta.world_size},
                     {"hostname", meta.hostname},
                     {"job_id", meta.job_id}},
                rank);
}

// Opens a rank's rows anew for each pass: rows in memory or a step stream, and a rows file.
std::function<StatusOr<std::unique_ptr<RankStream>>(bool)> opener(
    std::shared_ptr<const std::vector<StepRow>> rows, std::string stream_path,
    std::string collectives,
    std::shared_ptr<const std::vector<CollectiveRecord>> records = nullptr) {
  return [rows, stream_path, collectives, records](
             bool steps) -> StatusOr<std::unique_ptr<RankStream>> {
    std::unique_ptr<StepRowPull> step_pull;
    if (steps && rows != nullptr) step_pull = pull_rows(rows);
    if (steps && !stream_path.empty()) {
      auto pulled = pull_step_stream(stream_path);
      if (!pulled.ok()) return pulled.status();
      step_pull = std::move(pulled.value());
    }
    std::unique_ptr<CollectivePull> collective_pull;
    if (records != nullptr) collective_pull = pull_collectives(records);
    if (!collectives.empty()) {
      auto pulled = pull_collective_rows(collectives);
      if (!pulled.ok()) return pulled.status();
      collective_pull = std::move(pulled.value());
    }
    return make_rank_stream(std::move(step_pull), std::move(collective_pull));
  };
}

// A rows file's header: the rank's identity where the step source had none.
bool take_rows_header(const std::string& path, JobRank* rank, std::vector<std::string>* problems) {
  std::ifstream in(path, std::ios::binary);
  std::string header, columns;
  std::getline(in, header);
  std::getline(in, columns);
  auto parsed = read_collective_rows_buffer(header + "\n" + columns + "\n", path,
                                            [](const CollectiveRecord&) {});
  if (!parsed.ok()) {
    problems->push_back(parsed.status().message());
    return false;
  }
  take_identity(parsed->header.metadata, rank);
  return true;
}

// One rank from its files; problems it has go to `problems` (it may still be usable).
std::optional<JobRank> load_rank(const RankFiles& files, std::vector<std::string>* problems) {
  // The rows file first: whether it can be read decides what the rank's opener reads.
  JobRank from_rows;
  const bool rows_file = !files.collectives.empty() &&
                         take_rows_header(files.collectives, &from_rows, problems);
  const std::string collectives = rows_file ? files.collectives : std::string();
  std::optional<JobRank> rank;
  for (const std::string* path : {&files.report, &files.step_stream, &files.recording, &files.trace}) {
    if (path->empty()) continue;
    if (path == &files.step_stream) {
      std::ifstream in(*path, std::ios::binary);
      std::string header;
      std::getline(in, header);
      if (looks_like_step_stream(header)) {
        rank = JobRank();
        take_identity(parse_json(header), &*rank);
        rank->step_source = "step_stream";
        rank->has_collectives = rows_file;
        rank->open = opener(nullptr, *path, collectives);
        break;
      }
      problems->push_back(*path + ": not a gpuacct step stream; trying its other files");
      continue;
    }
    auto input = Input::open(*path);
    NameTable names;
    // A recording's or trace's own collectives, when the rank has no rows file.
    std::vector<CollectiveRecord> records;
    AccountingObservers observers;
    if (!rows_file) {
      observers.on_collective = [&records](const CollectiveRecord& r) { records.push_back(r); };
    }
    AccountingConfig cfg;
    cfg.warmup_steps = AccountingConfig::kWarmupBySource;  // as `gpuacct analyze` without flags
    auto reported = input.ok() ? report_input(input.value(), cfg, names, {}, observers)
                               : StatusOr<InputReport>(input.status());
    if (reported.ok()) {
      rank = rows_file ? rank_from_report(reported->report, std::move(reported->rows), files.label,
                                          to_string(input->format()), collectives)
                       : rank_from_report(reported->report, std::move(reported->rows), files.label,
                                          to_string(input->format()), std::move(records));
      if (!reported->cut_off.empty()) problems->push_back(reported->cut_off);
      break;
    }
    problems->push_back(reported.status().message() + "; trying its other files");
  }
  if (!rank && !rows_file) return std::nullopt;
  if (!rank) {  // collectives alone
    rank = JobRank();
    rank->step_source = "none";
    rank->has_collectives = true;
    rank->open = opener(nullptr, "", collectives);
  }
  rank->label = files.label;
  take_identity(json{{"rank", from_rows.rank},
                     {"world_size", from_rows.world_size},
                     {"hostname", from_rows.hostname},
                     {"job_id", from_rows.job_id}},
                &*rank);
  return rank;
}

std::string rank_list(const std::vector<int>& ranks) {
  std::string out;
  for (size_t i = 0; i < ranks.size(); ++i) {
    size_t j = i;
    while (j + 1 < ranks.size() && ranks[j + 1] == ranks[j] + 1) ++j;
    if (!out.empty()) out += ", ";
    out += std::to_string(ranks[i]);
    if (j > i) out += "-" + std::to_string(ranks[j]);
    i = j;
  }
  return out;
}

}  // namespace

namespace {

JobRank rank_with(const json& report, std::vector<StepRow> rows, std::string label,
                  std::string step_source, std::string collectives_path,
                  std::shared_ptr<const std::vector<CollectiveRecord>> records) {
  JobRank rank;
  rank.label = std::move(label);
  rank.step_source = std::move(step_source);
  take_identity(report.value("run", json::object()), &rank);
  const auto verdict = report.find("verdict");
  if (verdict != report.end() && verdict->is_object()) {
    const auto bound = verdict->find("bound");
    if (bound != verdict->end() && bound->is_string()) rank.verdict_bound = bound->get<std::string>();
  }
  rank.has_collectives = !collectives_path.empty() || records != nullptr;
  rank.open = opener(std::make_shared<const std::vector<StepRow>>(std::move(rows)), "",
                     std::move(collectives_path), std::move(records));
  return rank;
}

}  // namespace

JobRank rank_from_report(const json& report, std::vector<StepRow> rows, std::string label,
                         std::string step_source, std::string collectives_path) {
  return rank_with(report, std::move(rows), std::move(label), std::move(step_source),
                   std::move(collectives_path), nullptr);
}

JobRank rank_from_report(const json& report, std::vector<StepRow> rows, std::string label,
                         std::string step_source, std::vector<CollectiveRecord> records) {
  auto held = records.empty()
                  ? nullptr
                  : std::make_shared<const std::vector<CollectiveRecord>>(std::move(records));
  return rank_with(report, std::move(rows), std::move(label), std::move(step_source), "",
                   std::move(held));
}

void check_job_ranks(std::vector<JobRank> ranks, JobInputs* out) {
  // The job: the id most ranks carry; ranks of another job are left out.
  std::map<std::string, int> ids;
  for (const JobRank& r : ranks) {
    if (!r.job_id.empty()) ++ids[r.job_id];
  }
  for (const auto& [id, count] : ids) {
    if (out->job_id.empty() || count > ids[out->job_id]) out->job_id = id;
  }
  // A rank without an id takes its position among the inputs.
  for (size_t i = 0; i < ranks.size(); ++i) {
    if (ranks[i].rank < 0) ranks[i].rank = static_cast<int>(i);
  }
  std::stable_sort(ranks.begin(), ranks.end(),
                   [](const JobRank& a, const JobRank& b) { return a.rank < b.rank; });
  for (JobRank& r : ranks) {
    if (!r.job_id.empty() && r.job_id != out->job_id) {
      out->problems.push_back("rank " + std::to_string(r.rank) + " (" + r.label + ") is of job " +
                              r.job_id + ", not of job " + out->job_id + ": left out");
      continue;
    }
    if (!out->ranks.empty() && out->ranks.back().rank == r.rank) {
      out->problems.push_back("rank " + std::to_string(r.rank) + " appears twice (" +
                              out->ranks.back().label + " and " + r.label + "): " + r.label +
                              " left out");
      continue;
    }
    out->world_size = std::max(out->world_size, r.world_size);
    out->ranks.push_back(std::move(r));
  }
  if (out->world_size > 0) {
    std::vector<int> missing;
    size_t at = 0;
    for (int want = 0; want < out->world_size; ++want) {
      while (at < out->ranks.size() && out->ranks[at].rank < want) ++at;
      if (at >= out->ranks.size() || out->ranks[at].rank != want) missing.push_back(want);
    }
    if (!missing.empty()) {
      out->problems.push_back(std::string(missing.size() == 1 ? "rank " : "ranks ") +
                              rank_list(missing) + " of " + std::to_string(out->world_size) +
                              (missing.size() == 1 ? " is" : " are") +
                              " missing (no files): the job view covers the " +
                              std::to_string(out->ranks.size()) + " ranks present");
    }
  }
}

JobInputs load_job_inputs(const std::vector<std::string>& paths, unsigned jobs) {
  JobInputs out;
  std::map<std::string, RankFiles> groups;
  for (const std::string& p : paths) expand(p, &groups, &out.problems);
  std::vector<const RankFiles*> rank_files;
  for (const auto& [key, files] : groups) rank_files.push_back(&files);
  // A rank read from a trace or recording goes through the front door: those are read several
  // at once, each with its own problem lines, kept in the ranks' order.
  struct Loaded {
    std::optional<JobRank> rank;
    std::vector<std::string> problems;
  };
  std::vector<JobRank> ranks;
  ordered_parallel<Loaded>(
      rank_files.size(), jobs,
      [&](size_t i) {
        Loaded loaded;
        try {  // what throws (an allocation) is this rank's problem; the others go on
          loaded.rank = load_rank(*rank_files[i], &loaded.problems);
        } catch (const std::exception& e) {
          loaded.rank.reset();
          loaded.problems.push_back(rank_files[i]->label + ": " + e.what());
        }
        return loaded;
      },
      [&](size_t i, Loaded&& loaded) {
        for (std::string& p : loaded.problems) out.problems.push_back(std::move(p));
        if (loaded.rank) {
          ranks.push_back(std::move(*loaded.rank));
        } else {
          out.problems.push_back(rank_files[i]->label + ": no usable rows: left out");
        }
      });
  check_job_ranks(std::move(ranks), &out);
  if (groups.empty()) out.problems.push_back("no rank outputs found in the inputs given");
  return out;
}

}  // namespace gpuacct
