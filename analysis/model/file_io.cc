#include "analysis/model/file_io.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>

namespace gpuacct {
namespace {

// Output is gathered into blocks of this size before write(2): large enough that a recording
// costs few system calls, small enough to be nothing next to the data it buffers.
constexpr size_t kBufferBytes = 1 << 16;

// What a path that is not a regular file is, for messages ("is a directory").
const char* kind_of(mode_t mode) {
  if (S_ISDIR(mode)) return "is a directory";
  if (S_ISFIFO(mode)) return "is a named pipe (FIFO)";
  if (S_ISCHR(mode)) return "is a character device";
  if (S_ISBLK(mode)) return "is a block device";
  if (S_ISSOCK(mode)) return "is a socket";
  return "is not a regular file";
}

// The reason stat(2) failed on `path`, phrased for a person.
std::string stat_failure(const std::string& path, int err) {
  switch (err) {
    case ENOENT: {
      struct stat link {};
      if (::lstat(path.c_str(), &link) == 0 && S_ISLNK(link.st_mode)) {
        return "is a symbolic link to a missing file";
      }
      return "no such file";
    }
    case ELOOP:
      return "symbolic link loop (too many levels of symbolic links)";
    case ENOTDIR:
      return "no such file (a part of the path is not a directory)";
    case EACCES:
      return "permission denied";
    default:
      return std::strerror(err);
  }
}

}  // namespace

bool write_fully(int fd, const void* data, size_t bytes) {
  const char* p = static_cast<const char*>(data);
  while (bytes > 0) {
    const ssize_t n = ::write(fd, p, bytes);
    if (n < 0) {
      if (errno == EINTR) continue;
      return false;
    }
    if (n == 0) {
      errno = ENOSPC;
      return false;
    }
    p += n;
    bytes -= static_cast<size_t>(n);
  }
  return true;
}

Status check_input_file(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return Status::Error(path + ": " + stat_failure(path, errno));
  if (!S_ISREG(st.st_mode)) {
    return Status::Error(path + ": " + kind_of(st.st_mode) + ", not a regular file");
  }
  if (::access(path.c_str(), R_OK) != 0) return Status::Error(path + ": permission denied");
  return Status::Ok();
}

OutputFile::~OutputFile() {
  abandon();
}

Status OutputFile::fail(const std::string& what, int err) {
  error_ = Status::Error(what + ": " + std::strerror(err));
  return error_;
}

Status OutputFile::open(const std::string& path) {
  if (fd_ >= 0) return Status::Error("cannot write " + path + ": another output is open");
  path_ = path;
  target_ = path;
  temp_path_.clear();
  buffer_.clear();
  bytes_written_ = 0;
  error_ = Status::Ok();
  const std::string cannot = "cannot write " + path + ": ";

  struct stat link {};
  bool keep_mode = false;
  mode_t mode = 0;
  if (::lstat(path.c_str(), &link) == 0) {
    struct stat st {};
    if (::stat(path.c_str(), &st) != 0)
      return error_ = Status::Error(cannot + stat_failure(path, errno));
    if (S_ISCHR(st.st_mode) || S_ISFIFO(st.st_mode)) {
      // Written in place.  O_NONBLOCK only for the open: a FIFO nobody reads fails (ENXIO)
      // instead of blocking the caller (the library must never hang the job).
      fd_ = ::open(path.c_str(), O_WRONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
      if (fd_ < 0) {
        const int err = errno;
        return error_ =
                   Status::Error(cannot + (err == ENXIO ? std::string("a named pipe nobody reads")
                                                        : std::string(std::strerror(err))));
      }
      const int flags = ::fcntl(fd_, F_GETFL);
      if (flags >= 0) ::fcntl(fd_, F_SETFL, flags & ~O_NONBLOCK);
      return Status::Ok();
    }
    if (!S_ISREG(st.st_mode)) {
      return error_ = Status::Error(cannot + kind_of(st.st_mode) +
                                    " (gpuacct writes regular files, character devices and pipes)");
    }
    if (S_ISLNK(link.st_mode)) {
      // Replace what the link points to; the link itself stays.
      char* real = ::realpath(path.c_str(), nullptr);
      if (real == nullptr) return fail(cannot + "cannot resolve the symbolic link", errno);
      target_ = real;
      std::free(real);
    }
    keep_mode = true;
    mode = st.st_mode & 07777;
  } else if (errno != ENOENT) {
    return fail("cannot write " + path, errno);
  }

  temp_path_ = target_ + ".tmp." + std::to_string(::getpid());
  for (int attempt = 0; attempt < 2; ++attempt) {
    // O_EXCL | O_NOFOLLOW: never write through something already at the temporary name.
    fd_ = ::open(temp_path_.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0666);
    if (fd_ >= 0 || errno != EEXIST) break;
    ::unlink(temp_path_.c_str());  // left by an earlier process with the same pid
  }
  if (fd_ < 0) {
    const int err = errno;
    temp_path_.clear();
    return fail("cannot write " + path, err);
  }
  if (keep_mode) (void)::fchmod(fd_, mode);  // the replaced file keeps its permissions
  return Status::Ok();
}

Status OutputFile::flush_buffer() {
  if (buffer_.empty()) return Status::Ok();
  if (!write_fully(fd_, buffer_.data(), buffer_.size())) {
    return fail("cannot write " + path_, errno);
  }
  bytes_written_ += buffer_.size();
  buffer_.clear();
  return Status::Ok();
}

Status OutputFile::flush() {
  if (!error_.ok()) return error_;
  if (fd_ < 0) return Status::Error("cannot write " + path_ + ": not open");
  return flush_buffer();
}

Status OutputFile::write(const void* data, size_t bytes) {
  if (!error_.ok()) return error_;
  if (fd_ < 0) return Status::Error("cannot write " + path_ + ": not open");
  const char* p = static_cast<const char*>(data);
  if (buffer_.size() + bytes < kBufferBytes) {
    buffer_.append(p, bytes);
    return Status::Ok();
  }
  GPUACCT_RETURN_IF_ERROR(flush_buffer());
  if (bytes >= kBufferBytes) {  // large blocks go straight out, without a copy
    if (!write_fully(fd_, p, bytes)) {
      return fail("cannot write " + path_, errno);
    }
    bytes_written_ += bytes;
    return Status::Ok();
  }
  buffer_.append(p, bytes);
  return Status::Ok();
}

Status OutputFile::commit() {
  if (fd_ < 0) return error_.ok() ? Status::Error("cannot write " + path_ + ": not open") : error_;
  Status st = error_.ok() ? flush_buffer() : error_;
  const int fd = fd_;
  fd_ = -1;
  if (::close(fd) != 0 && st.ok()) st = fail("cannot write " + path_, errno);
  if (!st.ok()) {
    if (!temp_path_.empty()) ::unlink(temp_path_.c_str());
    temp_path_.clear();
    return st;
  }
  if (!temp_path_.empty()) {
    if (std::rename(temp_path_.c_str(), target_.c_str()) != 0) {
      const int err = errno;
      ::unlink(temp_path_.c_str());
      const std::string what = "cannot rename " + temp_path_ + " to " + target_;
      temp_path_.clear();
      return fail(what, err);
    }
    temp_path_.clear();
  }
  return Status::Ok();
}

void OutputFile::abandon() {
  if (fd_ >= 0) {
    ::close(fd_);
    fd_ = -1;
  }
  if (!temp_path_.empty()) {
    ::unlink(temp_path_.c_str());
    temp_path_.clear();
  }
  buffer_.clear();
}

Status write_file_atomic(const std::string& path, std::string_view content) {
  OutputFile out;
  GPUACCT_RETURN_IF_ERROR(out.open(path));
  GPUACCT_RETURN_IF_ERROR(out.write(content));
  return out.commit();
}

}  // namespace gpuacct
