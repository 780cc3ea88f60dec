#include "analysis/import/byte_source.h"

#include <dlfcn.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <vector>

#if GPUACCT_HAVE_ISAL
#include <isa-l/igzip_lib.h>
#endif

#include "analysis/import/prefetch_source.h"

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
  const char* decoder() const override { return "zlib"; }
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

#if GPUACCT_HAVE_ISAL
// ISA-L's inflate, loaded at run time (byte_source.h says why).  The handle is never closed:
// sources may live until exit.
struct IsalApi {
  void (*inflate_init)(inflate_state*) = nullptr;
  void (*inflate_reset)(inflate_state*) = nullptr;
  int (*inflate)(inflate_state*) = nullptr;
  std::string unavailable;  // why not, when not
};

template <typename Fn>
Fn symbol(void* handle, const char* name) {
  void* p = ::dlsym(handle, name);
  Fn fn = nullptr;
  static_assert(sizeof(fn) == sizeof(p));
  std::memcpy(&fn, &p, sizeof(fn));  // POSIX guarantees the conversion; memcpy keeps -Wpedantic quiet
  return fn;
}

const IsalApi& isal_api() {
  static const IsalApi api = [] {
    IsalApi a;
    void* h = ::dlopen("libisal.so.2", RTLD_NOW | RTLD_LOCAL);
    if (h == nullptr) {
      const char* e = ::dlerror();
      a.unavailable = e ? e : "libisal.so.2 cannot be loaded";
      return a;
    }
    a.inflate_init = symbol<void (*)(inflate_state*)>(h, "isal_inflate_init");
    a.inflate_reset = symbol<void (*)(inflate_state*)>(h, "isal_inflate_reset");
    a.inflate = symbol<int (*)(inflate_state*)>(h, "isal_inflate");
    if (!a.inflate_init || !a.inflate_reset || !a.inflate) {
      a = IsalApi();
      a.unavailable = "libisal.so.2 lacks isal_inflate";
    }
    return a;
  }();
  return api;
}

const char* isal_error_text(int code) {
  switch (code) {
    case ISAL_INVALID_BLOCK: return "invalid deflate block";
    case ISAL_INVALID_SYMBOL: return "invalid deflate symbol";
    case ISAL_INVALID_LOOKBACK: return "invalid distance too far back";
    case ISAL_INVALID_WRAPPER: return "invalid gzip header";
    case ISAL_UNSUPPORTED_METHOD: return "unknown compression method";
    case ISAL_INCORRECT_CHECKSUM: return "incorrect data check";
    default: return "ISA-L inflate error";
  }
}

// The same stream as GzipSource (concatenated members, trailing bytes ignored, the same error
// wording) through ISA-L, which checks each member's CRC-32 and length itself.
class IsalGzipSource final : public ByteSource {
 public:
  IsalGzipSource(std::unique_ptr<RawSource> raw, const std::string& prefix)
      : api_(isal_api()), raw_(std::move(raw)), state_(std::make_unique<inflate_state>()) {
    const uint64_t total = raw_->total();
    in_.resize(total > 0 && total < kRawChunk ? std::max<size_t>(static_cast<size_t>(total), 64)
                                              : kRawChunk);
    std::memcpy(in_.data(), prefix.data(), prefix.size());
    start_member();
    state_->next_in = reinterpret_cast<uint8_t*>(in_.data());
    state_->avail_in = static_cast<uint32_t>(prefix.size());
  }
  bool compressed() const override { return true; }
  const char* decoder() const override { return "isa-l"; }
  uint64_t raw_consumed() const override { return raw_->consumed(); }
  uint64_t raw_total() const override { return raw_->total(); }

