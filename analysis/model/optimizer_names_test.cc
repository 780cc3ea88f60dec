#include "analysis/model/optimizer_names.h"

#include <gtest/gtest.h>

namespace gpuacct {
namespace {

TEST(OptimizerNames, PyTorchForeachAndFusedKernels) {
  // As CUPTI names them on an H200 with torch 2.11 (SGD foreach, the data loop's momentum SGD).
  EXPECT_TRUE(is_optimizer_kernel_name(
      "_ZN2at6native55_GLOBAL__N__d25d856e_22_ForeachBinaryOpList_cu_a911ec4325multi_tensor_"
      "apply_kernelINS1_18TensorListMetadataILi3EEENS1_24BinaryOpListAlphaFunctorIfLi3ELi2ELi2E"
      "EEJSt4plusIfEfEEEvT_T0_DpT1_"));
  EXPECT_TRUE(is_optimizer_kernel_name(
      "void at::native::(anonymous namespace)::multi_tensor_apply_kernel<...>(...)"));
  EXPECT_TRUE(is_optimizer_kernel_name("void at::native::fused_adam_kernel<float>(...)"));
  EXPECT_TRUE(is_optimizer_kernel_name("FusedSgdKernel"));
}

TEST(OptimizerNames, OtherKernelsAreNot) {
  for (const char* n :
       {"_ZN2at6native29vectorized_elementwise_kernelILi4ENS0_15CUDAFunctor_addIfEESt5arrayIPc"
        "Lm3EEEEviT0_T1_",
        "nvjet_sm90_tst_320x128_64x3_1x2_h_bz_coopB_NTT", "[memcpy HtoD]",
        "ncclDevKernel_AllReduce_Sum_f32_RING_LL", "", "adam"}) {
    EXPECT_FALSE(is_optimizer_kernel_name(n)) << n;
  }
}

}  // namespace
}  // namespace gpuacct
