#include "cli/args.h"

#include <cerrno>
#include <cmath>
#include <cstdlib>

namespace gpuacct::cli {

bool Args::parse(int argc, char** argv) {
  bool only_positional = false;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (only_positional || a.size() < 2 || a[0] != '-') {
      positional_.push_back(a);
      continue;
    }
    if (a == "--") {
      only_positional = true;
      continue;
    }
    std::string name;
    std::optional<std::string> inline_value;
    if (a.rfind("--", 0) == 0) {
      name = a.substr(2);
      if (auto eq = name.find('='); eq != std::string::npos) {
        inline_value = name.substr(eq + 1);
        name = name.substr(0, eq);
      }
    } else if (a.size() == 2 && aliases_.count(a[1])) {
      name = aliases_.at(a[1]);
    } else {
      error_ = "unknown option '" + a + "'";
      return false;
    }
    if (flags_.count(name)) {
      if (inline_value) {
        error_ = "option '--" + name + "' takes no value";
        return false;
      }
      values_[name] = "1";
    } else if (valued_.count(name)) {
      if (inline_value) {
        values_[name] = *inline_value;
      } else if (i + 1 < argc) {
        values_[name] = argv[++i];
      } else {
        error_ = "option '--" + name + "' needs a value";
        return false;
      }
    } else {
      error_ = "unknown option '" + a + "'";
      return false;
    }
  }
  return true;
}

std::string Args::get(const std::string& name, const std::string& fallback) const {
  auto it = values_.find(name);
  return it == values_.end() ? fallback : it->second;
}

std::optional<double> Args::get_number(const std::string& name, double fallback, double min,
                                       double max) {
  auto it = values_.find(name);
  if (it == values_.end()) return fallback;
  const std::string& text = it->second;
  char* end = nullptr;
  errno = 0;
  const double v = std::strtod(text.c_str(), &end);
  if (text.empty() || end == nullptr || *end != '\0' || errno != 0 || !std::isfinite(v) ||
      v < min || v > max) {
    error_ = "option '--" + name + "': '" + text + "' is not a number in [" +
             std::to_string(static_cast<long long>(min)) + ", " +
             std::to_string(static_cast<long long>(max)) + "]";
    return std::nullopt;
  }
  return v;
}

}  // namespace gpuacct::cli
