// The on-disk recording: what `gpuacct analyze` reads and the injected library writes when
// GPUACCT_RECORD=1.  Format (docs/recording_format.md, version 1), little-endian:
//
//   "GPUACCT\x01" magic (8 bytes) | u32 format_version | u32 reserved
//   then chunks:  u32 type | u32 count | u64 payload_bytes | payload
//
//   type 1 NAMES      count x (u32 id, u32 length, bytes)  -- ids of the writer's table
//   type 2 GPU_OPS    count x GpuOp (56 bytes each, events.h layout)
//   type 3 API_CALLS  count x HostApiCall (40 bytes)
//   type 4 RANGES     count x HostRange (40 bytes)
//   type 5 MARKERS    count x Marker (40 bytes)
//   type 6 WATERMARK  one i64
//   type 7 METADATA   JSON text (RunMetadata)
//   type 8 STATS      JSON object {counter name: value} (by name: robust across versions)
//   type 9 END        empty; a file without it was not closed cleanly
//
// Unknown chunk types are skipped (forward compatible); a truncated or oversized chunk is an
// error naming its byte offset.  The writer writes to "<path>.tmp" and renames on close, so a
// reader never sees a half-written recording under the final name.
#pragma once

#include <cstdint>
#include <cstdio>
#include <string>

#include "analysis/event_sink.h"
#include "analysis/events.h"
#include "analysis/name_table.h"
#include "analysis/run_metadata.h"
#include "analysis/stats.h"
#include "analysis/status.h"

namespace gpuacct {

inline constexpr char kRecordingMagic[8] = {'G', 'P', 'U', 'A', 'C', 'C', 'T', '\x01'};
inline constexpr uint32_t kRecordingFormatVersion = 1;

enum class ChunkType : uint32_t {
  kNames = 1,
  kGpuOps = 2,
  kApiCalls = 3,
  kRanges = 4,
  kMarkers = 5,
  kWatermark = 6,
  kMetadata = 7,
  kStats = 8,
  kEnd = 9,
};

class RecordingWriter {
 public:
  RecordingWriter() = default;
  ~RecordingWriter();  // abandons (deletes the .tmp) if close() was not called
  RecordingWriter(const RecordingWriter&) = delete;
  RecordingWriter& operator=(const RecordingWriter&) = delete;

  Status open(const std::string& path);
  // Writes the names added to `names` since the last call (ids >= the last count).
  Status write_new_names(const NameTable& names);
  Status write_batch(const EventBatch& batch);
  Status write_watermark(TimeNs watermark);
  Status write_metadata(const RunMetadata& meta);
  Status write_stats(const Stats& stats);
  // Writes END, flushes, renames <path>.tmp to <path>.
  Status close();
  bool is_open() const { return file_ != nullptr; }

 private:
  Status write_chunk(ChunkType type, uint32_t count, const void* data, uint64_t bytes);
  std::FILE* file_ = nullptr;
  std::string path_;
  size_t names_written_ = 0;
};

struct RecordingContents {
  RunMetadata metadata;
  bool has_metadata = false;
  bool closed_cleanly = false;  // END chunk seen
  uint64_t events = 0;
};

// Streams a recording into `sink`, re-interning names into `names`.  Counters found in the
// file are merged into `stats`; events with unknown name ids are kept with an empty name and
// counted.
StatusOr<RecordingContents> read_recording(const std::string& path, NameTable& names,
                                           EventSink& sink, Stats& stats);

// True if the file starts with the recording magic.
bool looks_like_recording(const std::string& path);

}  // namespace gpuacct
