// Recognises the kernels an optimizer step launches, by name.  Step detection (analysis/
// accounting/step_detector.h) ends a detected step after the optimizer's kernels: the step a
// user means is one optimizer step, and that is where gpuacct._auto marks one too.
//
// Recognised (substrings of the mangled or demangled kernel name):
//   multi_tensor_apply   PyTorch's foreach and fused optimizers (torch.optim with foreach=True,
//                        the default on CUDA since torch 2.0, and fused=True), apex's
//                        multi-tensor optimizers, torch._foreach_* in general;
//   fused_adam / FusedAdam / fused_sgd / FusedSgd / FusedSGD / fused_adagrad
//                        fused optimizer kernels named after their optimizer.
// Per-parameter optimizers (foreach=False) launch ordinary element-wise kernels, which no name
// tells apart: detection then ends steps by the other rules (step_detector.h).
#pragma once

#include <string_view>

namespace gpuacct {

bool is_optimizer_kernel_name(std::string_view kernel_name);

}  // namespace gpuacct
