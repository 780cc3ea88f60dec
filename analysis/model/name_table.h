// Interned strings.  Events carry a 4-byte NameId; the table owns the text.
// Id 0 is always "" so a zero-initialised event has a valid, empty name.
#pragma once

#include <array>
#include <atomic>
#include <memory>
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
  // One thread interns (the importer's).
  NameId intern(std::string_view text);
  // Unknown ids read as "<unknown>" rather than crashing: a broken recording must not abort.
  // Safe on another thread while intern() runs, for any id that thread got after intern()
  // returned it (through a queue, analysis/model/threaded_sink.h): a name's text never moves
  // and is written before its id is published.
  std::string_view text(NameId id) const;
  bool contains(NameId id) const { return id < size(); }
  size_t size() const { return size_.load(std::memory_order_acquire); }

 private:
  // Segment k holds ids [kFirstSegment * (2^k - 1), kFirstSegment * (2^(k+1) - 1)): fixed
  // arrays that never move, found without a lock (a std::deque's block map reallocates).
  static constexpr size_t kFirstSegment = 64;
  static constexpr size_t kSegments = 27;  // 64 * (2^27 - 1) >= 2^32 ids: every NameId
  struct Slot {
    size_t segment;
    size_t offset;
  };
  static Slot slot_of(size_t id);

  std::array<std::unique_ptr<std::string[]>, kSegments> segments_;
  std::atomic<size_t> size_{0};
  std::unordered_map<std::string_view, NameId> index_;
};

}  // namespace gpuacct
