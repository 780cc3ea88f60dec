#include "analysis/model/file_io.h"

#include <fcntl.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
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

// ---- kOwnFilesOnly: names in a directory others may write to --------------------------------

// Tries before giving up on a directory full of planted names.
constexpr int kFreshNames = 100;
// The first fresh names are readable (x-1.json); later ones carry random bits (fresh_name).
constexpr int kPredictableFreshNames = 4;

// "<stem>-N<ext>": <ext> is the trailing run of ".letters" parts, so the fresh name keeps the
// extension readers look for (report-1.json, x-1.steps.jsonl, run-1.gpuacct).
std::string fresh_name(const std::string& name, int n) {
  size_t ext = name.size();
  for (;;) {
    const size_t dot = name.rfind('.', ext - 1);
    if (dot == std::string::npos || dot == 0 || dot + 1 == ext) break;
    bool letters = true;
    for (size_t i = dot + 1; i < ext; ++i) {
      const char c = name[i];
      letters = letters && ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'));
    }
    if (!letters) break;
    ext = dot;
  }
  std::string suffix = "-" + std::to_string(n);
  if (n >= kPredictableFreshNames) {
    // Past the first few, a name nobody can plant ahead of time: -N-<64 random bits>.
    uint64_t bits = 0;
    if (::getrandom(&bits, sizeof bits, GRND_NONBLOCK) != static_cast<ssize_t>(sizeof bits)) {
      bits = static_cast<uint64_t>(std::chrono::steady_clock::now().time_since_epoch().count()) ^
             (static_cast<uint64_t>(::getpid()) << 32) ^ static_cast<uint64_t>(n);
    }
    char hex[17];
    std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(bits));
    suffix += std::string("-") + hex;
  }
  return name.substr(0, ext) + suffix + name.substr(ext);
}

// Why an existing file may not be written or replaced by this process's own output; empty when
// it is this user's plain file.  A file with other hard links is not ours alone: writing
// it in place would write the other names' file too.
std::string unsafe_reason(const struct stat& st) {
  if (S_ISLNK(st.st_mode)) return "is a symbolic link";
  if (!S_ISREG(st.st_mode)) return std::string(kind_of(st.st_mode));
  if (st.st_uid != ::geteuid())
    return "is owned by another user (uid " + std::to_string(st.st_uid) + ")";
  if (st.st_nlink > 1) return "has other hard links";
  return "";
}

struct SplitPath {
  std::string dir;   // "." when the path has no directory part
  std::string name;  // the last component
};
SplitPath split_path(const std::string& path) {
  const size_t slash = path.rfind('/');
  if (slash == std::string::npos) return {".", path};
  return {slash == 0 ? "/" : path.substr(0, slash), path.substr(slash + 1)};
}
std::string join(const SplitPath& p, const std::string& name) {
  return p.dir == "/" ? "/" + name : p.dir + "/" + name;
}

// The directory of `path`, opened once: every name below is relative to it, so the directory
// cannot be swapped between the checks and the writes.  The components above the last may be
// links (/tmp -> /private/tmp); the last, the one others can plant, never is followed.
int open_dir(const std::string& dir) {
  return ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
}

