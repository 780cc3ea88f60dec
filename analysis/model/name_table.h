// Interned strings.  Events carry a 4-byte NameId; the table owns the text.
// Id 0 is always "" so a zero-initialised event has a valid, empty name.
#pragma once

#include <deque>
#include <string>
#include <string_view>
#include <unordered_map>

#include "analysis/model/events.h"

namespace gpuacct {

class NameTable {
 public:
  NameTable();
  NameTable(const NameTable&) = delete;
  NameTable& operator=(const NameTable&) = delete;

  // The id of `text`, made safe first (json_safe_utf8, analysis/model/json_text.h): a name
  // holding bytes that are not UTF-8 is stored with them spelled "\xHH", so every output
  // (report, step stream, recording, timeline, terminal) shows the same text, and a recording
  // read back interns the same names.  text() is always valid UTF-8.
  NameId intern(std::string_view text);
  // Unknown ids read as "<unknown>" rather than crashing: a broken recording must not abort.
  std::string_view text(NameId id) const;
  bool contains(NameId id) const { return id < strings_.size(); }
  size_t size() const { return strings_.size(); }

 private:
  std::deque<std::string> strings_;  // deque: references stay valid as it grows
  std::unordered_map<std::string_view, NameId> index_;
};

}  // namespace gpuacct
