// Reading a gzip Kineto trace against the decompression floor (docs/kineto_import.md, *Speed*).
//
//   trace_read_bench [--json-mb 1024] [--rounds 3] [--keep PATH | --trace PATH]
//
// Writes a synthetic trace (bench/kineto_trace_gen.h) of about --json-mb MB of JSON, gzip
// level 6, to a temporary file (removed at exit; --keep keeps it at PATH, --trace reads an
// existing .json.gz instead), then times, in alternating rounds on the same file:
//   inflate-isal  / inflate-zlib   plain decompression of the file into a 1 MiB buffer, one
//                                  thread (the floor: what any reader of the file must pay);
//   import        the Kineto importer into a counting sink (decompression included);
//   front door    account_input: importer, HTA totals, step detection, the accountant, i.e.
//                 what `gpuacct analyze` runs before it writes its files.
// Prints the median of each: seconds, MB/s of JSON, events/s (trace events when the trace was
// generated here, else mapped events), and its ratio to the fastest
// floor of the same run; then the process's peak RSS.  The machine's other load moves all of
// them alike: compare ratios, not seconds across runs.  Not run by CI (a benchmark).
#include <sys/resource.h>
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

double seconds(const std::function<bool()>& fn, bool* ok) {
  const auto t0 = std::chrono::steady_clock::now();
  *ok = fn() && *ok;
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

int run(int argc, char** argv) {
  uint64_t json_mb = 1024;
  int rounds = 3;
  std::string keep, trace;
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
    } else {
      std::fprintf(stderr,
                   "usage: trace_read_bench [--json-mb N] [--rounds N] [--keep PATH | --trace "
                   "PATH]\n");
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
    const char* what;
    std::function<bool()> fn;
    std::vector<double> times;
  };
  uint64_t json_bytes = 0, events = 0;
  std::string isal_name, zlib_name;
  std::vector<Row> rows = {
      {"inflate, fastest decoder", [&] {
         return (json_bytes = inflate_all(path, GzipDecoder::kFastest, &isal_name)) > 0;
       }, {}},
      {"inflate, zlib", [&] {
         return inflate_all(path, GzipDecoder::kZlib, &zlib_name) > 0;
       }, {}},
      {"import (importer only)", [&] {
         NameTable names;
         Stats stats;
         CountingSink sink;
         auto r = import_kineto_trace(path, names, sink, stats);
         events = sink.n;
         return r.ok();
       }, {}},
      {"front door (analyze)", [&] {
         NameTable names;
         auto input = Input::open(path);
         return input.ok() && account_input(input.value(), AccountingConfig{}, names).ok();
       }, {}},
  };
  bool ok = true;
  for (int r = 0; r < rounds; ++r) {
    for (Row& row : rows) row.times.push_back(seconds(row.fn, &ok));
  }
  if (trace.empty() && keep.empty()) std::remove(path.c_str());
  if (!ok) {
    std::fprintf(stderr, "trace_read_bench: a run failed\n");
    return 1;
  }
  const double floor = std::min(median(rows[0].times), median(rows[1].times));
  std::printf("trace: %.1f MB JSON, %llu trace events, %llu mapped; fastest decoder: %s; "
              "median of %d rounds\n",
              static_cast<double>(json_bytes) / 1e6,
              static_cast<unsigned long long>(trace_events),
              static_cast<unsigned long long>(events), isal_name.c_str(), rounds);
  // events/s of trace events when known (generated here), else of mapped events.
  const uint64_t counted = trace_events > 0 ? trace_events : events;
  std::printf("%-26s %9s %10s %12s %14s\n", "", "seconds", "JSON MB/s", "Mevents/s",
              "x fastest floor");
  for (const Row& row : rows) {
    const double t = median(row.times);
    std::printf("%-26s %9.3f %10.1f %12.2f %14.2f\n", row.what, t,
                static_cast<double>(json_bytes) / 1e6 / t, static_cast<double>(counted) / 1e6 / t,
                t / floor);
  }
  rusage ru{};
  getrusage(RUSAGE_SELF, &ru);
  std::printf("peak RSS: %.1f MiB\n", static_cast<double>(ru.ru_maxrss) / 1024.0);
  return 0;
}

}  // namespace
}  // namespace gpuacct

int main(int argc, char** argv) { return gpuacct::run(argc, argv); }
