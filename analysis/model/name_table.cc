#include "analysis/model/name_table.h"

#include "analysis/model/json_text.h"

namespace gpuacct {

NameTable::NameTable() {
  intern("");
}

NameId NameTable::intern(std::string_view text) {
  auto it = index_.find(text);
  if (it != index_.end()) return it->second;  // every key is valid UTF-8: `text` is too
  // A new name: checked once.  (A name with invalid bytes is made safe at each intern; such
  // names are rare, and keeping only safe keys keeps text() valid by construction.)
  if (!is_valid_utf8(text)) return intern(json_safe_utf8(text));
  const auto id = static_cast<NameId>(strings_.size());
  strings_.emplace_back(text);
  index_.emplace(std::string_view(strings_.back()), id);
  return id;
}

std::string_view NameTable::text(NameId id) const {
  if (id >= strings_.size()) return "<unknown>";
  return strings_[id];
}

}  // namespace gpuacct
