#include "analysis/model/nccl_names.h"

#include <gtest/gtest.h>

namespace gpuacct {
namespace {

TEST(NcclNames, KernelNames) {
  EXPECT_EQ(classify_collective(
                "ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevKernelArgsStorage<4096ul>)"),
            CollectiveType::kAllReduce);
  EXPECT_EQ(classify_collective("ncclDevKernel_AllGather_RING_LL"), CollectiveType::kAllGather);
  EXPECT_EQ(classify_collective("ncclDevKernel_ReduceScatter_Sum_bf16_RING_SIMPLE"),
            CollectiveType::kReduceScatter);
  EXPECT_EQ(classify_collective("ncclDevKernel_Reduce_Sum_f32_RING_LL"), CollectiveType::kReduce);
  EXPECT_EQ(classify_collective("ncclDevKernel_Broadcast_RING_LL"), CollectiveType::kBroadcast);
  EXPECT_EQ(classify_collective("ncclDevKernel_SendRecv"), CollectiveType::kSendRecv);
  EXPECT_EQ(classify_collective("ncclDevKernel_Generic"), CollectiveType::kOther);
  EXPECT_EQ(classify_collective("void ncclKernel_AllReduce_RING_LL_Sum_float(ncclWorkElem)"),
            CollectiveType::kAllReduce);
  EXPECT_EQ(classify_collective("ncclKernel_SendRecv_RING_SIMPLE_Sum_int8_t"),
            CollectiveType::kSendRecv);
  EXPECT_EQ(classify_collective("ncclKernel_AllToAll_RING_LL"), CollectiveType::kAllToAll);
  EXPECT_EQ(classify_collective("ncclSymkDevKernel_AllGather_LL(ncclSymkDevWorkArgs4K)"),
            CollectiveType::kAllGather);
  EXPECT_EQ(classify_collective("ncclSymkDevKernel_ReduceScatter_LD_AGxSTMC_sum_bf16"),
            CollectiveType::kReduceScatter);
  EXPECT_EQ(classify_collective("ncclDevKernel_Weird"), CollectiveType::kOther);
  EXPECT_EQ(classify_collective("ncclKernel_"), CollectiveType::kOther);
  EXPECT_EQ(classify_collective("void at::native::vectorized_elementwise_kernel<4>"),
            CollectiveType::kNone);
  EXPECT_EQ(classify_collective(""), CollectiveType::kNone);
  EXPECT_EQ(classify_collective("Memcpy DtoD (Device -> Device)"), CollectiveType::kNone);
}

// CUPTI names kernels by their mangled symbol: these are what real CUPTI gave on an H200
// (tests/gpu runs of 2026-12-04) or NCCL's kernels mangled the same way.
TEST(NcclNames, MangledKernelNames) {
  EXPECT_EQ(classify_collective("_Z22ncclDevKernel_SendRecv24ncclDevKernelArgsStorageILm4096EE"),
            CollectiveType::kSendRecv);
  EXPECT_EQ(classify_collective(
                "_Z39ncclDevKernel_AllReduce_Sum_f32_RING_LL24ncclDevKernelArgsStorageILm4096EE"),
            CollectiveType::kAllReduce);
  EXPECT_EQ(classify_collective("_Z30ncclSymkDevKernel_AllGather_LL21ncclSymkDevWorkArgs4K"),
            CollectiveType::kAllGather);
  EXPECT_EQ(classify_collective("_ZN4nccl6detail10copyKernelEPv"), CollectiveType::kOther);
  EXPECT_EQ(classify_collective("_Z11spin_kernelx"), CollectiveType::kNone);
  EXPECT_EQ(classify_collective("_Z9wmma_spinPfi"), CollectiveType::kNone);
  // Not a well-formed mangled name: classified as written (not a collective).
  EXPECT_EQ(classify_collective("_Z99ncclDevKernel_SendRecv"), CollectiveType::kNone);
  EXPECT_EQ(classify_collective("_Z"), CollectiveType::kNone);
}

TEST(NcclNames, CollectiveNames) {
  EXPECT_EQ(classify_collective_name("allreduce"), CollectiveType::kAllReduce);
  EXPECT_EQ(classify_collective_name("all_reduce"), CollectiveType::kAllReduce);
  EXPECT_EQ(classify_collective_name("_allgather_base"), CollectiveType::kAllGather);
  EXPECT_EQ(classify_collective_name("allgather_into_tensor_coalesced"),
            CollectiveType::kAllGather);
  EXPECT_EQ(classify_collective_name("reduce_scatter_tensor"), CollectiveType::kReduceScatter);
  EXPECT_EQ(classify_collective_name("reduce"), CollectiveType::kReduce);
  EXPECT_EQ(classify_collective_name("broadcast"), CollectiveType::kBroadcast);
  EXPECT_EQ(classify_collective_name("send"), CollectiveType::kSendRecv);
  EXPECT_EQ(classify_collective_name("recv"), CollectiveType::kSendRecv);
  EXPECT_EQ(classify_collective_name("all_to_all_single"), CollectiveType::kAllToAll);
  EXPECT_EQ(classify_collective_name("barrier"), CollectiveType::kOther);
  EXPECT_EQ(classify_collective_name("mystery"), CollectiveType::kOther);
  EXPECT_EQ(classify_collective_name(""), CollectiveType::kNone);
}

}  // namespace
}  // namespace gpuacct
