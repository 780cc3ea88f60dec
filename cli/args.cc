#include "cli/args.h"

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstdlib>

#include "analysis/model/ordered_parallel.h"

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

std::optional<int64_t> Args::get_integer(const std::string& name, int64_t fallback, int64_t min,
                                         int64_t max) {
  auto it = values_.find(name);
  if (it == values_.end()) return fallback;
  const std::string& text = it->second;
  const char* begin = text.data() + (text.size() > 1 && text[0] == '+' ? 1 : 0);
  int64_t v = 0;
  const auto parsed = std::from_chars(begin, text.data() + text.size(), v);
  if (text.empty() || parsed.ec != std::errc() || parsed.ptr != text.data() + text.size() ||
      v < min || v > max) {
    error_ = "option '--" + name + "': '" + text + "' is not a whole number in [" +
             std::to_string(min) + ", " + std::to_string(max) + "]";
    return std::nullopt;
  }
  return v;
}

bool parse_jobs(const Args& args, unsigned* jobs, std::string* error) {
  *jobs = default_read_jobs();
  if (!args.has("jobs")) return true;
  const std::string text = args.get("jobs", "");
  unsigned long n = 0;
  const auto parsed = std::from_chars(text.data(), text.data() + text.size(), n);
  if (parsed.ec != std::errc() || parsed.ptr != text.data() + text.size() || n == 0 ||
      n > kMaxReadJobs) {
    *error = "--jobs wants a whole number from 1 to " + std::to_string(kMaxReadJobs) + ", not '" +
             text + "'";
    return false;
  }
  *jobs = static_cast<unsigned>(n);
  return true;
}

std::string jobs_option_help(size_t column) {
  const std::string flag = "  -j, --jobs N";
  const std::string indent(std::max(column, flag.size() + 1), ' ');
  return flag + indent.substr(flag.size()) +
         "inputs read at once (default: half the cores, from 2 to 4;\n" + indent +
         "each read takes its own memory); the output is the same,\n" + indent +
         "in the order the inputs were given\n";
}

}  // namespace gpuacct::cli
