#include "inject/log.h"

#include <errno.h>
#include <unistd.h>

#include "analysis/model/file_io.h"

namespace gpuacct::inject {

std::string format_log_line(std::string_view message) {
  static const char kHex[] = "0123456789abcdef";
  std::string out = "gpuacct: ";
  size_t shown = 0;
  for (const char ch : message) {
    if (shown == kMaxLogLineBytes) {
      out += "... (" + std::to_string(message.size()) + " bytes)";
      break;
    }
    ++shown;
    const auto c = static_cast<unsigned char>(ch);
    if (c == '\n') {
      out += "\\n";
    } else if (c == '\t') {
      out += "\\t";
    } else if (c == '\r') {
      out += "\\r";
    } else if (c < 0x20 || c == 0x7f) {
      out += "\\x";
      out += kHex[c >> 4];
      out += kHex[c & 15];
    } else {
      out += ch;  // printable ASCII and UTF-8 (file names) as they are
    }
  }
  return out;
}

// Both keep errno: a caller may still read it (strerror) after saying something.
void log_line(std::string_view message) {
  const int saved_errno = errno;
  try {
    const std::string line = format_log_line(message) + "\n";
    write_fully(STDERR_FILENO, line.data(), line.size());
  } catch (...) {
    // Out of memory: nothing can be said.
  }
  errno = saved_errno;
}

void log_block(std::string_view text) {
  const int saved_errno = errno;
  write_fully(STDERR_FILENO, text.data(), text.size());
  errno = saved_errno;
}

}  // namespace gpuacct::inject
