#include "analysis/recording.h"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <memory>
#include <type_traits>
#include <vector>

#include <nlohmann/json.hpp>

namespace gpuacct {

using nlohmann::json;

namespace {

struct ChunkHeader {
  uint32_t type;
  uint32_t count;
  uint64_t bytes;
};
static_assert(sizeof(ChunkHeader) == 16);

// Upper bound on one chunk: protects the reader from a corrupt length field.
constexpr uint64_t kMaxChunkBytes = 1ull << 30;

json metadata_to_json(const RunMetadata& m) {
  json devs = json::array();
  for (const DeviceInfo& d : m.devices) {
    devs.push_back({{"id", d.id},
                    {"name", d.name},
                    {"sm_count", d.sm_count},
                    {"compute_major", d.compute_major},
                    {"compute_minor", d.compute_minor},
                    {"total_memory", d.total_memory}});
  }
  return {{"source", m.source},
          {"source_path", m.source_path},
          {"hostname", m.hostname},
          {"pid", m.pid},
          {"rank", m.rank},
          {"world_size", m.world_size},
          {"command", m.command},
          {"devices", devs},
          {"gpuacct_version", m.gpuacct_version}};
}

RunMetadata metadata_from_json(const json& j) {
  RunMetadata m;
  m.source = j.value("source", "");
  m.source_path = j.value("source_path", "");
  m.hostname = j.value("hostname", "");
  m.pid = j.value("pid", int64_t{0});
  m.rank = j.value("rank", -1);
  m.world_size = j.value("world_size", 0);
  m.command = j.value("command", "");
  m.gpuacct_version = j.value("gpuacct_version", "");
  for (const json& d : j.value("devices", json::array())) {
    DeviceInfo di;
    di.id = d.value("id", 0);
    di.name = d.value("name", "");
    di.sm_count = d.value("sm_count", 0);
    di.compute_major = d.value("compute_major", 0);
    di.compute_minor = d.value("compute_minor", 0);
    di.total_memory = d.value("total_memory", uint64_t{0});
    m.devices.push_back(di);
  }
  return m;
}

}  // namespace

RecordingWriter::~RecordingWriter() {
  if (file_ != nullptr) {
    std::fclose(file_);
    std::remove((path_ + ".tmp").c_str());
  }
}

Status RecordingWriter::open(const std::string& path) {
  if (file_ != nullptr) return Status::Error("recording already open");
  path_ = path;
  const std::string tmp = path + ".tmp";
  file_ = std::fopen(tmp.c_str(), "wb");
  if (file_ == nullptr) return Status::Error("cannot create " + tmp + ": " + std::strerror(errno));
  const uint32_t header[2] = {kRecordingFormatVersion, 0};
  if (std::fwrite(kRecordingMagic, 1, sizeof kRecordingMagic, file_) != sizeof kRecordingMagic ||
      std::fwrite(header, sizeof header, 1, file_) != 1) {
    return Status::Error("cannot write " + tmp);
  }
  names_written_ = 0;
  return Status::Ok();
}

Status RecordingWriter::write_chunk(ChunkType type, uint32_t count, const void* data,
                                    uint64_t bytes) {
  if (file_ == nullptr) return Status::Error("recording not open");
  const ChunkHeader h{static_cast<uint32_t>(type), count, bytes};
  if (std::fwrite(&h, sizeof h, 1, file_) != 1 ||
      (bytes > 0 && std::fwrite(data, 1, bytes, file_) != bytes)) {
    return Status::Error("write failed on " + path_ + ".tmp: " + std::strerror(errno));
  }
  return Status::Ok();
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
  if (!b.gpu_ops.empty()) {
    GPUACCT_RETURN_IF_ERROR(write_chunk(ChunkType::kGpuOps, static_cast<uint32_t>(b.gpu_ops.size()),
                                        b.gpu_ops.data(), b.gpu_ops.size() * sizeof(GpuOp)));
  }
  if (!b.api_calls.empty()) {
    GPUACCT_RETURN_IF_ERROR(
        write_chunk(ChunkType::kApiCalls, static_cast<uint32_t>(b.api_calls.size()),
                    b.api_calls.data(), b.api_calls.size() * sizeof(HostApiCall)));
  }
  if (!b.ranges.empty()) {
    GPUACCT_RETURN_IF_ERROR(write_chunk(ChunkType::kRanges, static_cast<uint32_t>(b.ranges.size()),
                                        b.ranges.data(), b.ranges.size() * sizeof(HostRange)));
  }
  if (!b.markers.empty()) {
    GPUACCT_RETURN_IF_ERROR(write_chunk(ChunkType::kMarkers,
                                        static_cast<uint32_t>(b.markers.size()), b.markers.data(),
                                        b.markers.size() * sizeof(Marker)));
  }
  return Status::Ok();
}

Status RecordingWriter::write_watermark(TimeNs watermark) {
  return write_chunk(ChunkType::kWatermark, 1, &watermark, sizeof watermark);
}

Status RecordingWriter::write_metadata(const RunMetadata& meta) {
  const std::string text = metadata_to_json(meta).dump();
  return write_chunk(ChunkType::kMetadata, 1, text.data(), text.size());
}

Status RecordingWriter::write_stats(const Stats& stats) {
  json j = json::object();
  for (size_t i = 0; i < kStatCount; ++i) {
    const auto s = static_cast<Stat>(i);
    if (stats.get(s) != 0) j[std::string(stat_info(s).name)] = stats.get(s);
  }
  const std::string text = j.dump();
  return write_chunk(ChunkType::kStats, 1, text.data(), text.size());
}

Status RecordingWriter::close() {
  if (file_ == nullptr) return Status::Error("recording not open");
  Status st = write_chunk(ChunkType::kEnd, 0, nullptr, 0);
  const bool flushed = std::fflush(file_) == 0;
  std::fclose(file_);
  file_ = nullptr;
  const std::string tmp = path_ + ".tmp";
  if (!st.ok() || !flushed) {
    std::remove(tmp.c_str());
    return st.ok() ? Status::Error("flush failed on " + tmp) : st;
  }
  if (std::rename(tmp.c_str(), path_.c_str()) != 0) {
    return Status::Error("cannot rename " + tmp + ": " + std::strerror(errno));
  }
  return Status::Ok();
}

bool looks_like_recording(const std::string& path) {
  std::FILE* f = std::fopen(path.c_str(), "rb");
  if (f == nullptr) return false;
  char magic[8] = {};
  const size_t n = std::fread(magic, 1, sizeof magic, f);
  std::fclose(f);
  return n == sizeof magic && std::memcmp(magic, kRecordingMagic, sizeof magic) == 0;
}

StatusOr<RecordingContents> read_recording(const std::string& path, NameTable& names,
                                           EventSink& sink, Stats& stats) {
  std::unique_ptr<std::FILE, int (*)(std::FILE*)> f(std::fopen(path.c_str(), "rb"), &std::fclose);
  if (!f) return Status::Error("cannot open " + path + ": " + std::strerror(errno));
  char magic[8] = {};
  uint32_t header[2] = {};
  if (std::fread(magic, 1, sizeof magic, f.get()) != sizeof magic ||
      std::memcmp(magic, kRecordingMagic, sizeof magic) != 0) {
    return Status::Error(path + ": not a gpuacct recording (bad magic at byte 0)");
  }
  if (std::fread(header, sizeof header, 1, f.get()) != 1) {
    return Status::Error(path + ": truncated header at byte 8");
  }
  if (header[0] != kRecordingFormatVersion) {
    return Status::Error(path + ": recording format version " + std::to_string(header[0]) +
                         " is not supported (this gpuacct reads version " +
                         std::to_string(kRecordingFormatVersion) + ")");
  }

  RecordingContents out;
  std::vector<NameId> remap{kNoName};  // writer id -> our id
  auto map_name = [&](NameId id) -> NameId {
    if (id == kNoName) return kNoName;
    if (id < remap.size() && remap[id] != kNoName) return remap[id];
    stats.add(Stat::unknown_names);
    return kNoName;
  };
  // The file size bounds every chunk: a corrupt length must not make us allocate it.
  std::error_code size_ec;
  const uint64_t file_size = std::filesystem::file_size(path, size_ec);
  std::vector<char> buf;
  uint64_t offset = 16;
  while (true) {
    ChunkHeader h{};
    const size_t got = std::fread(&h, 1, sizeof h, f.get());
    if (got == 0) break;
    if (got != sizeof h) {
      return Status::Error(path + ": truncated chunk header at byte " + std::to_string(offset));
    }
    const uint64_t left =
        size_ec ? kMaxChunkBytes : file_size - std::min(file_size, offset + sizeof h);
    if (h.bytes <= kMaxChunkBytes && h.bytes > left) {
      return Status::Error(path + ": truncated chunk at byte " + std::to_string(offset) +
                           " (it claims " + std::to_string(h.bytes) + " bytes, " +
                           std::to_string(left) +
                           " are left: the writer was killed or the file was cut)");
    }
    if (h.bytes > kMaxChunkBytes) {
      return Status::Error(path + ": chunk at byte " + std::to_string(offset) + " claims " +
                           std::to_string(h.bytes) + " bytes (corrupt length)");
    }
    buf.resize(h.bytes);
    if (h.bytes > 0 && std::fread(buf.data(), 1, h.bytes, f.get()) != h.bytes) {
      return Status::Error(path + ": truncated chunk at byte " + std::to_string(offset) +
                           " (the writer was killed or the file was cut)");
    }
    auto expect_records = [&](size_t record_size) -> Status {
      if (static_cast<uint64_t>(h.count) * record_size != h.bytes) {
        return Status::Error(path + ": chunk at byte " + std::to_string(offset) +
                             " has a size that does not match its record count");
      }
      return Status::Ok();
    };
    // Decodes the chunk as `count` fixed-size records of type T, remaps their names and hands
    // each to `emit`.
    auto emit_records = [&](auto type, auto emit) -> Status {
      using T = typename decltype(type)::type;
      GPUACCT_RETURN_IF_ERROR(expect_records(sizeof(T)));
      for (uint32_t i = 0; i < h.count; ++i) {
        T e;
        std::memcpy(&e, buf.data() + i * sizeof e, sizeof e);
        e.name = map_name(e.name);
        emit(e);
      }
      out.events += h.count;
      return Status::Ok();
    };
    switch (static_cast<ChunkType>(h.type)) {
      case ChunkType::kNames: {
        size_t pos = 0;
        for (uint32_t i = 0; i < h.count; ++i) {
          uint32_t rec[2];
          if (pos + sizeof rec > buf.size()) {
            return Status::Error(path + ": malformed name chunk at byte " + std::to_string(offset));
          }
          std::memcpy(rec, buf.data() + pos, sizeof rec);
          pos += sizeof rec;
          if (pos + rec[1] > buf.size()) {
            return Status::Error(path + ": malformed name chunk at byte " + std::to_string(offset));
          }
          const NameId ours = names.intern(std::string_view(buf.data() + pos, rec[1]));
          pos += rec[1];
          // Writer ids are dense (0..n): an id far beyond what this file could hold is corrupt,
          // and would otherwise make the remap table huge.
          if (rec[0] >= (1u << 28) || rec[0] > remap.size() + h.count + 1024) {
            return Status::Error(path + ": name id out of range at byte " + std::to_string(offset));
          }
          if (remap.size() <= rec[0]) remap.resize(rec[0] + 1, kNoName);
          remap[rec[0]] = ours;
        }
        break;
      }
      case ChunkType::kGpuOps:
        GPUACCT_RETURN_IF_ERROR(
            emit_records(std::type_identity<GpuOp>{}, [&](const GpuOp& e) { sink.on_gpu_op(e); }));
        break;
      case ChunkType::kApiCalls:
        GPUACCT_RETURN_IF_ERROR(emit_records(std::type_identity<HostApiCall>{},
                                             [&](const HostApiCall& e) { sink.on_api_call(e); }));
        break;
      case ChunkType::kRanges:
        GPUACCT_RETURN_IF_ERROR(emit_records(std::type_identity<HostRange>{},
                                             [&](const HostRange& e) { sink.on_range(e); }));
        break;
      case ChunkType::kMarkers:
        GPUACCT_RETURN_IF_ERROR(emit_records(std::type_identity<Marker>{},
                                             [&](const Marker& e) { sink.on_marker(e); }));
        break;
      case ChunkType::kWatermark: {
        GPUACCT_RETURN_IF_ERROR(expect_records(sizeof(TimeNs)));
        TimeNs w;
        std::memcpy(&w, buf.data(), sizeof w);
        sink.on_watermark(w);
        break;
      }
      case ChunkType::kMetadata: {
        const json j = json::parse(buf.begin(), buf.end(), nullptr, /*allow_exceptions=*/false);
        if (!j.is_object()) {
          return Status::Error(path + ": malformed metadata at byte " + std::to_string(offset));
        }
        try {
          out.metadata = metadata_from_json(j);
        } catch (const json::exception&) {
          return Status::Error(path + ": metadata with wrong types at byte " +
                               std::to_string(offset));
        }
        out.has_metadata = true;
        break;
      }
      case ChunkType::kStats: {
        const json j = json::parse(buf.begin(), buf.end(), nullptr, /*allow_exceptions=*/false);
        if (!j.is_object()) {
          return Status::Error(path + ": malformed stats at byte " + std::to_string(offset));
        }
        for (size_t i = 0; i < kStatCount; ++i) {
          const auto s = static_cast<Stat>(i);
          auto it = j.find(std::string(stat_info(s).name));
          // Counters are non-negative; a negative or non-integer value is corrupt and ignored.
          if (it != j.end() && it->is_number_unsigned()) {
            stats.add(s,
                      static_cast<int64_t>(std::min<uint64_t>(it->get<uint64_t>(), INT64_MAX / 4)));
          }
        }
        break;
      }
      case ChunkType::kEnd:
        out.closed_cleanly = true;
        break;
      default:
        break;  // a newer writer's chunk: skip it
    }
    offset += sizeof h + h.bytes;
    if (out.closed_cleanly) break;
  }
  if (!out.closed_cleanly) {
    return Status::Error(path + ": recording ends at byte " + std::to_string(offset) +
                         " without its END chunk (the writer did not finish)");
  }
  return out;
}

}  // namespace gpuacct
