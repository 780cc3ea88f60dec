#include "inject/recording/name_patterns.h"

namespace gpuacct::inject {

static bool is_digit(char c) {
  return c >= '0' && c <= '9';
}

bool glob_match(std::string_view p, std::string_view s) {
  // Iterative glob with single-star backtracking; "#N" is a token matching '#' + digits.
  size_t pi = 0, si = 0;
  size_t star_p = std::string_view::npos, star_s = 0;
  while (si < s.size()) {
    if (pi < p.size()) {
      char pc = p[pi];
      if (pc == '*') {
        star_p = pi++;
        star_s = si;
        continue;
      }
      if (pc == '#' && pi + 1 < p.size() && p[pi + 1] == 'N') {
        if (s[si] == '#' && si + 1 < s.size() && is_digit(s[si + 1])) {
          si += 2;
          while (si < s.size() && is_digit(s[si])) ++si;
          pi += 2;
          continue;
        }
      } else if (pc == '?' || pc == s[si]) {
        ++pi;
        ++si;
        continue;
      }
    }
    if (star_p != std::string_view::npos) {
      pi = star_p + 1;
      si = ++star_s;
      continue;
    }
    return false;
  }
  while (pi < p.size() && p[pi] == '*') ++pi;
  return pi == p.size();
}

int64_t trailing_number(std::string_view name, size_t* digits_begin) {
  size_t e = name.size();
  size_t b = e;
  while (b > 0 && is_digit(name[b - 1])) --b;
  if (digits_begin != nullptr) *digits_begin = b;
  if (b == e || e - b > 17) return -1;
  int64_t v = 0;
  for (size_t i = b; i < e; ++i) v = v * 10 + (name[i] - '0');
  return v;
}

bool NamePatterns::match(std::string_view name, int64_t* number) const {
  size_t db = 0;
  const int64_t num = trailing_number(name, &db);
  std::string_view stem = name;
  if (num >= 0) {
    stem = name.substr(0, db);
    if (!stem.empty()) {
      char c = stem.back();
      if (c == ' ' || c == '_' || c == '#' || c == ':' || c == '-' || c == '=') {
        stem.remove_suffix(1);
      }
    }
  }
  for (const auto& p : patterns_) {
    if (glob_match(p, name) || (num >= 0 && !stem.empty() && glob_match(p, stem))) {
      if (number != nullptr) *number = num;
      return true;
    }
  }
  return false;
}

}  // namespace gpuacct::inject
