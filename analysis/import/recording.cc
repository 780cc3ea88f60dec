#include "analysis/import/recording.h"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstring>
#include <limits>
#include <memory>
#include <type_traits>
#include <vector>

#include <nlohmann/json.hpp>

#include "analysis/import/crc32c.h"
#include "analysis/model/json_text.h"

namespace gpuacct {

using nlohmann::json;

namespace {

// The first 16 bytes of every chunk header (both versions); version 2 follows them with
// ChunkCheck.
struct ChunkHeader {
  uint32_t type;
  uint32_t count;
  uint64_t bytes;
};
static_assert(sizeof(ChunkHeader) == 16);
struct ChunkCheck {
  uint32_t crc32c;    // of the ChunkHeader bytes, then the payload
  uint32_t reserved;  // 0
};
static_assert(sizeof(ChunkCheck) == 8);

// Upper bound on one chunk: protects the reader from a corrupt length field.
constexpr uint64_t kMaxChunkBytes = 1ull << 30;

// Reads the integer `key` of `j` into `out` when present.  Only a JSON integer that fits T is
// taken: 1e300 or 2^40 for an int is an error, not a cast (undefined behaviour).
template <typename T>
Status integer_field(const json& j, const char* key, T& out) {
  const auto it = j.find(key);
  if (it == j.end() || it->is_null()) return Status::Ok();
  bool fits = false;
  if (it->is_number_unsigned()) {
    fits = it->get<uint64_t>() <= static_cast<uint64_t>(std::numeric_limits<T>::max());
  } else if (it->is_number_integer()) {
    const int64_t v = it->get<int64_t>();
    fits =
        v >= static_cast<int64_t>(std::numeric_limits<T>::min()) &&
        (v < 0 || static_cast<uint64_t>(v) <= static_cast<uint64_t>(std::numeric_limits<T>::max()));
  }
  if (!fits)
    return Status::Error(std::string("metadata field '") + key + "' is not an integer in range");
  out = it->get<T>();
  return Status::Ok();
}

// Reads the string `key` of `j` into `out` when present; another type is an error naming it.
Status string_field(const json& j, const char* key, std::string& out) {
  const auto it = j.find(key);
  if (it == j.end() || it->is_null()) return Status::Ok();
  if (!it->is_string())
    return Status::Error(std::string("metadata field '") + key + "' is not a string");
  out = it->get<std::string>();
  return Status::Ok();
}

// A device's compute capability: "9.0" (run_metadata_to_json) or, in recordings written
// before that one writer, compute_major / compute_minor.
Status compute_capability(const json& d, DeviceInfo& di) {
  const auto cc = d.find("compute_capability");
  if (cc == d.end()) {
    GPUACCT_RETURN_IF_ERROR(integer_field(d, "compute_major", di.compute_major));
    return integer_field(d, "compute_minor", di.compute_minor);
  }
  // "MAJOR.MINOR", two decimal ints (from_chars: no overflow, no locale).
  std::string_view text;
  if (cc->is_string()) text = cc->get_ref<const std::string&>();
  const size_t dot = text.find('.');
  int major = 0;
  int minor = 0;
  const auto parse = [](std::string_view part, int& v) {
    const auto r = std::from_chars(part.data(), part.data() + part.size(), v);
    return !part.empty() && r.ec == std::errc() && r.ptr == part.data() + part.size();
  };
  if (dot == std::string_view::npos || !parse(text.substr(0, dot), major) ||
      !parse(text.substr(dot + 1), minor))
    return Status::Error("metadata field 'compute_capability' is not \"MAJOR.MINOR\"");
  di.compute_major = major;
  di.compute_minor = minor;
  return Status::Ok();
}

// Every field type-checked: an error names the field.
Status metadata_from_json(const json& j, RunMetadata& m) {
  GPUACCT_RETURN_IF_ERROR(string_field(j, "source", m.source));
  GPUACCT_RETURN_IF_ERROR(string_field(j, "source_path", m.source_path));
  GPUACCT_RETURN_IF_ERROR(string_field(j, "hostname", m.hostname));
  GPUACCT_RETURN_IF_ERROR(string_field(j, "command", m.command));
  GPUACCT_RETURN_IF_ERROR(string_field(j, "job_id", m.job_id));  // absent before job ids
  GPUACCT_RETURN_IF_ERROR(string_field(j, "gpuacct_version", m.gpuacct_version));
  GPUACCT_RETURN_IF_ERROR(integer_field(j, "pid", m.pid));
  GPUACCT_RETURN_IF_ERROR(integer_field(j, "rank", m.rank));
  GPUACCT_RETURN_IF_ERROR(integer_field(j, "world_size", m.world_size));
  const auto detection = j.find("step_detection");
  if (detection != j.end()) {
    if (!detection->is_object())
      return Status::Error("metadata field 'step_detection' is not an object");
    m.step_detection = dump_json(*detection);
  }
  const auto settings = j.find("accounting");  // absent in older recordings: the defaults
  if (settings != j.end()) {
    if (!settings->is_object())
      return Status::Error("metadata field 'accounting' is not an object");
    for (auto it = settings->begin(); it != settings->end(); ++it) {
      int64_t value = 0;
      if (it->is_null() || !integer_field(*settings, it.key().c_str(), value).ok())
        return Status::Error("metadata field 'accounting." + json_safe_utf8(it.key()) +
                             "' is not an integer in range");
      m.accounting.emplace_back(it.key(), value);
    }
  }
  const auto other = j.find("other_accelerator_events");  // absent in older recordings
  if (other != j.end() && other->is_object()) {
    for (auto it = other->begin(); it != other->end(); ++it) {
      if (it->is_number_integer())
        m.other_accelerator_events.emplace_back(it.key(), it->get<int64_t>());
    }
  }
  const auto devices = j.find("devices");
  if (devices == j.end()) return Status::Ok();
  if (!devices->is_array()) return Status::Error("metadata field 'devices' is not an array");
  for (const json& d : *devices) {
    if (!d.is_object()) return Status::Error("metadata device is not an object");
    DeviceInfo di;
    GPUACCT_RETURN_IF_ERROR(string_field(d, "name", di.name));
    GPUACCT_RETURN_IF_ERROR(integer_field(d, "id", di.id));
    GPUACCT_RETURN_IF_ERROR(integer_field(d, "sm_count", di.sm_count));
    GPUACCT_RETURN_IF_ERROR(compute_capability(d, di));
    GPUACCT_RETURN_IF_ERROR(integer_field(d, "total_memory", di.total_memory));
    m.devices.push_back(di);
  }
  return Status::Ok();
}

}  // namespace

// ---- writer ---------------------------------------------------------------------------------

Status RecordingWriter::open(const std::string& path, OutputPolicy policy) {
  if (file_.is_open()) return Status::Error("recording already open");
  GPUACCT_RETURN_IF_ERROR(file_.open(path, policy));
  const uint32_t header[2] = {kRecordingFormatVersion, 0};
  GPUACCT_RETURN_IF_ERROR(file_.write(kRecordingMagic, sizeof kRecordingMagic));
  GPUACCT_RETURN_IF_ERROR(file_.write(header, sizeof header));
  names_written_ = 0;
  return Status::Ok();
}

Status RecordingWriter::write_chunk(ChunkType type, uint32_t count, const void* data,
                                    uint64_t bytes) {
  if (!file_.is_open()) return Status::Error("recording not open");
  const ChunkHeader h{static_cast<uint32_t>(type), count, bytes};
  const uint32_t crc = crc32c(data, bytes, crc32c(&h, sizeof h));
  const ChunkCheck check{crc, 0};
  GPUACCT_RETURN_IF_ERROR(file_.write(&h, sizeof h));
  GPUACCT_RETURN_IF_ERROR(file_.write(&check, sizeof check));
  return bytes > 0 ? file_.write(data, bytes) : Status::Ok();
}

Status RecordingWriter::write_new_names(const NameTable& names) {
  if (names.size() <= names_written_) return Status::Ok();
  std::string payload;
  uint32_t count = 0;
  for (size_t id = names_written_; id < names.size(); ++id) {
    const std::string_view text = names.text(static_cast<NameId>(id));
    const uint32_t rec[2] = {static_cast<uint32_t>(id), static_cast<uint32_t>(text.size())};
    payload.append(reinterpret_cast<const char*>(rec), sizeof rec);
    payload.append(text);
    ++count;
  }
  names_written_ = names.size();
  return write_chunk(ChunkType::kNames, count, payload.data(), payload.size());
}

Status RecordingWriter::write_batch(const EventBatch& b) {
  auto records = [&](ChunkType type, const auto& v) -> Status {
    if (v.empty()) return Status::Ok();
    return write_chunk(type, static_cast<uint32_t>(v.size()), v.data(),
                       v.size() * sizeof(v.front()));
  };
  GPUACCT_RETURN_IF_ERROR(records(ChunkType::kGpuOps, b.gpu_ops));
  GPUACCT_RETURN_IF_ERROR(records(ChunkType::kApiCalls, b.api_calls));
  GPUACCT_RETURN_IF_ERROR(records(ChunkType::kRanges, b.ranges));
  GPUACCT_RETURN_IF_ERROR(records(ChunkType::kMarkers, b.markers));
  return records(ChunkType::kCounterSamples, b.counter_samples);
}

Status RecordingWriter::write_watermark(TimeNs watermark) {
  GPUACCT_RETURN_IF_ERROR(write_chunk(ChunkType::kWatermark, 1, &watermark, sizeof watermark));
  return file_.flush();
}

Status RecordingWriter::write_metadata(const RunMetadata& meta) {
  const std::string text = dump_json(run_metadata_to_json(meta));
  return write_chunk(ChunkType::kMetadata, 1, text.data(), text.size());
}

Status RecordingWriter::write_stats(const Stats& stats) {
  json j = json::object();
  for (size_t i = 0; i < kStatCount; ++i) {
    const auto s = static_cast<Stat>(i);
    if (stat_info(s).origin != StatOrigin::kCollection) continue;  // a re-analysis counts those
    if (stats.get(s) != 0) j[std::string(stat_info(s).name)] = stats.get(s);
  }
  const std::string text = dump_json(j);
  return write_chunk(ChunkType::kStats, 1, text.data(), text.size());
}

Status RecordingWriter::close() {
  if (!file_.is_open()) return Status::Error("recording not open");
  const Status st = write_chunk(ChunkType::kEnd, 0, nullptr, 0);
  if (!st.ok()) {
    file_.abandon();
    return st;
  }
  return file_.commit();
}

bool looks_like_recording(const std::string& path) {
  std::FILE* f = std::fopen(path.c_str(), "rb");
  if (f == nullptr) return false;
  char magic[8] = {};
  const size_t n = std::fread(magic, 1, sizeof magic, f);
  std::fclose(f);
  return n == sizeof magic && std::memcmp(magic, kRecordingMagic, sizeof magic) == 0;
}

// ---- reader ---------------------------------------------------------------------------------

namespace {

// Where the bytes come from: a file (streamed: recordings can be larger than memory) or a
// buffer (the fuzzer).  `size` bounds every chunk length before anything is allocated.
class Input {
 public:
  virtual ~Input() = default;
  // Reads up to `n` bytes; fewer only at the end of the data.
  virtual size_t read(void* dst, size_t n) = 0;
  // Reads the last `n` bytes (n <= size) without moving the read position.
  virtual bool read_tail(void* dst, size_t n) = 0;
  // Moves the read position `n` bytes on (n <= what is left).
  virtual bool skip(uint64_t n) = 0;
  uint64_t size = 0;
};

class FileInput final : public Input {
 public:
  explicit FileInput(std::FILE* f) : f_(f) {
    struct stat st {};
    size = fstat(fileno(f), &st) == 0 ? static_cast<uint64_t>(st.st_size) : 0;
  }
  size_t read(void* dst, size_t n) override { return std::fread(dst, 1, n, f_); }
  bool read_tail(void* dst, size_t n) override {
    const auto at = static_cast<off_t>(size - n);
    return ::pread(fileno(f_), dst, n, at) == static_cast<ssize_t>(n);
  }
  bool skip(uint64_t n) override { return fseeko(f_, static_cast<off_t>(n), SEEK_CUR) == 0; }

