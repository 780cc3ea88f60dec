#include "analysis/import/byte_source.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <vector>

namespace gpuacct {
namespace {

constexpr size_t kRawChunk = 1 << 20;

// The raw layer: a file descriptor or a memory span, with a one-time peek for the magic.
class RawSource {
 public:
  virtual ~RawSource() = default;
  virtual Status read(char* dst, size_t n, size_t* got) = 0;
  virtual uint64_t total() const = 0;
  uint64_t consumed() const { return consumed_; }

 protected:
  uint64_t consumed_ = 0;
};

class FdSource final : public RawSource {
 public:
  FdSource(int fd, uint64_t size, std::string path)
      : fd_(fd), size_(size), path_(std::move(path)) {}
  ~FdSource() override { ::close(fd_); }
  Status read(char* dst, size_t n, size_t* got) override {
    for (;;) {
      ssize_t r = ::read(fd_, dst, n);
      if (r < 0) {
        if (errno == EINTR) continue;
        return Status::Error("read error on " + path_ + ": " + std::strerror(errno));
      }
      *got = static_cast<size_t>(r);
      consumed_ += static_cast<uint64_t>(r);
      return Status::Ok();
    }
  }
  uint64_t total() const override { return size_; }

 private:
  int fd_;
  uint64_t size_;
  std::string path_;
};

class SpanSource final : public RawSource {
 public:
  explicit SpanSource(std::string_view data) : data_(data) {}
  Status read(char* dst, size_t n, size_t* got) override {
    size_t k = std::min(n, data_.size() - pos_);
    if (k > 0) std::memcpy(dst, data_.data() + pos_, k);
    pos_ += k;
    consumed_ += k;
    *got = k;
    return Status::Ok();
  }
  uint64_t total() const override { return data_.size(); }

 private:
  std::string_view data_;
  size_t pos_ = 0;
};

// Pass-through: serves the peeked prefix first, then the raw source.
class PlainSource final : public ByteSource {
 public:
  PlainSource(std::unique_ptr<RawSource> raw, std::string prefix)
      : raw_(std::move(raw)), prefix_(std::move(prefix)) {}
  Status read(char* dst, size_t n, size_t* got) override {
    if (prefix_pos_ < prefix_.size()) {
      size_t k = std::min(n, prefix_.size() - prefix_pos_);
      std::memcpy(dst, prefix_.data() + prefix_pos_, k);
      prefix_pos_ += k;
      *got = k;
      return Status::Ok();
    }
    return raw_->read(dst, n, got);
  }
  uint64_t raw_consumed() const override { return raw_->consumed(); }
  uint64_t raw_total() const override { return raw_->total(); }

 private:
  std::unique_ptr<RawSource> raw_;
  std::string prefix_;
  size_t prefix_pos_ = 0;
};

// Streams a gzip file (possibly several concatenated members) through zlib in chunks.
class GzipSource final : public ByteSource {
 public:
  GzipSource(std::unique_ptr<RawSource> raw, std::string prefix) : raw_(std::move(raw)) {
    const uint64_t total = raw_->total();
    in_.resize(total > 0 && total < kRawChunk ? std::max<size_t>(static_cast<size_t>(total), 64)
                                              : kRawChunk);
    std::memcpy(in_.data(), prefix.data(), prefix.size());
    in_len_ = prefix.size();
    std::memset(&zs_, 0, sizeof(zs_));
    init_ok_ = inflateInit2(&zs_, 16 + MAX_WBITS) == Z_OK;
    zs_.next_in = reinterpret_cast<Bytef*>(in_.data());
    zs_.avail_in = static_cast<uInt>(in_len_);
  }
  ~GzipSource() override {
    if (init_ok_) inflateEnd(&zs_);
  }
  bool compressed() const override { return true; }
  uint64_t raw_consumed() const override { return raw_->consumed(); }
  uint64_t raw_total() const override { return raw_->total(); }

