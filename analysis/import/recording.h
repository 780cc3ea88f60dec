// The on-disk recording: what `gpuacct analyze` reads and the injected library writes when
// GPUACCT_RECORD=1.  Format (docs/recording_format.md), little-endian:
//
//   "GPUACCT\x01" magic (8 bytes) | u32 format_version | u32 reserved
//   then chunks:
//     version 2:  u32 type | u32 count | u64 payload_bytes | u32 crc32c | u32 reserved (0) |
//     payload version 1:  u32 type | u32 count | u64 payload_bytes | payload          (still read)
//   crc32c (analysis/import/crc32c.h) covers the chunk's first 16 header bytes and its payload.
//
//   type 1 NAMES      count x (u32 id, u32 length, bytes)  -- ids of the writer's table
//   type 2 GPU_OPS    count x GpuOp (56 bytes each, events.h layout)
//   type 3 API_CALLS  count x HostApiCall (40 bytes)
//   type 4 RANGES     count x HostRange (40 bytes)
//   type 5 MARKERS    count x Marker (40 bytes)
//   type 6 WATERMARK  count 1: one i64
//   type 7 METADATA   JSON text (RunMetadata)
//   type 8 STATS      JSON object {counter name: value} (by name: robust across versions)
//   type 9 END        empty; a file without it was not closed cleanly
//   type 10 COUNTER_SAMPLES count x CounterSample (64 bytes; docs/counters.md)
//
// Unknown chunk types are skipped (forward compatible).  A chunk whose checksum does not match,
// a truncated or oversized chunk, a record count that does not fit the payload, or metadata
// with values out of range is an error naming its byte offset: the file is rejected, never
// half-read.  One exception, told apart by the file's last bytes: a file that does not end with
// an END chunk was not finished by its writer (killed: SIGKILL, the OOM killer, a time limit),
// and is read up to its last whole chunk (every one still checksummed); what was cut off is
// described in RecordingContents and counted (Stat::inputs_cut_off).  A file that does end with
// END was closed: a chunk cut inside it is corruption, rejected as before (version 2; version 1
// has no checksum to trust an END with, and is always read this way).  The writer writes
// through an OutputFile (analysis/model/file_io.h): the final name appears only when close() has
// written everything, so a reader never sees a half-written recording under it.
#pragma once

#include <cstdint>
#include <cstdio>
#include <optional>
#include <string>
#include <string_view>

#include "analysis/model/event_sink.h"
#include "analysis/model/events.h"
#include "analysis/model/file_io.h"
#include "analysis/model/name_table.h"
#include "analysis/model/run_metadata.h"
#include "analysis/model/stats.h"
#include "analysis/model/status.h"

namespace gpuacct {

inline constexpr char kRecordingMagic[8] = {'G', 'P', 'U', 'A', 'C', 'C', 'T', '\x01'};
inline constexpr uint32_t kRecordingFormatVersion = 2;        // what the writer writes
inline constexpr uint32_t kOldestRecordingFormatVersion = 1;  // the reader reads [1, 2]

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
  kCounterSamples = 10,  // added without a version change: older readers skip it
};

class RecordingWriter {
 public:
  RecordingWriter() = default;
  ~RecordingWriter() = default;  // an unclosed recording is abandoned (OutputFile)
  RecordingWriter(const RecordingWriter&) = delete;
  RecordingWriter& operator=(const RecordingWriter&) = delete;

  // `policy`: who chose the name (analysis/model/file_io.h); the library's own recordings are
  // kOwnFilesOnly, and note() then says when a fresh name was taken.
  Status open(const std::string& path, OutputPolicy policy = OutputPolicy::kUserPath);
  // Writes the names added to `names` since the last call (ids >= the last count).
  Status write_new_names(const NameTable& names);
  Status write_batch(const EventBatch& batch);
  // Also hands everything written so far to the kernel: a writer killed after it leaves a file
  // that holds every event before this watermark (read back as a cut file,
  // docs/recording_format.md).
  Status write_watermark(TimeNs watermark);
  Status write_metadata(const RunMetadata& meta);
  Status write_stats(const Stats& stats);
  // Writes END and gives the file its final name.  After any failed write (every write is
  // checked; the first failure sticks) close() fails and the final name is never created.
  Status close();
  // Stops and removes what was written (nothing appears under the final name).
  void abandon() { file_.abandon(); }
  bool is_open() const { return file_.is_open(); }
  const std::string& path() const { return file_.path(); }
  const std::string& note() const { return file_.note(); }

 private:
  Status write_chunk(ChunkType type, uint32_t count, const void* data, uint64_t bytes);
  OutputFile file_;
  size_t names_written_ = 0;
};

struct RecordingContents {
  RunMetadata metadata;
  bool has_metadata = false;
  bool closed_cleanly = false;  // END chunk seen
  uint64_t events = 0;
  uint64_t chunks = 0;  // whole chunks read
  std::optional<TimeNs> last_watermark;
  // Set for a file its writer did not finish (no END chunk at its end): it was read up to its
  // last whole chunk, which ends at `cut_at_byte`; the `bytes_cut` after it (a chunk the kill
  // cut in two) are lost, and so is everything the writer had not written yet -- the events
  // after the last watermark may be incomplete.
  bool cut = false;
  uint64_t cut_at_byte = 0;
  uint64_t bytes_cut = 0;
};

// Streams a recording into `sink`, re-interning names into `names`.  Counters found in the
// file are merged into `stats`; events with unknown name ids are kept with an empty name and
// counted; a file cut off by its writer's death is read to its last whole chunk and counted
// (`cut` in the result).  On an error the sink may have seen the events before it: callers
// discard them.
StatusOr<RecordingContents> read_recording(const std::string& path, NameTable& names,
                                           EventSink& sink, Stats& stats);
// The same on bytes in memory; `label` stands for the path in messages.
StatusOr<RecordingContents> read_recording_buffer(std::string_view data, const std::string& label,
                                                  NameTable& names, EventSink& sink, Stats& stats);

// Only the run metadata of a recording (the file at `path`, or `bytes` when given; `path` then
// labels it): every other chunk is skipped unread, so this costs a seek per chunk.  What the
// front door needs before the events are read (the run's accounting settings, input.h
// resolve).  A recording without a metadata chunk (a killed writer's) gives an empty one.
StatusOr<RunMetadata> read_recording_metadata(const std::string& path,
                                              std::optional<std::string_view> bytes = {});

// True if the file starts with the recording magic.
bool looks_like_recording(const std::string& path);

}  // namespace gpuacct