 private:
  std::FILE* f_;
};

class MemoryInput final : public Input {
 public:
  explicit MemoryInput(std::string_view data) : data_(data) { size = data.size(); }
  size_t read(void* dst, size_t n) override {
    const size_t k = std::min(n, data_.size() - pos_);
    if (k > 0) std::memcpy(dst, data_.data() + pos_, k);
    pos_ += k;
    return k;
  }
  bool read_tail(void* dst, size_t n) override {
    std::memcpy(dst, data_.data() + data_.size() - n, n);
    return true;
  }
  bool skip(uint64_t n) override {
    pos_ += static_cast<size_t>(n);
    return true;
  }

 private:
  std::string_view data_;
  size_t pos_ = 0;
};

class RecordingReader {
 public:
  RecordingReader(Input& in, const std::string& label, NameTable& names, EventSink& sink,
                  Stats& stats)
      : in_(in), label_(label), names_(names), sink_(sink), stats_(stats) {}
  // Only the metadata chunk is read (and checked); every other payload is skipped unread.
  void metadata_only() { metadata_only_ = true; }

  StatusOr<RecordingContents> run();

 private:
  Status error(const std::string& what) const {
    return Status::Error(label_ + ": " + what + " at byte " + std::to_string(offset_));
  }
  Status read_file_header();
  bool ends_with_end_chunk() const;
  // Reads the next chunk into h_ / payload_; *more = false at the end of the data, and when a
  // file its writer did not finish ends inside this chunk (then out_.cut is set).
  Status next_chunk(bool* more);
  Status cut_here();
  Status decode_chunk();
  Status decode_names();
  Status decode_json(json& out, const char* what);
  Status decode_stats();
  Status expect_records(size_t record_size) const;
  template <typename T, typename Emit>
  Status decode_records(Emit emit);
  NameId map_name(NameId id);

