#include "analysis/model/optimizer_names.h"

#include <array>

namespace gpuacct {

bool is_optimizer_kernel_name(std::string_view name) {
  static constexpr std::array<std::string_view, 7> kPatterns = {
      "multi_tensor_apply", "fused_adam", "FusedAdam", "fused_sgd",
      "FusedSgd",           "FusedSGD",   "fused_adagrad"};
  for (std::string_view p : kPatterns) {
    if (name.find(p) != std::string_view::npos) return true;
  }
  return false;
}

}  // namespace gpuacct
