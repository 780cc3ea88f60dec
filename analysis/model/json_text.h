// The one place where bytes from outside become report text.
//
// Every byte string gpuacct did not write itself can hold bytes that are not UTF-8: argv and
// the command line, environment values, the hostname, NVTX and C-API range names, kernel and
// memcpy names from the driver, Python frame names, native symbol and module names, file
// paths.  nlohmann::json::dump() throws on such bytes (and a strict JSON reader rejects them),
// so one Latin-1 file name used to cost the whole report.  What reaches an output goes
// through here:
//
//   - names are made safe where they are interned (NameTable::intern calls json_safe_utf8),
//     so a name reads the same in the report, the step stream, the recording and the timeline;
//   - the run's metadata (command line, hostname, paths, device names) is made safe by its one
//     writer, run_metadata_to_json (analysis/model/run_metadata.h);
//   - every nlohmann::json is serialised by dump_json(), the last line of defence: a string
//     that still holds invalid UTF-8 (a CUPTI or dlopen message, a native symbol or module
//     name, an input path in job.json) is made safe there, so no path from a name to dump()
//     can throw (ctest json_only_through_json_text, model/check_json_text.cmake: no other
//     `.dump(` in the sources);
//   - the timeline writer, which writes JSON by hand, uses append_json_string();
//   - the terminal summary shows strings through terminal_text().
//
// The choice (docs/report_schema.md): valid UTF-8 is kept byte for byte; each byte that is
// not part of a valid sequence (a stray byte, a truncated or overlong sequence, an encoded
// surrogate, a code point above U+10FFFF) is written as the four ASCII characters "\xHH".
// Not U+FFFD: two names that differ only in their invalid bytes stay two names (top kernels,
// interned ids, cross-rank matching do not merge them), and the original bytes can be read
// back from the report.  The one ambiguity: a valid name that itself contains the text
// "\xE9" reads the same as one holding the byte 0xE9.  The result is ASCII-compatible valid
// UTF-8, and json_safe_utf8 of it is itself (idempotent), so text read back from a report or
// a recording and written again does not change.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

namespace gpuacct {

// True when `text` is valid UTF-8 (no overlongs, no surrogates, nothing above U+10FFFF).
bool is_valid_utf8(std::string_view text);

// `text` with every invalid byte spelled "\xHH" (upper-case hex); valid text unchanged.
std::string json_safe_utf8(std::string_view text);

// Appends `text` to `out` as a strict JSON string literal (quotes included): made safe by
// json_safe_utf8, then JSON-escaped (control bytes as \uXXXX).  For writers that build JSON
// by hand (the timeline).
void append_json_string(std::string& out, std::string_view text);

// At most `max_bytes` of `text`, cut before a UTF-8 sequence that would not fit whole, so
// valid text stays valid.
std::string_view utf8_prefix(std::string_view text, size_t max_bytes);

// `text`, which was cut at an arbitrary byte (a name truncated to a fixed size), without the
// incomplete character the cut may have left at its end: a valid name cut stays valid text.
std::string_view utf8_without_cut_character(std::string_view text);

// `text` for a terminal: json_safe_utf8, then every control byte (C0 and DEL; a kernel name
// holding an escape sequence must not drive the terminal) as "\xHH".  One line.
std::string terminal_text(std::string_view text);

// The only serialisation of nlohmann::json in gpuacct (indent as json::dump: -1 = one line).
// Never throws on string contents: strings (and keys) holding invalid UTF-8 are made safe
// with json_safe_utf8 first.  Other failures (out of memory) still throw.
std::string dump_json(const nlohmann::json& j, int indent = -1);

// The only parse of JSON text into nlohmann::json outside the tests (the Kineto importer reads
// traces with its own scanner): one value, no exception -- a discarded value (is_discarded())
// when `text` is not one JSON value.  With `error_byte`, where the parse stopped (nlohmann's
// byte count) when it failed.  One instantiation of nlohmann's parser for the whole tool, not
// one per file: each cost seconds of compile time.
nlohmann::json parse_json(std::string_view text, size_t* error_byte = nullptr);

}  // namespace gpuacct
