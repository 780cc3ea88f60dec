// Lossless text for JSON output.  Kernel names and user strings can hold bytes that are not
// UTF-8 (truncated names, binary garbage from a broken source).  JSON writers usually either
// throw on them or replace them with U+FFFD, losing the original byte.  json_safe_utf8 keeps
// valid UTF-8 as is and spells every invalid byte as the four characters "\xHH", so the
// original bytes can always be recovered from the report.
#pragma once

#include <string>
#include <string_view>

namespace gpuacct {

std::string json_safe_utf8(std::string_view text);

}  // namespace gpuacct
