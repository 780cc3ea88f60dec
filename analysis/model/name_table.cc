#include "analysis/model/name_table.h"

#include <bit>
#include <limits>

#include "analysis/model/json_text.h"

namespace gpuacct {

NameTable::NameTable() {
  intern("");
}

NameTable::Slot NameTable::slot_of(size_t id) {
  const size_t block = id / kFirstSegment + 1;  // segment k holds blocks [2^k, 2^(k+1))
  const auto segment = static_cast<size_t>(std::bit_width(block) - 1);
  return {segment, id - kFirstSegment * ((size_t{1} << segment) - 1)};
}

NameId NameTable::intern(std::string_view text) {
  auto it = index_.find(text);
  if (it != index_.end()) return it->second;  // every key is valid UTF-8: `text` is too
  // A new name: checked once.  (A name with invalid bytes is made safe at each intern; such
  // names are rare, and keeping only safe keys keeps text() valid by construction.)
  if (!is_valid_utf8(text)) return intern(json_safe_utf8(text));
  const size_t id = size_.load(std::memory_order_relaxed);
  // Every NameId taken (2^32 names: cannot happen in practice).  The id, not the segment, is
  // the limit: the last segment reaches past 2^32, and a larger id would wrap onto id 0, 1, ...
  if (id > std::numeric_limits<NameId>::max()) return kNoName;
  const Slot slot = slot_of(id);
  auto& segment = segments_[slot.segment];
  if (!segment) segment = std::make_unique<std::string[]>(kFirstSegment << slot.segment);
  std::string& stored = segment[slot.offset];
  stored.assign(text);
  index_.emplace(std::string_view(stored), static_cast<NameId>(id));
  size_.store(id + 1, std::memory_order_release);  // publishes the text before the id
  return static_cast<NameId>(id);
}

std::string_view NameTable::text(NameId id) const {
  if (id >= size()) return "<unknown>";
  const Slot slot = slot_of(id);
  return segments_[slot.segment][slot.offset];
}

}  // namespace gpuacct
