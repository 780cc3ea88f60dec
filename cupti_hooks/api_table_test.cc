// The traced-API table against the CUDA headers it was built with: every runtime / driver call
// whose cbid name says it launches work, copies, sets memory or blocks on the device is traced.
// A call left out makes its ops launch-less (the idle before them is not told launch overhead)
// and a blocking one's host time not CUDA time -- silently, on the programs that use it.
#include "cupti_hooks/api_table.h"

#include <gtest/gtest.h>

#include <fstream>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

namespace gpuacct::cupti {
namespace {

struct HeaderCbid {
  std::string name;
  uint32_t cbid;
};

// "CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000 = 211," -> {cudaLaunchKernel_v7000, 211}.
std::vector<HeaderCbid> read_cbids(const std::string& header, const std::string& prefix) {
  std::ifstream in(std::string(GPUACCT_CUPTI_INCLUDE_DIR) + "/" + header);
  std::stringstream text;
  text << in.rdbuf();
  const std::string all = text.str();
  const std::regex entry(prefix + "(\\w+)\\s*=\\s*(\\d+)");
  std::vector<HeaderCbid> out;
  for (auto it = std::sregex_iterator(all.begin(), all.end(), entry); it != std::sregex_iterator();
       ++it) {
    out.push_back({(*it)[1].str(), static_cast<uint32_t>(std::stoul((*it)[2].str()))});
  }
  return out;
}

// Calls that make device work or wait for it, by name; graph building and host functions
// (cudaLaunchHostFunc runs on the CPU: no GPU record ever answers it) are not such calls.
bool makes_or_waits_for_work(const std::string& name) {
  static const std::regex work("Launch|Memcpy|Memset|Synchronize");
  static const std::regex not_work("Graph(?!Launch)|HostFunc");
  return std::regex_search(name, work) && !std::regex_search(name, not_work);
}

void expect_all_traced(ApiDomain domain, const std::string& header, const std::string& prefix) {
  const std::vector<HeaderCbid> cbids = read_cbids(header, prefix);
  ASSERT_GT(cbids.size(), 300u) << "could not read " << header;
  std::string missing;
  size_t checked = 0;
  for (const HeaderCbid& c : cbids) {
    if (c.name == "SIZE" || c.name == "FORCE_INT" || !makes_or_waits_for_work(c.name)) continue;
    ++checked;
    if (find_traced_api(domain, c.cbid) == nullptr) missing += " " + c.name;
  }
  EXPECT_GT(checked, 40u);
  EXPECT_TRUE(missing.empty()) << header << ": not traced:" << missing;
}

TEST(ApiTable, EveryRuntimeCallThatMakesOrWaitsForWorkIsTraced) {
  expect_all_traced(ApiDomain::kRuntime, "cupti_runtime_cbid.h", "CUPTI_RUNTIME_TRACE_CBID_");
}

TEST(ApiTable, EveryDriverCallThatMakesOrWaitsForWorkIsTraced) {
  expect_all_traced(ApiDomain::kDriver, "cupti_driver_cbid.h", "CUPTI_DRIVER_TRACE_CBID_");
}

// Graph launches are launches; building a graph is not.
TEST(ApiTable, GraphLaunchesTracedGraphBuildingNot) {
  EXPECT_TRUE(makes_or_waits_for_work("cudaGraphLaunch_v10000"));
  EXPECT_TRUE(makes_or_waits_for_work("cuGraphLaunch_ptsz"));
  EXPECT_FALSE(makes_or_waits_for_work("cudaGraphAddMemcpyNode_v10000"));
  EXPECT_FALSE(makes_or_waits_for_work("cuLaunchHostFunc"));
}

}  // namespace
}  // namespace gpuacct::cupti
