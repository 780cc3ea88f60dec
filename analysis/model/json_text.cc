#include "analysis/model/json_text.h"

#include <cstdint>
#include <utility>

namespace gpuacct {
namespace {

// Length of the valid UTF-8 sequence starting at s[i], or 0 if the bytes there are invalid.
size_t utf8_sequence_length(std::string_view s, size_t i) {
  const auto b0 = static_cast<uint8_t>(s[i]);
  if (b0 < 0x80) return 1;
  size_t len = 0;
  uint32_t min_cp = 0;
  uint32_t cp = 0;
  if ((b0 & 0xE0) == 0xC0) {
    len = 2, min_cp = 0x80, cp = b0 & 0x1Fu;
  } else if ((b0 & 0xF0) == 0xE0) {
    len = 3, min_cp = 0x800, cp = b0 & 0x0Fu;
  } else if ((b0 & 0xF8) == 0xF0) {
    len = 4, min_cp = 0x10000, cp = b0 & 0x07u;
  } else {
    return 0;
  }
  if (i + len > s.size()) return 0;
  for (size_t k = 1; k < len; ++k) {
    const auto b = static_cast<uint8_t>(s[i + k]);
    if ((b & 0xC0) != 0x80) return 0;
    cp = (cp << 6) | (b & 0x3Fu);
  }
  if (cp < min_cp || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return 0;
  return len;
}

constexpr char kHex[] = "0123456789ABCDEF";

void append_hex_byte(std::string& out, uint8_t b) {
  out += "\\x";
  out += kHex[b >> 4];
  out += kHex[b & 0xF];
}

// Every string value and key of `j` made safe, in place.
void make_strings_safe(nlohmann::json& j) {
  if (j.is_string()) {
    std::string& s = j.get_ref<std::string&>();
    if (!is_valid_utf8(s)) s = json_safe_utf8(s);
  } else if (j.is_array()) {
    for (nlohmann::json& v : j) make_strings_safe(v);
  } else if (j.is_object()) {
    nlohmann::json safe = nlohmann::json::object();
    for (auto it = j.begin(); it != j.end(); ++it) {
      nlohmann::json v = std::move(it.value());
      make_strings_safe(v);
      safe[json_safe_utf8(it.key())] = std::move(v);
    }
    j = std::move(safe);
  }
}

}  // namespace

bool is_valid_utf8(std::string_view text) {
  for (size_t i = 0; i < text.size();) {
    if (static_cast<uint8_t>(text[i]) < 0x80) {
      ++i;  // the common case: ASCII
      continue;
    }
    const size_t len = utf8_sequence_length(text, i);
    if (len == 0) return false;
    i += len;
  }
  return true;
}

std::string json_safe_utf8(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (size_t i = 0; i < text.size();) {
    const size_t len = utf8_sequence_length(text, i);
    if (len == 0) {
      append_hex_byte(out, static_cast<uint8_t>(text[i]));
      ++i;
    } else {
      out.append(text.substr(i, len));
      i += len;
    }
  }
  return out;
}

void append_json_string(std::string& out, std::string_view text) {
  bool ascii_clean = true;
  for (char ch : text) {
    const auto b = static_cast<unsigned char>(ch);
    if (b >= 0x80 || b < 0x20 || ch == '"' || ch == '\\') {
      ascii_clean = false;
      break;
    }
  }
  out.push_back('"');
  if (ascii_clean) {
    out.append(text);
    out.push_back('"');
    return;
  }
  static const char kLowerHex[] = "0123456789abcdef";
  for (char ch : json_safe_utf8(text)) {
    const auto b = static_cast<unsigned char>(ch);
    switch (ch) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\r':
        out += "\\r";
        break;
      case '\t':
        out += "\\t";
        break;
      case '\b':
        out += "\\b";
        break;
      case '\f':
        out += "\\f";
        break;
      default:
        if (b < 0x20 || b == 0x7f) {
          out += "\\u00";
          out.push_back(kLowerHex[b >> 4]);
          out.push_back(kLowerHex[b & 15]);
        } else {
          out.push_back(ch);
        }
    }
  }
  out.push_back('"');
}

std::string_view utf8_prefix(std::string_view text, size_t max_bytes) {
  if (text.size() <= max_bytes) return text;
  size_t cut = max_bytes;
  // Back up over continuation bytes to the start of the sequence the cut falls in.
  while (cut > 0 && (static_cast<uint8_t>(text[cut]) & 0xC0) == 0x80) --cut;
  return text.substr(0, cut);
}

std::string_view utf8_without_cut_character(std::string_view text) {
  // Back over at most three continuation bytes to the lead byte of the last character.
  size_t i = text.size();
  size_t continuation = 0;
  while (continuation < 3 && i > 0 && (static_cast<uint8_t>(text[i - 1]) & 0xC0) == 0x80) {
    --i;
    ++continuation;
  }
  if (i == 0) return text;
  const auto lead = static_cast<uint8_t>(text[i - 1]);
  // ASCII, stray continuation bytes or a byte that never leads: not a cut character.
  if (lead < 0xC2 || lead > 0xF4) return text;
  const size_t need = lead >= 0xF0 ? 4 : lead >= 0xE0 ? 3 : 2;
  return continuation + 1 < need ? text.substr(0, i - 1) : text;
}

std::string terminal_text(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (char ch : json_safe_utf8(text)) {
    const auto b = static_cast<uint8_t>(ch);
    if (b < 0x20 || b == 0x7f) {
      append_hex_byte(out, b);
    } else {
      out.push_back(ch);
    }
  }
  return out;
}

std::string dump_json(const nlohmann::json& j, int indent) {
  try {
    return j.dump(indent);  // strict: throws type_error 316 at a string that is not UTF-8
  } catch (const nlohmann::json::type_error&) {
    // A string nobody made safe (a writer that forgot): make every string safe here, in the
    // same spelling.  `replace` only guards against this function's own bugs.
  }
  nlohmann::json safe = j;
  make_strings_safe(safe);
  return safe.dump(indent, ' ', false, nlohmann::json::error_handler_t::replace);
}

nlohmann::json parse_json(std::string_view text, size_t* error_byte) {
  nlohmann::json j = nlohmann::json::parse(text.begin(), text.end(), nullptr,
                                           /*allow_exceptions=*/false);
  if (j.is_discarded() && error_byte != nullptr) {
    // Only the throwing parse says where it stopped; caught here, never passed on.
    try {
      const nlohmann::json unused = nlohmann::json::parse(text.begin(), text.end());
      (void)unused;
    } catch (const nlohmann::json::parse_error& e) {
      *error_byte = e.byte;
    } catch (...) {
    }
  }
  return j;
}

}  // namespace gpuacct
