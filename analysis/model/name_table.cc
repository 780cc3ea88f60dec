#include "analysis/model/name_table.h"

namespace gpuacct {

NameTable::NameTable() {
  intern("");
}

NameId NameTable::intern(std::string_view text) {
  auto it = index_.find(text);
  if (it != index_.end()) return it->second;
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
