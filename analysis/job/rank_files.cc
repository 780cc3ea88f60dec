#include "analysis/job/rank_files.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>

#include "analysis/input/input.h"
#include "analysis/job/rank_files_table.h"  // generated: kRankFilesTableJson
#include "analysis/model/json_text.h"

namespace gpuacct {
namespace fs = std::filesystem;
namespace {

struct Suffix {
  std::string text;
  RankFileKind kind = RankFileKind::kOther;
  std::string alone;          // the name of a file named after its kind alone
  bool digits_after = false;  // the suffix is followed by digits (a killed writer's pid)
  bool by_content = false;
  RankFileKind or_by_content = RankFileKind::kOther;
};

struct Table {
  std::vector<Suffix> suffixes;  // longest first
  std::vector<std::string> tool_names, tool_suffixes;
  std::vector<RankFileKind> step_sources;
};

RankFileKind kind_named(const std::string& name) {
  for (const RankFileKind k :
       {RankFileKind::kReport, RankFileKind::kStepStream, RankFileKind::kCollectives,
        RankFileKind::kRecording, RankFileKind::kTrace}) {
    if (name == to_string(k)) return k;
  }
  return RankFileKind::kOther;
}

Table parse_table() {
  Table t;
  const nlohmann::json j = parse_json(kRankFilesTableJson);
  if (!j.is_object()) return t;  // rank_files_test checks that it parses
  for (const nlohmann::json& f : j.value("files", nlohmann::json::array())) {
    Suffix s;
    s.text = f.value("suffix", "");
    s.kind = kind_named(f.value("kind", ""));
    s.alone = f.value("alone", "");
    s.digits_after = f.value("then", "") == "digits";
    s.by_content = f.contains("or_by_content");
    if (s.by_content) s.or_by_content = kind_named(f.value("or_by_content", ""));
    if (!s.text.empty() && s.kind != RankFileKind::kOther) t.suffixes.push_back(std::move(s));
  }
  std::stable_sort(t.suffixes.begin(), t.suffixes.end(),
                   [](const Suffix& a, const Suffix& b) { return a.text.size() > b.text.size(); });
  const nlohmann::json tools = j.value("tool_outputs", nlohmann::json::object());
  for (const nlohmann::json& n : tools.value("names", nlohmann::json::array())) {
    if (n.is_string()) t.tool_names.push_back(n.get<std::string>());
  }
  for (const nlohmann::json& n : tools.value("suffixes", nlohmann::json::array())) {
    if (n.is_string()) t.tool_suffixes.push_back(n.get<std::string>());
  }
  for (const nlohmann::json& n : j.value("step_sources", nlohmann::json::array())) {
    if (n.is_string() && kind_named(n.get<std::string>()) != RankFileKind::kOther) {
      t.step_sources.push_back(kind_named(n.get<std::string>()));
    }
  }
  return t;
}

const Table& table() {
  static const Table t = parse_table();
  return t;
}

bool ends_with(std::string_view s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.substr(s.size() - suffix.size()) == suffix;
}

// The suffix of `kind` a writer uses (the first of its kind in the table that is not a killed
// writer's name).
const Suffix* written_suffix(RankFileKind kind) {
  const Suffix* best = nullptr;
  for (const Suffix& s : table().suffixes) {
    if (s.kind != kind || s.digits_after || s.by_content) continue;
    if (best == nullptr || !s.alone.empty()) best = &s;  // the kind's own name (has an "alone")
  }
  return best;
}

// A report's "run" object as text, from its first MiB (a report's steps can be large; the run
// section is written before them): "" when it is not there.
std::string run_section(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::string head(1 << 20, '\0');
  in.read(head.data(), static_cast<std::streamsize>(head.size()));
  head.resize(static_cast<size_t>(in.gcount()));
  size_t at = head.find("\"run\":");
  if (at == std::string::npos) return "";
  at = head.find('{', at);
  if (at == std::string::npos) return "";
  int depth = 0;
  bool quoted = false;
  for (size_t i = at; i < head.size(); ++i) {
    const char c = head[i];
    if (quoted) {
      if (c == '\\') ++i;
      if (c == '"') quoted = false;
    } else if (c == '"') {
      quoted = true;
    } else if (c == '{') {
      ++depth;
    } else if (c == '}' && --depth == 0) {
      return head.substr(at, i + 1 - at);
    }
  }
  return "";
}

// Which process wrote a group's files: (job id, rank, pid) from the first line of its step
// stream or rows file, else its report's "run" section; empty when they do not say all three.
std::string process_of(const RankFiles& g) {
  const auto from = [](const nlohmann::json& meta) -> std::string {
    if (!meta.is_object()) return "";
    const auto rank = meta.find("rank");
    const auto pid = meta.find("pid");
    if (rank == meta.end() || !rank->is_number_integer() || rank->get<int64_t>() < 0 ||
        pid == meta.end() || !pid->is_number_integer() || pid->get<int64_t>() <= 0) {
      return "";
    }
    const auto job = meta.find("job_id");
    return (job != meta.end() && job->is_string() ? job->get<std::string>() : std::string()) + "/" +
           std::to_string(rank->get<int64_t>()) + "/" + std::to_string(pid->get<int64_t>());
  };
  const auto first_line = [](const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    std::string line;
    std::getline(in, line);
    return line;
  };
  if (!g.step_stream.empty()) {
    if (std::string p = from(parse_json(first_line(g.step_stream))); !p.empty()) return p;
  }
  if (!g.collectives.empty()) {  // "# gpuacct.collectives/1 {...}"
    const std::string line = first_line(g.collectives);
    const size_t brace = line.find('{');
    if (std::string p = from(parse_json(brace == std::string::npos ? "" : line.substr(brace)));
        !p.empty()) {
      return p;
    }
  }
  if (!g.report.empty()) return from(parse_json(run_section(g.report)));
  return "";
}

// Groups of one folder written by one process under different base names (a fresh name the
// library took beside a file it must not replace: job-1.report.json beside job.steps.jsonl)
// are one rank: merged into the first, a kind it already has left out with a line.
void merge_same_process(std::vector<RankFiles>* groups) {
  std::map<std::string, size_t> first_of;
  std::vector<RankFiles> kept;
  for (RankFiles& g : *groups) {
    const std::string process = process_of(g);
    const auto it = process.empty() ? first_of.end() : first_of.find(process);
    if (it == first_of.end()) {
      if (!process.empty()) first_of.emplace(process, kept.size());
      kept.push_back(std::move(g));
      continue;
    }
    RankFiles& into = kept[it->second];
    for (const RankFileKind k :
         {RankFileKind::kReport, RankFileKind::kStepStream, RankFileKind::kCollectives,
          RankFileKind::kRecording, RankFileKind::kTrace}) {
      const std::string& path = *g.slot(k);
      if (path.empty()) continue;
      if (into.slot(k)->empty()) {
        *into.slot(k) = path;
      } else {
        into.left_out.push_back(path + ": a second " + std::string(to_string(k)) + " for " +
                                into.label + " (" + *into.slot(k) + " is used)");
      }
    }
    for (std::string& line : g.left_out) into.left_out.push_back(std::move(line));
  }
  *groups = std::move(kept);
}

}  // namespace

const char* to_string(RankFileKind kind) {
  switch (kind) {
    case RankFileKind::kReport:
      return "report";
    case RankFileKind::kStepStream:
      return "step_stream";
    case RankFileKind::kCollectives:
      return "collectives";
    case RankFileKind::kRecording:
      return "recording";
    case RankFileKind::kTrace:
      return "trace";
    case RankFileKind::kOther:
      break;
  }
  return "other";
}

RankFileName rank_file_name(std::string_view file_name) {
  RankFileName out;
  const Table& t = table();
  for (const std::string& n : t.tool_names) {
    if (file_name == n) out.tool_output = true;
  }
  for (const std::string& s : t.tool_suffixes) {
    if (ends_with(file_name, s) && file_name.size() > s.size()) out.tool_output = true;
  }
  if (out.tool_output) {
    out.base = std::string(file_name);
    return out;
  }
  for (const Suffix& s : t.suffixes) {
    if (!s.alone.empty() && file_name == s.alone) {
      out.kind = s.kind;
      out.alone = true;
      return out;
    }
  }
  for (const Suffix& s : t.suffixes) {
    size_t at = std::string_view::npos;
    if (s.digits_after) {
      const size_t found = file_name.rfind(s.text);
      const size_t digits = found == std::string_view::npos ? 0 : found + s.text.size();
      if (found != std::string_view::npos && found > 0 && digits < file_name.size() &&
          std::all_of(file_name.begin() + static_cast<std::ptrdiff_t>(digits), file_name.end(),
                      [](char c) { return c >= '0' && c <= '9'; })) {
        at = found;
      }
    } else if (ends_with(file_name, s.text) && file_name.size() > s.text.size()) {
      at = file_name.size() - s.text.size();
    }
    if (at == std::string_view::npos) continue;
    out.kind = s.kind;
    out.base = std::string(file_name.substr(0, at));
    out.by_content = s.by_content;
    out.or_by_content = s.or_by_content;
    return out;
  }
  out.base = std::string(file_name);
  return out;
}

std::string rank_file(const std::string& base, RankFileKind kind) {
  const Suffix* s = written_suffix(kind);
  return s == nullptr || kind == RankFileKind::kTrace ? std::string() : base + s->text;
}

std::string step_rows_csv_file(const std::string& base) {
  return base + ".steps.csv";
}

std::string output_stem(const std::string& input_path) {
  const fs::path path(input_path);
  const std::string file = path.filename().string();
  const RankFileName name = rank_file_name(file);
  if (name.kind == RankFileKind::kOther || name.tool_output) return file.empty() ? "report" : file;
  if (name.alone) {
    const std::string folder = path.parent_path().filename().string();
    return folder.empty() || folder == "." || folder == ".." ? "report" : folder;
  }
  return name.base.empty() ? "report" : name.base;
}

std::string* RankFiles::slot(RankFileKind kind) {
  switch (kind) {
    case RankFileKind::kReport:
      return &report;
    case RankFileKind::kStepStream:
      return &step_stream;
    case RankFileKind::kCollectives:
      return &collectives;
    case RankFileKind::kRecording:
      return &recording;
    case RankFileKind::kTrace:
      return &trace;
    case RankFileKind::kOther:
      break;
  }
  return nullptr;
}

const std::string* RankFiles::slot(RankFileKind kind) const {
  return const_cast<RankFiles*>(this)->slot(kind);
}

RankFileKind rank_file_kind_by_content(const std::string& path) {
  auto input = Input::open(path);
  if (!input.ok()) return RankFileKind::kOther;
  switch (input->format()) {
    case InputFormat::kReport:
      return RankFileKind::kReport;
    case InputFormat::kStepStream:
      return RankFileKind::kStepStream;
    case InputFormat::kRecording:
      return RankFileKind::kRecording;
    case InputFormat::kKinetoTrace:
      return RankFileKind::kTrace;
  }
  return RankFileKind::kOther;
}

const std::vector<RankFileKind>& step_source_order() {
  return table().step_sources;
}

StatusOr<std::string> rank_input_of_folder(const std::string& folder) {
  const std::vector<RankFiles> groups = group_folder(folder_files(folder));
  if (groups.size() > 1) {
    std::string names;
    for (size_t i = 0; i < groups.size() && i < 3; ++i) {
      names += (i > 0 ? ", " : "") + fs::path(groups[i].label).filename().string();
    }
    return Status::Error(folder + ": holds the files of " + std::to_string(groups.size()) +
                         " ranks (" + names + (groups.size() > 3 ? ", ..." : "") +
                         "): name one of its files");
  }
  for (const RankFileKind k : step_source_order()) {
    if (!groups.empty() && !groups[0].slot(k)->empty()) return *groups[0].slot(k);
  }
  return Status::Error(folder + ": no gpuacct report, step stream, recording or trace in it");
}

std::vector<std::string> folder_files(const std::string& folder) {
  std::vector<std::string> out;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(folder.empty() ? "." : folder, ec)) {
    if (!entry.is_regular_file(ec)) continue;
    out.push_back((fs::path(folder) / entry.path().filename()).string());
  }
  std::sort(out.begin(), out.end());
  return out;
}

