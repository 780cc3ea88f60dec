// Reading a gzip Kineto trace against the decompression floor (docs/kineto_import.md, *Speed*).
//
//   trace_read_bench [--json-mb 1024] [--rounds 3] [--keep PATH | --trace PATH]
//                    [--gpuacct PATH | --no-command]
//
// Writes a synthetic trace (bench/kineto_trace_gen.h) of about --json-mb MB of JSON, gzip
// level 6, to a temporary file (removed at exit; --keep keeps it at PATH, --trace reads an
// existing .json.gz instead), then times, in alternating rounds on the same file:
//   inflate-isal  / inflate-zlib   plain decompression of the file into a 1 MiB buffer, one
//                                  thread (the floor: what any reader of the file must pay);
//   igzip -dc, libdeflate-gunzip -c, zcat
//                                  the same by the command-line tools, output to /dev/null
//                                  (each one found on PATH; left out when not);
//   import        the Kineto importer into a counting sink (decompression included);
//   import, in memory
//                 the same on the decompressed bytes held in memory, one thread: the walk
//                 alone, what the importer would cost if inflating were free;
//   simdjson DOM / simdjson on-demand   (only when built with simdjson: bench/CMakeLists.txt)
//                 a general JSON parser on the same bytes in memory, one thread: the DOM parse
//                 (validates every byte, as the importer does) walking each event's "ph", and
//                 the on-demand API reading the fields the importer reads (ph, cat, name, pid,
//                 tid, ts, dur, id and args' correlation, device, stream); a reference for how
//                 fast a parser with SIMD stages reads these bytes on this machine;
//   front door    account_input: importer, HTA totals, step detection, the accountant, i.e.
//                 what `gpuacct analyze` runs before it writes its files;
//   gpuacct analyze --no-files     the whole command, a child process (--gpuacct PATH, default
//                                  the build's bin/gpuacct beside bench/; its peak RSS too).
//                                  --gpuacct again adds another binary's row (before/after
//                                  of a change in the same run).
// Prints the median of each: seconds, MB/s of JSON, events/s (trace events when the trace was
// generated here, else mapped events), its ratio to the fastest floor of the same run (the
// fastest of the in-process and command-line decompressions), and a child's peak RSS; then the
// process's own peak RSS.  The machine's other load moves all of them alike: compare ratios,
// not seconds across runs.  Not run by CI (a benchmark).
#include <fcntl.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "analysis/import/byte_source.h"
#include "analysis/import/kineto_importer.h"
#include "analysis/input/input.h"
#include "bench/kineto_trace_gen.h"

#if defined(GPUACCT_BENCH_SIMDJSON)
#include <simdjson.h>
#endif