// Goes through `name` and its fresh names until `try_name` accepts one: it returns "" for a name
// it took, a reason for a name it must leave alone, and sets *err for a failure that no other
// name would fix.  *chosen gets the name taken; *note, when it is not `name`, the line to say.
template <typename Try>
bool choose_name(const SplitPath& where, Try try_name, std::string* chosen, std::string* note,
                 int* err) {
  std::string first_reason;
  for (int n = 0; n < kFreshNames; ++n) {
    const std::string candidate = n == 0 ? where.name : fresh_name(where.name, n);
    *err = 0;
    const std::string reason = try_name(candidate, err);
    if (*err != 0) return false;
    if (reason.empty()) {
      *chosen = candidate;
      if (n > 0) {
        *note = join(where, where.name) + " " + first_reason +
                " (not followed or written: another user may have put it there); writing " +
                join(where, candidate) + " instead";
      }
      return true;
    }
    if (n == 0) first_reason = reason;
  }
  *err = EEXIST;
  return false;
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

void OutputFile::close_dir() {
  if (dir_fd_ >= 0) ::close(dir_fd_);
  dir_fd_ = AT_FDCWD;
}

Status OutputFile::open(const std::string& path, OutputPolicy policy) {
  if (fd_ >= 0) return Status::Error("cannot write " + path + ": another output is open");
  close_dir();
  path_ = path;
  target_ = path;
  temp_name_.clear();
  temp_path_.clear();
  note_.clear();
  buffer_.clear();
  bytes_written_ = 0;
  error_ = Status::Ok();
  return policy == OutputPolicy::kUserPath ? open_user_path(path) : open_own_file(path);
}

Status OutputFile::open_user_path(const std::string& path) {
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
  return open_temp(keep_mode, mode);
}

Status OutputFile::open_own_file(const std::string& path) {
  const SplitPath where = split_path(path);
  dir_fd_ = open_dir(where.dir);
  if (dir_fd_ < 0) {
    const int err = errno;
    dir_fd_ = AT_FDCWD;
    return fail("cannot write " + path, err);
  }
  bool keep_mode = false;
  mode_t mode = 0;
  auto try_name = [&](const std::string& name, int* err) -> std::string {
    struct stat st {};
    if (::fstatat(dir_fd_, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) {
      if (errno != ENOENT) *err = errno;
      keep_mode = false;
      return "";  // free
    }
    const std::string reason = unsafe_reason(st);
    keep_mode = reason.empty();  // our own file: replaced, its permissions kept
    mode = st.st_mode & 07777;
    return reason;
  };
  std::string chosen;
  int err = 0;
  if (!choose_name(where, try_name, &chosen, &note_, &err)) {
    close_dir();
    return fail("cannot write " + path, err);
  }
  target_ = chosen;
  path_ = join(where, chosen);
  return open_temp(keep_mode, mode);
}

// The temporary file beside target_: O_EXCL | O_NOFOLLOW, so nothing already at its name --
// a file, a planted link -- is ever written through.
Status OutputFile::open_temp(bool keep_mode, unsigned mode) {
  const bool relative = dir_fd_ != AT_FDCWD;
  const std::string base = target_ + ".tmp." + std::to_string(::getpid());
  for (int attempt = 0; attempt < 2 * kFreshNames && fd_ < 0; ++attempt) {
    // The first name twice: something left there by an earlier process with the same pid is
    // removed (the link, never what it points to) and the name tried again; then other names.
    temp_name_ = attempt < 2 ? base : base + "." + std::to_string(attempt - 1);
    fd_ = ::openat(dir_fd_, temp_name_.c_str(),
                   O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0666);
    if (fd_ >= 0 || errno != EEXIST) break;
    if (attempt == 0) ::unlinkat(dir_fd_, temp_name_.c_str(), 0);
  }
  if (fd_ < 0) {
    const int err = errno;
    temp_name_.clear();
    close_dir();
    return fail("cannot write " + path_, err);
  }
  temp_path_ = relative ? join(split_path(path_), temp_name_) : temp_name_;
  if (keep_mode) (void)::fchmod(fd_, static_cast<mode_t>(mode));  // the replaced file's permissions
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
    if (!temp_name_.empty()) ::unlinkat(dir_fd_, temp_name_.c_str(), 0);
    temp_name_.clear();
    temp_path_.clear();
    close_dir();
    return st;
  }
  if (!temp_name_.empty()) {
    // rename(2) replaces the name itself: a link that appeared there meanwhile is replaced,
    // never followed.
    if (::renameat(dir_fd_, temp_name_.c_str(), dir_fd_, target_.c_str()) != 0) {
      const int err = errno;
      ::unlinkat(dir_fd_, temp_name_.c_str(), 0);
      const std::string what = "cannot rename " + temp_path_ + " to " + path_;
      temp_name_.clear();
      temp_path_.clear();
      close_dir();
      return fail(what, err);
    }
    temp_name_.clear();
    temp_path_.clear();
  }
  close_dir();
  return Status::Ok();
}

void OutputFile::abandon() {
  if (fd_ >= 0) {
    ::close(fd_);
    fd_ = -1;
  }
  if (!temp_name_.empty()) {
    ::unlinkat(dir_fd_, temp_name_.c_str(), 0);
    temp_name_.clear();
    temp_path_.clear();
  }
  close_dir();
  buffer_.clear();
}

int open_in_place(const std::string& path, OutputPolicy policy, OutputPlace* place) {
  place->path = path;
  place->note.clear();
  if (policy == OutputPolicy::kUserPath) {
    return ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0666);
  }
  const SplitPath where = split_path(path);
  const int dir = open_dir(where.dir);
  if (dir < 0) return -1;
  int fd = -1;
  // Opened without O_TRUNC, checked on the open file, truncated only once it is ours: a
  // planted name is never emptied.  O_NONBLOCK: a planted FIFO must not block the open.
  auto try_name = [&](const std::string& name, int* err) -> std::string {
    fd = ::openat(dir, name.c_str(),
                  O_WRONLY | O_CREAT | O_NOFOLLOW | O_CLOEXEC | O_NOCTTY | O_NONBLOCK, 0666);
    if (fd < 0) {
      const int open_err = errno;
      if (open_err == ELOOP) return "is a symbolic link";
      if (open_err == ENXIO) return "is a named pipe (FIFO)";
      // Something planted there that we may not open (a directory: EISDIR; another user's
      // file in a sticky directory, or fs.protected_regular: EACCES) is left alone like a link:
      // the next fresh name.  Nothing there: a real failure (ENOSPC, EROFS...).
      struct stat there {};
      if (::fstatat(dir, name.c_str(), &there, AT_SYMLINK_NOFOLLOW) == 0) {
        const std::string reason = unsafe_reason(there);
        return reason.empty() ? std::string("cannot be opened (") + std::strerror(open_err) + ")"
                              : reason;
      }
      *err = open_err;
      return "";
    }
    struct stat st {};
    std::string reason = ::fstat(fd, &st) == 0 ? unsafe_reason(st) : std::strerror(errno);
    if (!reason.empty()) {
      ::close(fd);
      fd = -1;
    }
    return reason;
  };
  std::string chosen;
  int err = 0;
  const bool ok = choose_name(where, try_name, &chosen, &place->note, &err);
  ::close(dir);
  if (!ok) {
    errno = err;
    return -1;
  }
  if (::ftruncate(fd, 0) != 0) {
    err = errno;
    ::close(fd);
    errno = err;
    return -1;
  }
  const int flags = ::fcntl(fd, F_GETFL);
  if (flags >= 0) ::fcntl(fd, F_SETFL, flags & ~O_NONBLOCK);
  place->path = join(where, chosen);
  return fd;
}

Status write_file_atomic(const std::string& path, std::string_view content, OutputPolicy policy,
                         OutputPlace* place) {
  OutputFile out;
  GPUACCT_RETURN_IF_ERROR(out.open(path, policy));
  if (place != nullptr) *place = OutputPlace{out.path(), out.note()};
  GPUACCT_RETURN_IF_ERROR(out.write(content));
  return out.commit();
}

}  // namespace gpuacct
