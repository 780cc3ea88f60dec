// A small, strict argument parser: every option must be declared; an unknown option, a
// missing value or a malformed number is a usage error with one clear message.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

namespace gpuacct::cli {

class Args {
 public:
  // `valued` options take a value (--x V or --x=V); `flags` take none.  Short aliases map a
  // one-letter form to a long name, e.g. {'o', "out"}.
  Args(std::set<std::string> valued, std::set<std::string> flags,
       std::map<char, std::string> aliases = {})
      : valued_(std::move(valued)), flags_(std::move(flags)), aliases_(std::move(aliases)) {}

  // argv[0] is the command name.  Returns false and sets error() on a usage error.
  bool parse(int argc, char** argv);
  const std::string& error() const { return error_; }

  bool has(const std::string& name) const { return values_.count(name) > 0; }
  std::string get(const std::string& name, const std::string& fallback = "") const;
  // Parses a number option; sets error() and returns nullopt when malformed.
  std::optional<double> get_number(const std::string& name, double fallback, double min,
                                   double max);
  // The same for a whole number (decimal digits, an optional sign: "1.5" and "1e3" are
  // errors, not rounded).
  std::optional<int64_t> get_integer(const std::string& name, int64_t fallback, int64_t min,
                                     int64_t max);
  const std::vector<std::string>& positional() const { return positional_; }

 private:
  std::set<std::string> valued_, flags_;
  std::map<char, std::string> aliases_;
  std::map<std::string, std::string> values_;
  std::vector<std::string> positional_;
  std::string error_;
};

// --jobs N / -j N: inputs read at once (analysis/model/ordered_parallel.h).  Sets *jobs to N,
// or to default_read_jobs() when absent; false with *error set when N is not a whole number
// from 1 to kMaxReadJobs.  Give the option "jobs" a value and the alias 'j' in Args.
bool parse_jobs(const Args& args, unsigned* jobs, std::string* error);
// Its lines for a command's --help, the text starting at `column` as the command's others do.
std::string jobs_option_help(size_t column);

}  // namespace gpuacct::cli
