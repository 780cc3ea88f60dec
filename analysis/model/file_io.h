// Files in and out, in one place: what the CLI and the injected library read and write.
//
// Inputs: check_input_file() says what a path that is not a regular file is (a directory, a
// named pipe, a device, a symbolic-link loop...) instead of calling everything "no such file".
//
// Outputs: OutputFile writes a file so that a reader never sees a partial one under its final
// name, and so that nothing outside the output is replaced.  What is already at the name is
// treated by the OutputPolicy, which says who chose the name:
//
// kUserPath (a path the user gave, `-o PATH`: the CLI):
//   - a new or regular file is written to "<target>.tmp.<pid>" beside it and renamed over it on
//     commit(); a write that failed (disk full, quota, I/O error) leaves the file as it was and
//     the temporary one removed;
//   - a symbolic link is followed: the file it points to is replaced, the link stays;
//   - an existing character device or named pipe (/dev/null, /dev/stdout, a FIFO) is written
//     directly: it is never renamed over (that would replace /dev/null with a regular file);
//   - a directory, block device, socket, dangling link or link loop is refused with a message
//     that says what the path is.
// kOwnFilesOnly (the injected library's own outputs, whose names -- host, pid, rank -- anyone
// can predict, in GPUACCT_OUTPUT_DIR, which may be a sticky world-writable directory: a shared
// /tmp or scratch dir; with the kernel's fs.protected_symlinks off nothing else stops a link
// planted there from redirecting a root job's write):
//   - nothing at the name is followed or written into unless this user made it: a symbolic
//     link, anything but a regular file, a file another user owns, or a file with other hard
//     links is left as it is, and the output goes to a fresh name beside it instead --
//     "<stem>-N<ext>", N = 1, 2, ..., where <ext> is the name's trailing run of ".letters"
//     parts (report.json -> report-1.json, x.steps.jsonl -> x-1.steps.jsonl); note() says so
//     in one line, for the caller to print;
//   - every name is opened relative to the directory, opened once (openat, fstatat, renameat),
//     temporary files with O_CREAT | O_EXCL | O_NOFOLLOW, and the rename never follows a link
//     at its destination: a link planted after the check is replaced, not followed.
// Every write is checked; the first failure sticks (later writes fail with the same message).
// The writes use write(2) directly (no stdio buffering to hide an error until fclose).
#pragma once

#include <fcntl.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "analysis/model/status.h"

namespace gpuacct {

// Ok if `path` names (after symbolic links) a readable regular file; otherwise an error that
// starts with the path and says what it is: "x: no such file", "x: is a directory", "x: is a
// named pipe (FIFO), not a regular file", "x: symbolic link loop", "x: permission denied"...
Status check_input_file(const std::string& path);

// Who chose an output's name (see the file comment).  The one place the policy is written;
// the CLI's outputs are named by the user (the default), the library's own are not.
enum class OutputPolicy : uint8_t {
  kUserPath,      // links followed, devices and pipes written in place
  kOwnFilesOnly,  // never through a link or into another user's file: a fresh name instead
};

class OutputFile {
 public:
  OutputFile() = default;
  ~OutputFile();  // abandon()s a file that was not committed
  OutputFile(const OutputFile&) = delete;
  OutputFile& operator=(const OutputFile&) = delete;

  Status open(const std::string& path, OutputPolicy policy = OutputPolicy::kUserPath);
  // Buffered; errors surface here or at commit().  After a failure every call fails.
  Status write(const void* data, size_t bytes);
  Status write(std::string_view text) { return write(text.data(), text.size()); }
  // Hands what is buffered to the kernel (write(2), no fsync): a process killed after it
  // leaves those bytes in the temporary file.
  Status flush();
  // Flushes, closes and gives the file its final name.  On any failure the temporary file is
  // removed and the final name is untouched.
  Status commit();
  // Closes and removes the temporary file (a direct write to a device just stops).
  void abandon();

  bool is_open() const { return fd_ >= 0; }
  // The name the file gets on commit() (for messages; a fresh name under kOwnFilesOnly when
  // the one asked for was not safe) and the file being written now.
  const std::string& path() const { return path_; }
  const std::string& temp_path() const { return temp_path_; }
  // Not empty when the file is not written under the name asked for: why, in one line.
  const std::string& note() const { return note_; }
  uint64_t bytes_written() const { return bytes_written_; }

 private:
  Status open_user_path(const std::string& path);
  Status open_own_file(const std::string& path);
  Status open_temp(bool keep_mode, unsigned mode);
  Status flush_buffer();
  Status fail(const std::string& what, int err);
  void close_dir();

  int fd_ = -1;
  int dir_fd_ = AT_FDCWD;  // or the directory kOwnFilesOnly names are relative to
  std::string path_;       // the final name (for messages)
  std::string target_;     // what commit() replaces: after links (kUserPath), or a plain name
  std::string temp_name_;  // the temporary file, relative to dir_fd_; empty for a direct write
  std::string temp_path_;  // the same for messages
  std::string note_;
  std::string buffer_;
  uint64_t bytes_written_ = 0;
  Status error_;  // the first failure
};

// Where an output went, when the policy may choose a fresh name.
struct OutputPlace {
  std::string path;  // the name written
  std::string note;  // why it is not the name asked for (one line), or empty
};

// Opens `path` for writing in place from its start, for a file that is read while it grows
// (the library's step stream): truncated, never renamed.  Under kOwnFilesOnly it is opened
// with O_NOFOLLOW relative to its directory and kept only if it is this user's regular file
// with no other hard link (checked on the open file, before it is truncated); otherwise a fresh
// name, as OutputFile.  Returns the descriptor (O_CLOEXEC), or -1 with errno set; `place` gets
// the name used.  (errno, not a Status: the stream retries a full disk, ENOSPC, later.)
int open_in_place(const std::string& path, OutputPolicy policy, OutputPlace* place);

// write(2) until all `bytes` are out (EINTR and short writes retried); false with errno set
// otherwise.  A write that makes no progress without an error counts as ENOSPC.
bool write_fully(int fd, const void* data, size_t bytes);

// Writes `content` to `path` through an OutputFile; `place` (optional) gets where it went.
Status write_file_atomic(const std::string& path, std::string_view content,
                         OutputPolicy policy = OutputPolicy::kUserPath,
                         OutputPlace* place = nullptr);

}  // namespace gpuacct
