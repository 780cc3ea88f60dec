// Files in and out, in one place: what the CLI and the injected library read and write.
//
// Inputs: check_input_file() says what a path that is not a regular file is (a directory, a
// named pipe, a device, a symbolic-link loop...) instead of calling everything "no such file".
//
// Outputs: OutputFile writes a file so that a reader never sees a partial one under its final
// name, and so that nothing outside the output is replaced:
//   - a new or regular file is written to "<target>.tmp.<pid>" beside it and renamed over it on
//     commit(); a write that failed (disk full, quota, I/O error) leaves the file as it was and
//     the temporary one removed;
//   - a symbolic link is followed: the file it points to is replaced, the link stays;
//   - an existing character device or named pipe (/dev/null, /dev/stdout, a FIFO) is written
//     directly: it is never renamed over (that would replace /dev/null with a regular file);
//   - a directory, block device, socket, dangling link or link loop is refused with a message
//     that says what the path is.
// Every write is checked; the first failure sticks (later writes fail with the same message).
// The writes use write(2) directly (no stdio buffering to hide an error until fclose).
#pragma once

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

class OutputFile {
 public:
  OutputFile() = default;
  ~OutputFile();  // abandon()s a file that was not committed
  OutputFile(const OutputFile&) = delete;
  OutputFile& operator=(const OutputFile&) = delete;

  Status open(const std::string& path);
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
  // The name the file gets on commit() (for messages) and the file being written now.
  const std::string& path() const { return path_; }
  const std::string& temp_path() const { return temp_path_; }
  uint64_t bytes_written() const { return bytes_written_; }

 private:
  Status flush_buffer();
  Status fail(const std::string& what, int err);

  int fd_ = -1;
  std::string path_;       // as given
  std::string target_;     // after symbolic links: what commit() replaces
  std::string temp_path_;  // empty for a direct write
  std::string buffer_;
  uint64_t bytes_written_ = 0;
  Status error_;  // the first failure
};

// write(2) until all `bytes` are out (EINTR and short writes retried); false with errno set
// otherwise.  A write that makes no progress without an error counts as ENOSPC.
bool write_fully(int fd, const void* data, size_t bytes);

// Writes `content` to `path` through an OutputFile.
Status write_file_atomic(const std::string& path, std::string_view content);

}  // namespace gpuacct
