// Matching NVTX range names against the configured step / data patterns.
//
// A pattern is a glob: '*' matches any run of characters, '?' one character, and "#N" matches
// '#' followed by one or more digits (so "ProfilerStep#N" matches "ProfilerStep#17").  A name
// also matches when it is the pattern followed by a step number, optionally after one of the
// separators " _#:-=" ("step 12", "iteration_3").  Matching is case-sensitive.  The trailing
// number, if any, is returned as the step number.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace gpuacct::inject {

bool glob_match(std::string_view pattern, std::string_view name);

class NamePatterns {
 public:
  NamePatterns() = default;
  explicit NamePatterns(std::vector<std::string> patterns) : patterns_(std::move(patterns)) {}
  // True if `name` matches; *number gets the trailing step number or -1.
  bool match(std::string_view name, int64_t* number) const;
  const std::vector<std::string>& patterns() const { return patterns_; }

 private:
  std::vector<std::string> patterns_;
};

// The trailing decimal number of `name` (-1 if none), e.g. "ProfilerStep#12" -> 12.
int64_t trailing_number(std::string_view name, size_t* digits_begin = nullptr);

}  // namespace gpuacct::inject
