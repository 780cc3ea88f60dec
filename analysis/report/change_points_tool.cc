// change_points_tool: the change-point search on a plain series, for the cross-check against
// ruptures (tests/python/test_change_points.py).  A test tool, not part of the gpuacct CLI.
//
//   change_points_tool --penalty P [--min-segment N] [--max-blocks B] < values
//
// Reads whitespace-separated numbers from stdin and prints one JSON line:
// {"breakpoints": [...], "robust_sigma": s} -- segment_l2's breakpoints (pelt_l2's when the
// series has at most B values, B = 2048 by default as in ChangePointOptions).
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <string>
#include <vector>

#include "analysis/model/json_text.h"
#include "analysis/report/change_points.h"

namespace {

int fail(const std::string& message) {
  std::fprintf(stderr, "change_points_tool: %s\n", message.c_str());
  return 2;
}

bool parse_number(const char* text, double* out) {
  char* end = nullptr;
  *out = std::strtod(text, &end);
  return end != text && *end == '\0';
}

}  // namespace

int main(int argc, char** argv) {
  double penalty = -1, min_segment = 5,
         max_blocks = static_cast<double>(gpuacct::ChangePointOptions{}.max_exact_steps);
  for (int i = 1; i < argc; ++i) {
    const std::string flag = argv[i];
    double* target = flag == "--penalty"       ? &penalty
                     : flag == "--min-segment" ? &min_segment
                     : flag == "--max-blocks"  ? &max_blocks
                                               : nullptr;
    if (target == nullptr || i + 1 >= argc || !parse_number(argv[i + 1], target)) {
      return fail(
          "usage: change_points_tool --penalty P [--min-segment N] [--max-blocks B] < values");
    }
    ++i;
  }
  if (penalty < 0 || min_segment < 1 || max_blocks < 1)
    return fail("--penalty >= 0, --min-segment and --max-blocks >= 1");
  std::vector<double> y;
  std::string word;
  while (std::cin >> word) {
    double v = 0;
    if (!parse_number(word.c_str(), &v)) return fail("not a number: " + word.substr(0, 40));
    y.push_back(v);
  }
  const std::vector<size_t> breaks = gpuacct::segment_l2(
      y, penalty, static_cast<size_t>(min_segment), static_cast<size_t>(max_blocks));
  const nlohmann::json out = {{"breakpoints", breaks}, {"robust_sigma", gpuacct::robust_sigma(y)}};
  std::printf("%s\n", gpuacct::dump_json(out).c_str());
  return 0;
}