  Status read(char* dst, size_t n, size_t* got) override {
    *got = 0;
    if (done_ || n == 0) return Status::Ok();
    inflate_state& st = *state_;
    st.next_out = reinterpret_cast<uint8_t*>(dst);
    st.avail_out = static_cast<uint32_t>(std::min<size_t>(n, 1u << 30));
    const uint32_t out_start = st.avail_out;
    while (st.avail_out == out_start) {
      if (st.avail_in == 0 && !raw_eof_) GPUACCT_RETURN_IF_ERROR(refill());
      if (member_ended_) {
        // Another member follows only if the next bytes are a gzip header.
        if (st.avail_in < 2 && !raw_eof_) {
          GPUACCT_RETURN_IF_ERROR(refill());
          continue;
        }
        if (st.avail_in < 2 || st.next_in[0] != 0x1f || st.next_in[1] != 0x8b) {
          done_ = true;  // trailing bytes after the last member are ignored, as gzip(1) does
          break;
        }
        start_member();
        continue;
      }
      const uint32_t in_before = st.avail_in, out_before = st.avail_out;
      const int ret = api_.inflate(&st);
      member_out_ += out_before - st.avail_out;
      if (ret < 0) {
        return Status::Error(std::string("corrupt gzip data at compressed byte offset ") +
                             std::to_string(compressed_offset()) + ": " + isal_error_text(ret));
      }
      if (st.block_state == ISAL_BLOCK_FINISH) {
        member_ended_ = true;
        continue;
      }
      if (st.avail_out != out_before || st.avail_in != in_before) continue;
      if (st.avail_in == 0 && raw_eof_) {
        return Status::Error("truncated gzip stream: input ended at compressed byte offset " +
                             std::to_string(compressed_offset()) + " (after " +
                             std::to_string(member_out_) + " decompressed bytes of this member)");
      }
      if (st.avail_in > 0) {
        return Status::Error("gzip stream makes no progress at compressed byte offset " +
                             std::to_string(compressed_offset()));
      }
    }
    *got = out_start - st.avail_out;
    return Status::Ok();
  }

 private:
  // A fresh inflate state for the next member, on the same input and output buffers (init
  // clears the buffer pointers too).
  void start_member() {
    inflate_state& st = *state_;
    uint8_t* next_in = st.next_in;
    uint8_t* next_out = st.next_out;
    const uint32_t avail_in = st.avail_in, avail_out = st.avail_out;
    api_.inflate_init(&st);
    st.crc_flag = ISAL_GZIP;  // parse the header, verify CRC-32 and ISIZE
    st.next_in = next_in;
    st.avail_in = avail_in;
    st.next_out = next_out;
    st.avail_out = avail_out;
    member_ended_ = false;
    member_out_ = 0;
  }
  uint64_t compressed_offset() const { return raw_->consumed() - state_->avail_in; }
  Status refill() {
    size_t keep = state_->avail_in;
    if (keep > 0) std::memmove(in_.data(), state_->next_in, keep);
    size_t got = 0;
    GPUACCT_RETURN_IF_ERROR(raw_->read(in_.data() + keep, in_.size() - keep, &got));
    if (got == 0) raw_eof_ = true;
    state_->next_in = reinterpret_cast<uint8_t*>(in_.data());
    state_->avail_in = static_cast<uint32_t>(keep + got);
    return Status::Ok();
  }

  const IsalApi& api_;
  std::unique_ptr<RawSource> raw_;
  std::unique_ptr<inflate_state> state_;  // large (tens of KiB): on the heap
  std::vector<char> in_;
  uint64_t member_out_ = 0;
  bool raw_eof_ = false;
  bool member_ended_ = false;
  bool done_ = false;
};
#endif  // GPUACCT_HAVE_ISAL

std::unique_ptr<ByteSource> gzip_source(std::unique_ptr<RawSource> raw, std::string prefix,
                                        GzipDecoder decoder) {
#if GPUACCT_HAVE_ISAL
  if (decoder == GzipDecoder::kFastest && isal_api().inflate != nullptr) {
    return std::make_unique<IsalGzipSource>(std::move(raw), prefix);
  }
#else
  (void)decoder;
#endif
  return std::make_unique<GzipSource>(std::move(raw), std::move(prefix));
}

std::unique_ptr<ByteSource> wrap(std::unique_ptr<RawSource> raw, const ByteSourceOptions& opts,
                                 Status* err) {
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
    const uint64_t total = raw->total();
    auto gz = gzip_source(std::move(raw), std::move(prefix), opts.decoder);
    if (total >= opts.background_min_bytes) return prefetch_source(std::move(gz));
    return gz;
  }
  return std::make_unique<PlainSource>(std::move(raw), std::move(prefix));
}

}  // namespace

StatusOr<std::unique_ptr<ByteSource>> open_byte_source(const std::string& path,
                                                       const ByteSourceOptions& opts) {
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
  auto src =
      wrap(std::make_unique<FdSource>(fd, static_cast<uint64_t>(stt.st_size), path), opts, &err);
  if (!src) return err;
  return src;
}

std::unique_ptr<ByteSource> memory_byte_source(std::string_view data,
                                               const ByteSourceOptions& opts) {
  Status err;
  return wrap(std::make_unique<SpanSource>(data), opts, &err);  // memory reads cannot fail
}

std::string gzip_decoder_description() {
#if GPUACCT_HAVE_ISAL
  const IsalApi& api = isal_api();
  if (api.inflate != nullptr) return "isa-l";
  return "zlib (" + api.unavailable + ")";
#else
  return "zlib (ISA-L not in this build)";
#endif
}

}  // namespace gpuacct