  Input& in_;
  const std::string& label_;
  NameTable& names_;
  EventSink& sink_;
  Stats& stats_;
  uint32_t version_ = 0;
  bool metadata_only_ = false;
  bool unfinished_ = false;  // no END chunk at the end of the file: the writer was killed
  uint64_t offset_ = 0;      // of the current chunk
  ChunkHeader h_{};
  std::vector<char> payload_;
  std::vector<NameId> remap_{kNoName};  // writer id -> our id
  RecordingContents out_;
};

Status RecordingReader::read_file_header() {
  char magic[8] = {};
  uint32_t header[2] = {};
  if (in_.read(magic, sizeof magic) != sizeof magic ||
      std::memcmp(magic, kRecordingMagic, sizeof magic) != 0) {
    return Status::Error(label_ + ": not a gpuacct recording (bad magic at byte 0)");
  }
  if (in_.read(header, sizeof header) != sizeof header) {
    return Status::Error(label_ + ": truncated header at byte 8");
  }
  version_ = header[0];
  if (version_ < kOldestRecordingFormatVersion || version_ > kRecordingFormatVersion) {
    return Status::Error(label_ + ": recording format version " + std::to_string(version_) +
                         " is not supported (this gpuacct reads versions " +
                         std::to_string(kOldestRecordingFormatVersion) + " to " +
                         std::to_string(kRecordingFormatVersion) + ")");
  }
  offset_ = 16;
  unfinished_ = !ends_with_end_chunk();
  return Status::Ok();
}

// A writer writes END last and only when it closes the file: whether the last bytes are a
// valid END chunk says whether the file was finished (then a chunk cut inside it is
// corruption) or its writer died first (then the cut is where it died).  Version 1 has no
// checksum to tell a real END from 16 bytes of event payload that look like one (a cut file
// often ends in such zeros), and no checksum to catch a corrupt length either: a version-1
// file is always read as possibly cut.
bool RecordingReader::ends_with_end_chunk() const {
  if (version_ < 2) return false;
  const uint64_t n = sizeof(ChunkHeader) + sizeof(ChunkCheck);
  if (in_.size < 16 + n) return false;
  char tail[sizeof(ChunkHeader) + sizeof(ChunkCheck)] = {};
  if (!in_.read_tail(tail, n)) return false;
  ChunkHeader h{};
  ChunkCheck check{};
  std::memcpy(&h, tail, sizeof h);
  std::memcpy(&check, tail + sizeof h, sizeof check);
  return h.type == static_cast<uint32_t>(ChunkType::kEnd) && h.count == 0 && h.bytes == 0 &&
         check.crc32c == crc32c(&h, sizeof h) && check.reserved == 0;
}

// The writer died inside the chunk at offset_: everything before it was read whole.
Status RecordingReader::cut_here() {
  out_.cut = true;
  out_.cut_at_byte = offset_;
  out_.bytes_cut = in_.size - std::min(in_.size, offset_);
  return Status::Ok();
}

Status RecordingReader::next_chunk(bool* more) {
  *more = false;
  const size_t got = in_.read(&h_, sizeof h_);
  if (got == 0) return Status::Ok();
  if (got != sizeof h_) return unfinished_ ? cut_here() : error("truncated chunk header");
  ChunkCheck check{};
  const bool checked = version_ >= 2;
  if (checked && in_.read(&check, sizeof check) != sizeof check) {
    return unfinished_ ? cut_here() : error("truncated chunk header");
  }
  const uint64_t header_bytes = sizeof h_ + (checked ? sizeof check : 0);
  const uint64_t left = in_.size - std::min(in_.size, offset_ + header_bytes);
  if (h_.bytes > kMaxChunkBytes) {
    return error("chunk claims " + std::to_string(h_.bytes) + " bytes (corrupt length)");
  }
  if (h_.bytes > left) {
    if (unfinished_) return cut_here();
    return error("truncated chunk (it claims " + std::to_string(h_.bytes) + " bytes, " +
                 std::to_string(left) + " are left, but the file ends with its END chunk: it " +
                 "is corrupt)");
  }
  if (metadata_only_ && h_.type != static_cast<uint32_t>(ChunkType::kMetadata)) {
    payload_.clear();
    *more = in_.skip(h_.bytes);
    return Status::Ok();
  }
  payload_.resize(h_.bytes);
  if (h_.bytes > 0 && in_.read(payload_.data(), h_.bytes) != h_.bytes) {
    if (unfinished_) return cut_here();
    return error("truncated chunk (the file shrank while it was read)");
  }
  *more = true;
  if (checked) {
    const uint32_t crc = crc32c(payload_.data(), payload_.size(), crc32c(&h_, sizeof h_));
    if (crc != check.crc32c || check.reserved != 0) {
      return error("chunk fails its checksum (the file is corrupt)");
    }
  }
  return Status::Ok();
}

NameId RecordingReader::map_name(NameId id) {
  if (id == kNoName) return kNoName;
  if (id < remap_.size() && remap_[id] != kNoName) return remap_[id];
  stats_.add(Stat::unknown_names);
  return kNoName;
}

Status RecordingReader::expect_records(size_t record_size) const {
  if (static_cast<uint64_t>(h_.count) * record_size != h_.bytes) {
    return error("chunk with a size that does not match its record count");
  }
  return Status::Ok();
}

// Decodes the chunk as `count` fixed-size records of type T, remaps their names and hands each
// to `emit`.
template <typename T, typename Emit>
Status RecordingReader::decode_records(Emit emit) {
  GPUACCT_RETURN_IF_ERROR(expect_records(sizeof(T)));
  for (uint32_t i = 0; i < h_.count; ++i) {
    T e;
    std::memcpy(&e, payload_.data() + static_cast<size_t>(i) * sizeof e, sizeof e);
    if constexpr (!std::is_same_v<T, CounterSample>) e.name = map_name(e.name);  // no names
    emit(e);
  }
  out_.events += h_.count;
  return Status::Ok();
}

Status RecordingReader::decode_names() {
  size_t pos = 0;
  for (uint32_t i = 0; i < h_.count; ++i) {
    uint32_t rec[2];
    if (pos + sizeof rec > payload_.size()) return error("malformed name chunk");
    std::memcpy(rec, payload_.data() + pos, sizeof rec);
    pos += sizeof rec;
    if (rec[1] > payload_.size() - pos) return error("malformed name chunk");
    // Writer ids are dense (0..n): an id far beyond what this file could hold is corrupt, and
    // would otherwise make the remap table huge.
    if (rec[0] >= (1u << 28) || rec[0] > remap_.size() + h_.count + 1024) {
      return error("name id out of range");
    }
    const NameId ours = names_.intern(std::string_view(payload_.data() + pos, rec[1]));
    pos += rec[1];
    if (remap_.size() <= rec[0]) remap_.resize(rec[0] + 1, kNoName);
    remap_[rec[0]] = ours;
  }
  return Status::Ok();
}

Status RecordingReader::decode_json(json& out, const char* what) {
  out = parse_json(std::string_view(payload_.data(), payload_.size()));
  if (!out.is_object()) return error(std::string("malformed ") + what);
  return Status::Ok();
}

Status RecordingReader::decode_stats() {
  json j;
  GPUACCT_RETURN_IF_ERROR(decode_json(j, "stats"));
  for (size_t i = 0; i < kStatCount; ++i) {
    const auto s = static_cast<Stat>(i);
    // Only what the collector alone knew; older recordings also hold the accountant's own
    // counters, which this analysis counts again.
    if (stat_info(s).origin != StatOrigin::kCollection) continue;
    auto it = j.find(std::string(stat_info(s).name));
    // Counters are non-negative; a negative or non-integer value is corrupt and ignored.
    if (it != j.end() && it->is_number_unsigned()) {
      stats_.add(s, static_cast<int64_t>(std::min<uint64_t>(it->get<uint64_t>(), INT64_MAX / 4)));
    }
  }
  return Status::Ok();
}

Status RecordingReader::decode_chunk() {
  if (metadata_only_ && h_.type != static_cast<uint32_t>(ChunkType::kMetadata) &&
      h_.type != static_cast<uint32_t>(ChunkType::kEnd))
    return Status::Ok();
  switch (static_cast<ChunkType>(h_.type)) {
    case ChunkType::kNames:
      return decode_names();
    case ChunkType::kGpuOps:
      return decode_records<GpuOp>([&](const GpuOp& e) { sink_.on_gpu_op(e); });
    case ChunkType::kApiCalls:
      return decode_records<HostApiCall>([&](const HostApiCall& e) { sink_.on_api_call(e); });
    case ChunkType::kRanges:
      return decode_records<HostRange>([&](const HostRange& e) { sink_.on_range(e); });
    case ChunkType::kMarkers:
      return decode_records<Marker>([&](const Marker& e) { sink_.on_marker(e); });
    case ChunkType::kCounterSamples:
      return decode_records<CounterSample>(
          [&](const CounterSample& e) { sink_.on_counter_sample(e); });
    case ChunkType::kWatermark: {
      if (h_.count != 1 || h_.bytes != sizeof(TimeNs)) return error("malformed watermark chunk");
      TimeNs w;
      std::memcpy(&w, payload_.data(), sizeof w);
      out_.last_watermark = w;
      sink_.on_watermark(w);
      return Status::Ok();
    }
    case ChunkType::kMetadata: {
      json j;
      GPUACCT_RETURN_IF_ERROR(decode_json(j, "metadata"));
      RunMetadata meta;
      Status st;
      try {
        st = metadata_from_json(j, meta);
      } catch (const json::exception&) {
        st = Status::Error("metadata with wrong types");
      }
      if (!st.ok()) return error(st.message());
      out_.metadata = std::move(meta);
      out_.has_metadata = true;
      return Status::Ok();
    }
    case ChunkType::kStats:
      return decode_stats();
    case ChunkType::kEnd:
      out_.closed_cleanly = true;
      return Status::Ok();
  }
  return Status::Ok();  // a newer writer's chunk: skip it
}

StatusOr<RecordingContents> RecordingReader::run() {
  GPUACCT_RETURN_IF_ERROR(read_file_header());
  while (!out_.closed_cleanly) {
    bool more = false;
    GPUACCT_RETURN_IF_ERROR(next_chunk(&more));
    if (!more) break;
    GPUACCT_RETURN_IF_ERROR(decode_chunk());
    offset_ += sizeof h_ + (version_ >= 2 ? sizeof(ChunkCheck) : 0) + h_.bytes;
    ++out_.chunks;
  }
  if (!out_.closed_cleanly) {
    // Only a file that does not end with END gets here (a finished one meets its END chunk
    // first): its writer died.  Whatever it had not written is lost, counted.
    if (!out_.cut) GPUACCT_RETURN_IF_ERROR(cut_here());
    stats_.add(Stat::inputs_cut_off);
  }
  return std::move(out_);
}

}  // namespace

StatusOr<RecordingContents> read_recording(const std::string& path, NameTable& names,
                                           EventSink& sink, Stats& stats) {
  std::unique_ptr<std::FILE, int (*)(std::FILE*)> f(std::fopen(path.c_str(), "rb"), &std::fclose);
  if (!f) return Status::Error("cannot open " + path + ": " + std::strerror(errno));
  FileInput in(f.get());
  return RecordingReader(in, path, names, sink, stats).run();
}

StatusOr<RecordingContents> read_recording_buffer(std::string_view data, const std::string& label,
                                                  NameTable& names, EventSink& sink, Stats& stats) {
  MemoryInput in(data);
  return RecordingReader(in, label, names, sink, stats).run();
}

StatusOr<RunMetadata> read_recording_metadata(const std::string& path,
                                              std::optional<std::string_view> bytes) {
  NameTable names;
  TeeSink sink({});  // no sink: no event is decoded
  Stats stats;
  StatusOr<RecordingContents> contents = Status::Error("");
  if (bytes) {
    MemoryInput in(*bytes);
    RecordingReader reader(in, path, names, sink, stats);
    reader.metadata_only();
    contents = reader.run();
  } else {
    std::unique_ptr<std::FILE, int (*)(std::FILE*)> f(std::fopen(path.c_str(), "rb"), &std::fclose);
    if (!f) return Status::Error("cannot open " + path + ": " + std::strerror(errno));
    FileInput in(f.get());
    RecordingReader reader(in, path, names, sink, stats);
    reader.metadata_only();
    contents = reader.run();
  }
  if (!contents.ok()) return contents.status();
  return std::move(contents->metadata);
}

}  // namespace gpuacct
