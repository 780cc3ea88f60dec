// How the injected library tells the user something: one line on stderr.
//
// Error style of inject/ (docs/injection.md, "Errors and messages"): the library never stops
// the program and never throws across a C boundary.  A failure is handled where it happens
// (a safe fallback: host ranges only, no stream, no recording, ...), counted when data is lost
// (a kDataLoss stat, analysis/model/stats.h), and said in ONE line through log_line():
//
//   gpuacct: <what happened>; <what the library does instead>
//
// log_line() is the only way inject/ (and, through CollectorHooks::warn, cupti_hooks/) writes
// a message.  It adds the "gpuacct: " prefix and the newline, escapes control bytes (a value
// holding "\n" cannot forge a second line), cuts the message after kMaxLogLineBytes, and hands
// the line to stderr in one write(2) (lines of several threads never interleave).  Values the
// user set are shown with quote_value() (inject/config.h) inside the message.
//
// Two exceptions, both documented where they are:
//   - the terminal summary, several lines rendered by render_terminal_summary, goes through
//     log_block() (unless GPUACCT_QUIET);
//   - async-signal-safe paths (the SIGTERM / SIGINT handler and the watchdog that ends the
//     process after it) write a fixed text with a raw write(2): they may not allocate.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace gpuacct::inject {

inline constexpr size_t kMaxLogLineBytes = 1024;

// "gpuacct: " + message (one line, escaped, bounded) + "\n" on stderr.  Never throws.
void log_line(std::string_view message);

// A block of text (the terminal summary) on stderr as it is, in one write.  Never throws.
void log_block(std::string_view text);

// The line log_line() writes for `message`, without the trailing newline (for tests).
std::string format_log_line(std::string_view message);

}  // namespace gpuacct::inject
