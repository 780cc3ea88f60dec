#include "analysis/job/rank_inputs.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>

#include <nlohmann/json.hpp>

#include "analysis/input/input.h"
#include "analysis/input/step_stream_reader.h"
#include "analysis/job/rank_files.h"
#include "analysis/model/collective_rows.h"
#include "analysis/model/json_text.h"
#include "analysis/model/ordered_parallel.h"

namespace gpuacct {
namespace fs = std::filesystem;
using nlohmann::json;

// ---- one rank ------------------------------------------------------------------------------

namespace {

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
  if (rank->hostname.empty()) rank->hostname = known_hostname(text("hostname"));
  if (rank->job_id.empty()) rank->job_id = text("job_id");
}

void take_identity(const RunMetadata& meta, JobRank* rank) {
  take_identity(json{{"rank", meta.rank},
                     {"world_size", meta.world_size},
                     {"hostname", meta.hostname},
                     {"job_id", meta.job_id}},
                rank);
}

// Opens a rank's rows anew for each pass: rows in memory or a step stream, and a rows file or
// records held in memory.
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

// A rank from a step stream (its rows read in windows) and a rows file.
JobRank rank_from_stream(const std::string& path, std::string rows_file) {
  JobRank rank;
  std::ifstream in(path, std::ios::binary);
  std::string header;
  std::getline(in, header);
  take_identity(parse_json(header), &rank);
  rank.step_source = "step_stream";
  rank.has_collectives = !rows_file.empty();
  rank.open = opener(nullptr, path, std::move(rows_file));
  return rank;
}

// One rank from its files; problems it has go to `problems` (it may still be usable).
// Step rows from, in order: its report (the rows every rank writes), its step stream, its
// recording, its trace.  Collectives from its rows file; a rank without a readable one takes
// its recording or trace first, which give the collectives too (the richest input: one line
// says which file it left out).
std::optional<JobRank> load_rank(const RankFiles& files, std::vector<std::string>* problems) {
  for (const std::string& p : files.left_out) problems->push_back(p);
  // The rows file first: whether it can be read decides what the rank's opener reads.
  JobRank from_rows;
  const bool rows_file = !files.collectives.empty() &&
                         take_rows_header(files.collectives, &from_rows, problems);
  const std::string collectives = rows_file ? files.collectives : std::string();
  std::vector<RankFileKind> order = step_source_order();
  if (!rows_file) {  // the inputs that give collectives too, first
    std::stable_partition(order.begin(), order.end(), [](RankFileKind k) {
      return k == RankFileKind::kRecording || k == RankFileKind::kTrace;
    });
  }
  std::optional<JobRank> rank;
  std::string used;
  for (const RankFileKind kind : order) {
    const std::string* path = files.slot(kind);
    if (path->empty()) continue;
    if (kind == RankFileKind::kStepStream) {
      if (const Status st = check_step_stream(*path); !st.ok()) {
        problems->push_back(st.message() + "; trying its other files");
        continue;
      }
      rank = rank_from_stream(*path, collectives);
      used = *path;
      break;
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
    if (!reported.ok()) {
      problems->push_back(reported.status().message() + "; trying its other files");
      continue;
    }
    rank = rank_from_report(reported->report, std::move(reported->rows), files.label,
                            to_string(kind), RankCollectives{collectives, std::move(records)});
    if (!reported->cut_off.empty()) problems->push_back(reported->cut_off);
    used = *path;
    break;
  }
  if (!rank && !rows_file) return std::nullopt;
  if (!rank) {  // collectives alone
    rank = JobRank();
    rank->step_source = "none";
    rank->has_collectives = true;
    rank->open = opener(nullptr, "", collectives);
  }
  // The richest input won over a report or stream that holds no collectives: said once.
  if (!rows_file && rank->has_collectives) {
    for (const std::string* poorer : {&files.report, &files.step_stream}) {
      if (!poorer->empty() && *poorer != used) {
        problems->push_back(files.label + ": steps and collectives from " + used + ": " + *poorer +
                            " (step rows only) left out");
      }
    }
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

// ---- grouping files into ranks (analysis/job/rank_files.h) -------------------------------------

// Adds `g` to the groups by its label; a group met twice (a file named and its folder given)
// keeps what it had and takes the kinds it lacked.
void add_group(RankFiles g, std::map<std::string, RankFiles>* groups) {
  auto [it, fresh] = groups->try_emplace(g.label, g);
  if (fresh) return;
  for (const RankFileKind k :
       {RankFileKind::kReport, RankFileKind::kStepStream, RankFileKind::kCollectives,
        RankFileKind::kRecording, RankFileKind::kTrace}) {
    if (it->second.slot(k)->empty()) *it->second.slot(k) = *g.slot(k);
  }
}

void expand(const std::string& arg, std::map<std::string, RankFiles>* groups,
            std::vector<std::string>* problems) {
  std::error_code ec;
  if (!fs::is_directory(arg, ec)) {
    if (!fs::exists(arg, ec)) {
      problems->push_back(arg + ": no such file or directory");
      return;
    }
    // A file named brings its rank's other files (those beside it: files_beside).
    RankFiles g = files_beside(arg);
    bool found = false;
    for (const RankFileKind k :
         {RankFileKind::kReport, RankFileKind::kStepStream, RankFileKind::kCollectives,
          RankFileKind::kRecording, RankFileKind::kTrace}) {
      found = found || *g.slot(k) == arg;
    }
    if (!found) {
      auto input = Input::open(arg);
      problems->push_back(input.ok() ? arg + ": not a rank's output" : input.status().message());
      return;
    }
    add_group(std::move(g), groups);
    return;
  }
  // The folder's files, and each sub-folder's (one level): a folder per rank, or ranks side by
  // side in one folder.
  for (RankFiles& g : group_folder(folder_files(arg))) add_group(std::move(g), groups);
  std::vector<std::string> subs;
  for (const auto& entry : fs::directory_iterator(arg, ec)) {
    if (entry.is_directory(ec)) subs.push_back(entry.path().string());
  }
  std::sort(subs.begin(), subs.end());
  for (const std::string& sub : subs) {
    for (RankFiles& g : group_folder(folder_files(sub))) add_group(std::move(g), groups);
  }
}

}  // namespace

std::string known_hostname(const std::string& hostname) {
  // The library writes "unknown" when gethostname fails (inject/config.cc): no host at all.
  return hostname == "unknown" ? std::string() : hostname;
}

JobRank rank_from_report(const json& report, std::vector<StepRow> rows, std::string label,
                         std::string step_source, RankCollectives collectives) {
  JobRank rank;
  rank.label = std::move(label);
  rank.step_source = std::move(step_source);
  take_identity(report.value("run", json::object()), &rank);
  const auto verdict = report.find("verdict");
  if (verdict != report.end() && verdict->is_object()) {
    const auto bound = verdict->find("bound");
    if (bound != verdict->end() && bound->is_string()) rank.verdict_bound = bound->get<std::string>();
  }
  // A rows file wins over records held (it is the whole of them; held ones are an input's).
  std::shared_ptr<const std::vector<CollectiveRecord>> held;
  if (collectives.rows_file.empty() && !collectives.held.empty()) {
    held = std::make_shared<const std::vector<CollectiveRecord>>(std::move(collectives.held));
  }
  rank.has_collectives = !collectives.rows_file.empty() || held != nullptr;
  rank.open = opener(std::make_shared<const std::vector<StepRow>>(std::move(rows)), "",
                     std::move(collectives.rows_file), std::move(held));
  return rank;
}

JobRank rank_of_analysed_input(const std::string& input, const json& report,
                               std::vector<StepRow> rows, const std::string& written,
                               std::vector<CollectiveRecord> held) {
  const RankFiles beside = files_beside(input);
  std::string source = to_string(RankFileKind::kOther);
  for (const RankFileKind k : {RankFileKind::kReport, RankFileKind::kStepStream,
                               RankFileKind::kRecording, RankFileKind::kTrace}) {
    if (*beside.slot(k) == input) source = to_string(k);
  }
  RankCollectives collectives;
  if (!written.empty()) {
    collectives.rows_file = written;
  } else if (!held.empty()) {
    collectives.held = std::move(held);
  } else {
    collectives.rows_file = beside.collectives;  // the live run's, beside a stream or report
  }
  return rank_from_report(report, std::move(rows), beside.label, source, std::move(collectives));
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
      // The richer one is kept (collectives over step rows alone), else the first in path
      // order.
      JobRank& kept = out->ranks.back();
      if (r.has_collectives && !kept.has_collectives) {
        out->problems.push_back("rank " + std::to_string(r.rank) + " appears twice (" + kept.label +
                                " and " + r.label + "): " + r.label +
                                " is used (it has collective rows), " + kept.label +
                                " left out (step rows only)");
        kept = std::move(r);
      } else {
        out->problems.push_back("rank " + std::to_string(r.rank) + " appears twice (" + kept.label +
                                " and " + r.label + "): " + r.label + " left out" +
                                (kept.has_collectives && !r.has_collectives
                                     ? " (step rows only; " + kept.label + " has collective rows)"
                                     : std::string()));
      }
      out->world_size = std::max(out->world_size, kept.world_size);
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
