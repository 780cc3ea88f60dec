// Streaming importer for PyTorch-profiler (Kineto) Chrome-trace JSON files, plain or gzip.
//
// The file is read in chunks (gzip is inflated in chunks) and parsed event by event; no DOM of
// the file is built, so memory is bounded by the largest single event, not by the file.  Each
// event is mapped to the gpuacct event model (docs/kineto_import.md has the table) and pushed
// to `sink` in file order; Kineto files are not sorted by time, so no watermark is emitted:
// the caller finishes its accountant once the import returns.
//
// Errors: input that is not a Kineto/Chrome trace, broken JSON, truncated or corrupt gzip
// return an error naming the byte offset (of the decompressed text) and the event index.
// Events that are valid JSON but unusable (missing or mistyped fields) are skipped and counted
// in Stat::importer_events_skipped; events of categories the importer does not know are
// counted in Stat::importer_unknown_categories.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>

#include "analysis/model/event_sink.h"
#include "analysis/model/name_table.h"
#include "analysis/model/run_metadata.h"
#include "analysis/model/stats.h"
#include "analysis/model/status.h"

namespace gpuacct {

class KinetoCollectives;

struct KinetoImportOptions {
  bool progress = false;  // progress on stderr (only when stderr is a terminal)
  // Optional: receives every `cuda_sync` row that has a stream (Stream Sync, Stream Wait Event;
  // not Context / Event Sync, whose stream is -1) as a GpuOp: start, end, stream, device
  // (args.device, else pid), correlation (0 when absent or negative), name (the sync kind).
  // They are not GPU work -- the time the host or a stream waited -- so they never reach
  // `sink`; HTA's temporal breakdown counts them (TraceTotals::on_cuda_sync).
  std::function<void(const GpuOp&)> on_cuda_sync;
  // Optional: the start (ns) of every `gpu_user_annotation` named ProfilerStep#N without a
  // stream.  PyTorch writes each profiler step on the GPU timeline too (args: "External id"
  // only); HTA counts such rows among its CPU rows (stream -1) when it looks for the latest
  // ProfilerStep (TraceTotals::on_gpu_step_annotation).  Not a step of the accounting.
  std::function<void(TimeNs)> on_gpu_step_annotation;
  // Optional: receives every record_param_comms CPU op and every collective kernel with their
  // collective args (analysis/import/kineto_collectives.h); the caller finish()es it.
  KinetoCollectives* collectives = nullptr;
};

StatusOr<RunMetadata> import_kineto_trace(const std::string& path, NameTable& names,
                                          EventSink& sink, Stats& stats,
                                          const KinetoImportOptions& opts = {});

// Same, from bytes in memory (plain or gzip).  For tests and the fuzzer.
StatusOr<RunMetadata> import_kineto_buffer(std::string_view data, NameTable& names, EventSink& sink,
                                           Stats& stats, const KinetoImportOptions& opts = {});

// True if the file looks like a Kineto/Chrome trace (gzip magic, or '{' / '[' as the first
// non-blank byte).  Cheap: reads a few bytes.
bool looks_like_kineto_trace(const std::string& path);

// Parses a JSON decimal number holding microseconds into integer nanoseconds, exactly (no
// binary floating point), rounding half away from zero below 1 ns.  "1234567.891" ->
// 1234567891.  Accepts exponents ("1.5e3").  False on syntax error or overflow.
bool parse_us_to_ns(std::string_view text, int64_t* out_ns);

}  // namespace gpuacct