namespace gpuacct {
namespace {

using bench::CountingSink;

// Streams the synthetic trace through gzip into `path`; returns the JSON bytes and events.
bool write_trace(const std::string& path, uint64_t json_bytes, uint64_t* bytes, uint64_t* events) {
  gzFile gz = gzopen(path.c_str(), "wb6");
  if (gz == nullptr) return false;
  bench::KinetoTraceGen gen;
  std::string chunk = bench::KinetoTraceGen::header();
  uint64_t total = 0;
  bool ok = true;
  auto flush = [&] {
    ok = ok && gzwrite(gz, chunk.data(), static_cast<unsigned>(chunk.size())) ==
                   static_cast<int>(chunk.size());
    total += chunk.size();
    chunk.clear();
  };
  while (total + chunk.size() < json_bytes) {
    gen.append_op(chunk);
    if (chunk.size() >= (1u << 20)) flush();
  }
  chunk += bench::KinetoTraceGen::footer();
  flush();
  ok = gzclose(gz) == Z_OK && ok;
  *bytes = total;
  *events = gen.events();
  return ok;
}

// Inflates the whole file on this thread; returns the decompressed size (0 on an error).
uint64_t inflate_all(const std::string& path, GzipDecoder decoder, std::string* name) {
  ByteSourceOptions opts;
  opts.decoder = decoder;
  opts.background_min_bytes = UINT64_MAX;
  auto src = open_byte_source(path, opts);
  if (!src.ok()) return 0;
  *name = src.value()->decoder();
  std::vector<char> buf(size_t{1} << 20);
  uint64_t total = 0;
  for (;;) {
    size_t got = 0;
    if (!src.value()->read(buf.data(), buf.size(), &got).ok()) return 0;
    if (got == 0) return total;
    total += got;
  }
}

// Runs `args` (found on PATH when the name has no '/') with stdout and stderr to /dev/null;
// true when it exits 0.  *max_rss_kib: its peak resident set.
// Runs `args` with stdout and stderr to /dev/null; true if it exited 0.  *max_rss_kib: its peak
// RSS.  A forked child's peak RSS counts the pages it inherited, so the commands are forked from
// a small process started before this one holds anything (Spawner), not from this one.
bool run_child_here(const std::vector<std::string>& args, long* max_rss_kib) {
  std::vector<char*> argv;
  for (const std::string& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  const pid_t pid = ::fork();
  if (pid < 0) return false;
  if (pid == 0) {
    const int null_fd = ::open("/dev/null", O_WRONLY);
    if (null_fd >= 0) {
      ::dup2(null_fd, STDOUT_FILENO);
      ::dup2(null_fd, STDERR_FILENO);
    }
    ::execvp(argv[0], argv.data());
    ::_exit(127);
  }
  int status = 0;
  rusage ru{};
  if (::wait4(pid, &status, 0, &ru) != pid) return false;
  *max_rss_kib = ru.ru_maxrss;
  return WIFEXITED(status) && WEXITSTATUS(status) == 0;
}

// The small process that runs the command rows: requests are NUL-separated arguments ended by
// an empty one, over a pipe; the answer is (ok, peak RSS).  Without it (fork failed) the
// commands run from this process.
class Spawner {
 public:
  Spawner() {
    int req[2], ans[2];
    if (::pipe(req) != 0) return;
    if (::pipe(ans) != 0) {
      ::close(req[0]);
      ::close(req[1]);
      return;
    }
    pid_ = ::fork();
    if (pid_ == 0) {
      ::close(req[1]);
      ::close(ans[0]);
      serve(req[0], ans[1]);
      ::_exit(0);
    }
    ::close(req[0]);
    ::close(ans[1]);
    if (pid_ < 0) {
      ::close(req[1]);
      ::close(ans[0]);
      return;
    }
    to_ = ::fdopen(req[1], "w");
    from_ = ans[0];
  }
  ~Spawner() {
    if (to_ != nullptr) std::fclose(to_);  // the server sees the end and exits
    if (from_ >= 0) ::close(from_);
    if (pid_ > 0) ::waitpid(pid_, nullptr, 0);
  }
  bool run(const std::vector<std::string>& args, long* max_rss_kib) {
    if (to_ == nullptr) return run_child_here(args, max_rss_kib);
    for (const std::string& a : args) std::fwrite(a.c_str(), 1, a.size() + 1, to_);
    std::fputc('\0', to_);
    std::fflush(to_);
    Answer r{};
    if (::read(from_, &r, sizeof r) != static_cast<ssize_t>(sizeof r)) return false;
    *max_rss_kib = r.max_rss_kib;
    return r.ok != 0;
  }

 private:
  struct Answer {
    long max_rss_kib;
    int ok;
  };
  static void serve(int in_fd, int out_fd) {
    FILE* in = ::fdopen(in_fd, "r");
    if (in == nullptr) return;
    std::vector<std::string> args;
    std::string cur;
    for (int c; (c = std::fgetc(in)) != EOF;) {
      if (c != '\0') {
        cur.push_back(static_cast<char>(c));
      } else if (!cur.empty()) {
        args.push_back(cur);
        cur.clear();
      } else {
        Answer r{};
        r.ok = run_child_here(args, &r.max_rss_kib) ? 1 : 0;
        if (::write(out_fd, &r, sizeof r) != static_cast<ssize_t>(sizeof r)) return;
        args.clear();
      }
    }
  }
  pid_t pid_ = -1;
  FILE* to_ = nullptr;
  int from_ = -1;
};

// True if `name` is an executable file on PATH.
bool on_path(const std::string& name) {
  const char* path = std::getenv("PATH");
  std::string dirs = path != nullptr ? path : "";
  size_t begin = 0;
  while (begin <= dirs.size()) {
    size_t end = dirs.find(':', begin);
    if (end == std::string::npos) end = dirs.size();
    const std::string candidate = dirs.substr(begin, end - begin) + "/" + name;
    if (end > begin && ::access(candidate.c_str(), X_OK) == 0) return true;
    begin = end + 1;
  }
  return false;
}

double seconds(const std::function<bool()>& fn, bool* ok) {
  const auto t0 = std::chrono::steady_clock::now();
  *ok = fn() && *ok;
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

// The whole decompressed trace, for the in-memory rows ("" when it cannot be read).
std::string inflate_to_memory(const std::string& path) {
  auto src = open_byte_source(path);
  if (!src.ok()) return {};
  std::string out;
  std::vector<char> buf(1 << 20);
  for (;;) {
    size_t got = 0;
    if (!src.value()->read(buf.data(), buf.size(), &got).ok()) return {};
    if (got == 0) return out;
    out.append(buf.data(), got);
  }
}

#if defined(GPUACCT_BENCH_SIMDJSON)
// DOM: the whole document parsed and validated, then each event's "ph" read.
bool simdjson_dom(simdjson::dom::parser& parser, const simdjson::padded_string& json,
                  uint64_t* events) {
  simdjson::dom::element doc;
  if (parser.parse(json).get(doc) != simdjson::SUCCESS) return false;
  simdjson::dom::array evs;
  if (doc["traceEvents"].get(evs) != simdjson::SUCCESS) return false;
  uint64_t n = 0;
  for (simdjson::dom::element e : evs) {
    std::string_view ph;
    if (e["ph"].get(ph) == simdjson::SUCCESS) ++n;
  }
  *events = n;
  return true;
}

// On demand: the fields the importer reads, every other value skipped.
bool simdjson_fields(simdjson::ondemand::parser& parser, const simdjson::padded_string& json,
                     uint64_t* events) {
  using namespace simdjson;
  ondemand::document doc;
  if (parser.iterate(json).get(doc) != SUCCESS) return false;
  ondemand::array evs;
  if (doc["traceEvents"].get_array().get(evs) != SUCCESS) return false;
  uint64_t n = 0, sum = 0;
  for (auto item : evs) {
    ondemand::object e;
    if (item.get_object().get(e) != SUCCESS) return false;
    for (auto field : e) {
      std::string_view k;
      if (field.unescaped_key().get(k) != SUCCESS) return false;
      ondemand::value v = field.value();
      std::string_view s;
      double d = 0;
      int64_t i = 0;
      if (k == "ph" || k == "cat" || k == "name") {
        if (v.get_string().get(s) == SUCCESS) sum += s.size();
      } else if (k == "ts" || k == "dur") {
        if (v.get_double().get(d) == SUCCESS) sum += static_cast<uint64_t>(d);
      } else if (k == "pid" || k == "tid" || k == "id") {
        if (v.get_int64().get(i) == SUCCESS) sum += static_cast<uint64_t>(i);
      } else if (k == "args") {
        ondemand::object a;
        if (v.get_object().get(a) != SUCCESS) continue;
        for (auto af : a) {
          std::string_view ak;
          if (af.unescaped_key().get(ak) != SUCCESS) return false;
          if (ak == "correlation" || ak == "device" || ak == "stream") {
            if (af.value().get_int64().get(i) == SUCCESS) sum += static_cast<uint64_t>(i);
          }
        }
      }
    }
    ++n;
  }
  *events = n + (sum & 0);  // sum only keeps the reads from being optimised away
  return true;
}
#endif

int run(int argc, char** argv) {
  Spawner spawner;  // first, while this process holds nothing
  uint64_t json_mb = 1024;
  int rounds = 3;
  std::string keep, trace;
  std::vector<std::string> gpuaccts;
  bool command = true;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    const bool has_value = i + 1 < argc;
    if (a == "--json-mb" && has_value) {
      json_mb = std::strtoull(argv[++i], nullptr, 10);
    } else if (a == "--rounds" && has_value) {
      rounds = std::max(1, std::atoi(argv[++i]));
    } else if (a == "--keep" && has_value) {
      keep = argv[++i];
    } else if (a == "--trace" && has_value) {
      trace = argv[++i];
    } else if (a == "--gpuacct" && has_value) {
      gpuaccts.push_back(argv[++i]);
    } else if (a == "--no-command") {
      command = false;
    } else {
      std::fprintf(stderr,
                   "usage: trace_read_bench [--json-mb N] [--rounds N] [--keep PATH | --trace "
                   "PATH] [--gpuacct PATH | --no-command]\n");
      return 2;
    }
  }
  std::string path = trace;
  uint64_t trace_events = 0;  // all traceEvents elements (known when generated here)
  if (path.empty()) {
    path = keep.empty() ? "/tmp/gpuacct_trace_read_bench." + std::to_string(::getpid()) + ".json.gz"
                        : keep;
    uint64_t bytes = 0;
    std::fprintf(stderr, "writing %llu MB of trace JSON (gzip) to %s ...\n",
                 static_cast<unsigned long long>(json_mb), path.c_str());
    if (!write_trace(path, json_mb * 1000000, &bytes, &trace_events)) {
      std::fprintf(stderr, "trace_read_bench: cannot write %s\n", path.c_str());
      return 1;
    }
  }
  struct Row {
    std::string what;
    std::function<bool()> fn;
    bool floor = false;    // a plain decompression: candidate for the floor
    long max_rss_kib = 0;  // a child's peak RSS (0: in this process)
    std::vector<double> times;
    bool in_memory = false;  // reads InMemory: timed after the other rows of a round
  };
  uint64_t json_bytes = 0, events = 0;
  std::string isal_name, zlib_name;
  std::vector<Row> rows;
  rows.push_back(
      {"inflate, fastest decoder",
       [&] { return (json_bytes = inflate_all(path, GzipDecoder::kFastest, &isal_name)) > 0; },
       true,
       0,
       {}});
  rows.push_back({"inflate, zlib",
                  [&] { return inflate_all(path, GzipDecoder::kZlib, &zlib_name) > 0; },
                  true,
                  0,
                  {}});
  const std::vector<std::vector<std::string>> tools = {
      {"igzip", "-dc", path}, {"libdeflate-gunzip", "-c", path}, {"zcat", path}};
  for (const auto& tool : tools) {
    if (!on_path(tool[0])) {
      std::fprintf(stderr, "trace_read_bench: %s not on PATH: its row is left out\n",
                   tool[0].c_str());
      continue;
    }
    const size_t i = rows.size();  // by index: rows grows after this
    rows.push_back({tool[0] + " (command)", nullptr, true, 0, {}});
    rows[i].fn = [&rows, i, tool, &spawner] { return spawner.run(tool, &rows[i].max_rss_kib); };
  }
  rows.push_back({"import (importer only)",
                  [&] {
                    NameTable names;
                    Stats stats;
                    CountingSink sink;
                    auto r = import_kineto_trace(path, names, sink, stats);
                    events = sink.n;
                    return r.ok();
                  },
                  false,
                  0,
                  {}});
  // The in-memory rows read the decompressed bytes, inflated before them in each round (not
  // timed) and freed after them, so that a command row's child does not start with them (a
  // forked child's peak RSS counts what it inherited).
  struct InMemory {
    std::string plain;
#if defined(GPUACCT_BENCH_SIMDJSON)
    simdjson::padded_string padded;
#endif
  } mem;
  rows.push_back({"import, in memory (one thread)",
                  [&] {
                    NameTable names;
                    Stats stats;
                    CountingSink sink;
                    return import_kineto_buffer(mem.plain, names, sink, stats).ok();
                  },
                  false,
                  0,
                  {},
                  true});
#if defined(GPUACCT_BENCH_SIMDJSON)
  simdjson::dom::parser dom_parser;
  simdjson::ondemand::parser od_parser;
  uint64_t sj_events = 0;
  rows.push_back({std::string("simdjson DOM, in memory (") +
                      std::string(simdjson::get_active_implementation()->name()) + ")",
                  [&] { return simdjson_dom(dom_parser, mem.padded, &sj_events); },
                  false,
                  0,
                  {},
                  true});
  rows.push_back({"simdjson on-demand, in memory",
                  [&] { return simdjson_fields(od_parser, mem.padded, &sj_events); },
                  false,
                  0,
                  {},
                  true});
#endif
  rows.push_back({"front door (in process)",
                  [&] {
                    NameTable names;
                    auto input = Input::open(path);
                    return input.ok() &&
                           account_input(input.value(), AccountingConfig{}, names).ok();
                  },
                  false,
                  0,
                  {}});
  if (command && gpuaccts.empty()) {
    // Default: the tool of the same build (build/bench/trace_read_bench -> build/bin/gpuacct).
    const std::string self = argv[0];
    const size_t slash = self.rfind('/');
    gpuaccts.push_back((slash == std::string::npos ? std::string(".") : self.substr(0, slash)) +
                       "/../bin/gpuacct");
  }
  for (const std::string& gpuacct : command ? gpuaccts : std::vector<std::string>{}) {
    if (::access(gpuacct.c_str(), X_OK) != 0) {
      std::fprintf(stderr, "trace_read_bench: no %s (--gpuacct PATH): its row is left out\n",
                   gpuacct.c_str());
      continue;
    }
    const size_t i = rows.size();
    const std::string label = gpuaccts.size() == 1
                                  ? std::string("gpuacct analyze (command)")
                                  : "analyze: " + gpuacct.substr(gpuacct.rfind('/') + 1);
    rows.push_back({label, nullptr, false, 0, {}});
    const std::vector<std::string> args = {gpuacct, "analyze", path, "--no-files"};
    rows[i].fn = [&rows, i, args, &spawner] { return spawner.run(args, &rows[i].max_rss_kib); };
  }
  bool ok = true;
  for (int r = 0; r < rounds; ++r) {
    for (Row& row : rows) {
      if (!row.in_memory) row.times.push_back(seconds(row.fn, &ok));
    }
    mem.plain = inflate_to_memory(path);
    if (mem.plain.empty()) {
      std::fprintf(stderr, "trace_read_bench: cannot inflate %s into memory\n", path.c_str());
      return 1;
    }
#if defined(GPUACCT_BENCH_SIMDJSON)
    mem.padded = simdjson::padded_string(mem.plain);
#endif
    for (Row& row : rows) {
      if (row.in_memory) row.times.push_back(seconds(row.fn, &ok));
    }
    std::string().swap(mem.plain);
#if defined(GPUACCT_BENCH_SIMDJSON)
    mem.padded = simdjson::padded_string();
#endif
  }
  if (trace.empty() && keep.empty()) std::remove(path.c_str());
  if (!ok) {
    std::fprintf(stderr, "trace_read_bench: a run failed\n");
    return 1;
  }
  double floor = 0;
  std::string floor_name;
  for (const Row& row : rows) {
    if (row.floor && (floor_name.empty() || median(row.times) < floor)) {
      floor = median(row.times);
      floor_name = row.what;
    }
  }
  std::printf(
      "trace: %.1f MB JSON, %llu trace events, %llu mapped; fastest decoder: %s; "
      "median of %d rounds; floor: %s\n",
      static_cast<double>(json_bytes) / 1e6, static_cast<unsigned long long>(trace_events),
      static_cast<unsigned long long>(events), isal_name.c_str(), rounds, floor_name.c_str());
  // events/s of trace events when known (generated here), else of mapped events.
  const uint64_t counted = trace_events > 0 ? trace_events : events;
  std::printf("%-36s %9s %10s %10s %10s %12s\n", "", "seconds", "JSON MB/s", "Mevents/s", "x floor",
              "peak RSS MiB");
  for (const Row& row : rows) {
    const double t = median(row.times);
    char rss[32] = "-";
    if (row.max_rss_kib > 0)
      std::snprintf(rss, sizeof(rss), "%.1f", static_cast<double>(row.max_rss_kib) / 1024.0);
    std::printf("%-36s %9.3f %10.1f %10.2f %10.2f %12s\n", row.what.c_str(), t,
                static_cast<double>(json_bytes) / 1e6 / t, static_cast<double>(counted) / 1e6 / t,
                t / floor, rss);
  }
  rusage ru{};
  getrusage(RUSAGE_SELF, &ru);
  std::printf("peak RSS of this process (the in-process rows): %.1f MiB\n",
              static_cast<double>(ru.ru_maxrss) / 1024.0);
  return 0;
}

}  // namespace
}  // namespace gpuacct

int main(int argc, char** argv) { return gpuacct::run(argc, argv); }