std::vector<RankFiles> group_folder(std::vector<std::string> files, const std::string& preferred) {
  std::sort(files.begin(), files.end());
  files.erase(std::unique(files.begin(), files.end()), files.end());
  // The named file first: it takes its kind's slot before the others of its group.
  std::stable_partition(files.begin(), files.end(),
                        [&](const std::string& f) { return f == preferred; });
  struct Named {
    std::string path;
    RankFileName name;
  };
  std::vector<Named> named;
  bool folder_is_rank = false;
  for (std::string& path : files) {
    RankFileName name = rank_file_name(fs::path(path).filename().string());
    if (name.tool_output) continue;
    // A name that leaves the kind open is asked its content; a name the table does not know
    // only when the user named the file (a folder's other files are not opened).
    if (name.by_content || (name.kind == RankFileKind::kOther && path == preferred)) {
      const RankFileKind kind = rank_file_kind_by_content(path);
      const bool allowed = !name.by_content || kind == name.kind || kind == name.or_by_content;
      if (kind == RankFileKind::kOther || !allowed) continue;
      name.kind = kind;
    }
    if (name.kind == RankFileKind::kOther) continue;
    folder_is_rank = folder_is_rank || name.alone;
    named.push_back({std::move(path), std::move(name)});
  }
  std::map<std::string, RankFiles> groups;  // by label: path order
  for (Named& f : named) {
    const fs::path parent = fs::path(f.path).parent_path();
    const std::string folder = parent.empty() ? std::string(".") : parent.string();
    const std::string label =
        folder_is_rank || f.name.base.empty() ? folder : (parent / f.name.base).string();
    RankFiles& g = groups[label];
    g.label = label;
    std::string* slot = g.slot(f.name.kind);
    if (slot->empty()) {
      *slot = f.path;
    } else {
      g.left_out.push_back(f.path + ": a second " + to_string(f.name.kind) + " for " + label +
                           " (" + *slot + " is used)");
    }
  }
  std::vector<RankFiles> out;
  for (auto& [label, g] : groups) out.push_back(std::move(g));
  if (!folder_is_rank && out.size() > 1) merge_same_process(&out);
  return out;
}

RankFiles files_beside(const std::string& input) {
  const std::string folder = fs::path(input).parent_path().string();
  std::vector<std::string> files = folder_files(folder);
  if (std::find(files.begin(), files.end(), input) == files.end()) files.push_back(input);
  for (RankFiles& g : group_folder(std::move(files), input)) {
    for (const RankFileKind k :
         {RankFileKind::kReport, RankFileKind::kStepStream, RankFileKind::kCollectives,
          RankFileKind::kRecording, RankFileKind::kTrace}) {
      if (*g.slot(k) == input) return std::move(g);
    }
  }
  RankFiles alone;
  alone.label = input;
  return alone;
}

}  // namespace gpuacct
