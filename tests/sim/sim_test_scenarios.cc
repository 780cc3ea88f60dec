// Self-tests of the scenario programs (planted truth against the engine) and end to end: a
// scenario process with the stand-in injected client finding the fake CUPTI by soname.
#include <cupti.h>
#include <dlfcn.h>
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <mutex>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "sim_cuda.h"
#include "sim_test_client.h"

namespace sim_test {
namespace {

// ---- scenarios ----------------------------------------------------------------------------------

struct RunResult {
  int status = -1;
  std::string truth;
};

RunResult RunScenario(const std::string& name, const std::string& args) {
  // Per process: sim_test and sim_test_shuffled run side by side under ctest -j.
  const std::string truth =
      testing::TempDir() + "sim_truth_" + std::to_string(getpid()) + "_" + name + ".json";
  std::remove(truth.c_str());
  // No injection here: gpuacct_dyn() and NVTX calls become no-ops; the run checks the planted
  // timeline against the engine (exit status 3 on a mismatch) and writes the truth file.
  const std::string cmd =
      "env -u CUDA_INJECTION64_PATH -u NVTX_INJECTION64_PATH GPUACCT_SIM_TRUTH=" + truth + " " +
      SIM_BIN_DIR + "/sim_scenario_" + name + " " + args;
  RunResult r;
  const int st = std::system(cmd.c_str());
  r.status = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
  std::ifstream in(truth);
  std::stringstream ss;
  ss << in.rdbuf();
  r.truth = ss.str();
  return r;
}

class ScenarioTest : public ::testing::TestWithParam<const char*> {};

TEST_P(ScenarioTest, PlantedTruthMatchesEngine) {
  const std::string name = GetParam();
  for (const char* marks : {"--marks=capi", "--marks=nvtx", "--marks=none"}) {
    const bool big = name == "million";
    if (big && std::strcmp(marks, "--marks=capi") != 0) continue;
    RunResult r = RunScenario(name, std::string(marks) + (big ? "" : " --steps=5"));
    ASSERT_EQ(r.status, 0) << name << " " << marks;
    EXPECT_NE(r.truth.find("\"schema\": \"gpuacct-sim-truth/1\""), std::string::npos) << r.truth;
    EXPECT_NE(r.truth.find("\"scenario\": \"" + name + "\""), std::string::npos);
    EXPECT_NE(r.truth.find(big ? "\"num_steps\": 100" : "\"num_steps\": 5"), std::string::npos);
    EXPECT_NE(r.truth.find("\"exact\": true"), std::string::npos);
  }
}

INSTANTIATE_TEST_SUITE_P(All, ScenarioTest,
                         ::testing::Values("data_bound", "launch_bound", "comm_bound", "copy_bound",
                                           "balanced", "graphs", "multithread", "million",
                                           "nested_launch", "early_init", "counters"));

TEST(ScenarioTruth, DataBoundNumbers) {
  RunResult r = RunScenario("data_bound", "--marks=none --steps=3");
  ASSERT_EQ(r.status, 0);
  EXPECT_NE(r.truth.find("\"dominant\": \"data_wait\""), std::string::npos);
  EXPECT_NE(r.truth.find(
                "\"expected_ns\": {\"compute\": 10000000, \"communication_exposed\": 0, "
                "\"copy\": 0, \"data_wait\": 30000000, \"launch_gap\": 5000, \"host_other\": 0}"),
            std::string::npos)
      << r.truth;
}

// ---- end to end: scenario process + injected client + fake CUPTI found by soname --------------

std::string RunInjected(const std::string& scenario, const std::string& args,
                        const std::string& env) {
  const std::string out =
      testing::TempDir() + "sim_e2e_" + std::to_string(getpid()) + "_" + scenario + ".txt";
  std::remove(out.c_str());
  const std::string cmd = "env LD_LIBRARY_PATH=" + std::string(SIM_LIB_DIR) +
                          " CUDA_INJECTION64_PATH=" + SIM_TEST_INJECT_PATH +
                          " SIM_TEST_INJECT_OUT=" + out + " " + env + " " + SIM_BIN_DIR +
                          "/sim_scenario_" + scenario + " " + args;
  const int st = std::system(cmd.c_str());
  EXPECT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 0) << cmd;
  std::ifstream in(out);
  std::string line;
  std::getline(in, line);
  return line;
}

TEST(EndToEnd, InjectedClientSeesScenarioThroughFakeCupti) {
  const std::string s = RunInjected("data_bound", "--marks=capi --steps=4", "");
  EXPECT_NE(s.find("subscribe=0 version=130001 kernels=40 kernel_ns=40000000 "), std::string::npos)
      << s;
  EXPECT_NE(s.find("steps=4 data=4 dropped=0"), std::string::npos) << s;
  const std::string g2 = RunInjected("graphs", "--marks=capi --steps=3", "");
  EXPECT_NE(g2.find("kernels=120 "), std::string::npos) << g2;
  EXPECT_NE(g2.find("graph_kernels=120 "), std::string::npos) << g2;
}

TEST(EndToEnd, SubscribeRefusedAndDropFaultsReachTheClient) {
  const std::string s =
      RunInjected("comm_bound", "--marks=capi --steps=2", "GPUACCT_SIM_FAULTS=subscribe_refused");
  EXPECT_NE(s.find("subscribe=39 "), std::string::npos) << s;
  EXPECT_NE(s.find("kernels=0 "), std::string::npos) << s;
  EXPECT_NE(s.find("steps=2"), std::string::npos) << "marks still reach the library: " << s;
  const std::string d =
      RunInjected("launch_bound", "--marks=capi --steps=1", "GPUACCT_SIM_FAULTS=drop=100");
  EXPECT_NE(d.find("dropped=100"), std::string::npos) << d;
}

}  // namespace
}  // namespace sim_test