  Status read(char* dst, size_t n, size_t* got) override {
    *got = 0;
    if (!init_ok_) return Status::Error("zlib initialisation failed");
    if (done_ || n == 0) return Status::Ok();
    zs_.next_out = reinterpret_cast<Bytef*>(dst);
    zs_.avail_out = static_cast<uInt>(std::min<size_t>(n, 1u << 30));
    const uInt out_start = zs_.avail_out;
    while (zs_.avail_out == out_start) {
      if (zs_.avail_in == 0 && !raw_eof_) GPUACCT_RETURN_IF_ERROR(refill());
      if (member_ended_) {
        // Another member follows only if the next bytes are a gzip header.
        if (zs_.avail_in == 0 && raw_eof_) {
          done_ = true;
          break;
        }
        if (zs_.avail_in < 2 && !raw_eof_) {
          GPUACCT_RETURN_IF_ERROR(refill());
          continue;
        }
        if (zs_.avail_in < 2 || zs_.next_in[0] != 0x1f || zs_.next_in[1] != 0x8b) {
          done_ = true;  // trailing bytes after the last member are ignored, as gzip(1) does
          break;
        }
        inflateReset(&zs_);
        member_ended_ = false;
      }
      const uInt avail_before = zs_.avail_in;
      int ret = inflate(&zs_, Z_NO_FLUSH);
      if (ret == Z_STREAM_END) {
        member_ended_ = true;
        continue;
      }
      if (ret == Z_OK) continue;
      if (ret == Z_BUF_ERROR) {
        if (zs_.avail_in == 0 && raw_eof_) {
          return Status::Error("truncated gzip stream: input ended at compressed byte offset " +
                               std::to_string(compressed_offset()) + " (after " +
                               std::to_string(zs_.total_out) +
                               " decompressed bytes of this member)");
        }
        if (zs_.avail_in == avail_before && zs_.avail_in > 0) {
          return Status::Error("gzip stream makes no progress at compressed byte offset " +
                               std::to_string(compressed_offset()));
        }
        continue;
      }
      return Status::Error(std::string("corrupt gzip data at compressed byte offset ") +
                           std::to_string(compressed_offset()) + ": " +
                           (zs_.msg ? zs_.msg : "zlib error " + std::to_string(ret)));
    }
    *got = out_start - zs_.avail_out;
    return Status::Ok();
  }

 private:
  uint64_t compressed_offset() const { return raw_->consumed() - zs_.avail_in; }
  Status refill() {
    // Keep unconsumed input (only ever a few bytes when called with avail_in > 0).
    size_t keep = zs_.avail_in;
    if (keep > 0) std::memmove(in_.data(), zs_.next_in, keep);
    size_t got = 0;
    GPUACCT_RETURN_IF_ERROR(raw_->read(in_.data() + keep, in_.size() - keep, &got));
    if (got == 0) raw_eof_ = true;
    zs_.next_in = reinterpret_cast<Bytef*>(in_.data());
    zs_.avail_in = static_cast<uInt>(keep + got);
    return Status::Ok();
  }

  std::unique_ptr<RawSource> raw_;
  std::vector<char> in_;
  size_t in_len_ = 0;
  z_stream zs_;
  bool init_ok_ = false;
  bool raw_eof_ = false;
  bool member_ended_ = false;
  bool done_ = false;
};

std::unique_ptr<ByteSource> wrap(std::unique_ptr<RawSource> raw, Status* err) {
  // Peek the first two bytes for the gzip magic.
  std::string prefix(2, '\0');
  size_t have = 0;
  while (have < 2) {
    size_t got = 0;
    Status st = raw->read(prefix.data() + have, 2 - have, &got);
    if (!st.ok()) {
      *err = st;
      return nullptr;
    }
    if (got == 0) break;
    have += got;
  }
  prefix.resize(have);
  if (have == 2 && static_cast<unsigned char>(prefix[0]) == 0x1f &&
      static_cast<unsigned char>(prefix[1]) == 0x8b) {
    return std::make_unique<GzipSource>(std::move(raw), std::move(prefix));
  }
  return std::make_unique<PlainSource>(std::move(raw), std::move(prefix));
}

}  // namespace

StatusOr<std::unique_ptr<ByteSource>> open_byte_source(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return Status::Error("cannot open " + path + ": " + std::strerror(errno));
  struct stat stt {};
  if (::fstat(fd, &stt) != 0) {
    int e = errno;
    ::close(fd);
    return Status::Error("cannot stat " + path + ": " + std::strerror(e));
  }
  if (S_ISDIR(stt.st_mode)) {
    ::close(fd);
    return Status::Error(path + " is a directory, not a trace file");
  }
#ifdef POSIX_FADV_SEQUENTIAL
  (void)::posix_fadvise(fd, 0, 0, POSIX_FADV_SEQUENTIAL);
#endif
  Status err;
  auto src = wrap(std::make_unique<FdSource>(fd, static_cast<uint64_t>(stt.st_size), path), &err);
  if (!src) return err;
  return src;
}

std::unique_ptr<ByteSource> memory_byte_source(std::string_view data) {
  Status err;
  return wrap(std::make_unique<SpanSource>(data), &err);  // memory reads cannot fail
}

}  // namespace gpuacct
