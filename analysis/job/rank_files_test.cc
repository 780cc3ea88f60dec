// The names of a rank's files (analysis/job/rank_files.h): what a name says, what writers name,
// the stem of an input's outputs, and folders grouped into ranks.  tests/python/
// test_rank_files.py asserts the same names on the Python side (one table, two readers).
#include "analysis/job/rank_files.h"

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <tuple>

#include <gtest/gtest.h>

namespace gpuacct {
namespace {

namespace fs = std::filesystem;

TEST(RankFileNames, WhatANameSays) {
  using K = RankFileKind;
  // name -> kind, base, alone, by_content, tool_output (the same cases as test_rank_files.py)
  const std::map<std::string, std::tuple<K, std::string, bool, bool, bool>> cases = {
      {"gpuacct_h_12_rank3.report.json", {K::kReport, "gpuacct_h_12_rank3", false, false, false}},
      {"gpuacct_h_12_rank3.json", {K::kTrace, "gpuacct_h_12_rank3", false, true, false}},
      {"run.steps.jsonl", {K::kStepStream, "run", false, false, false}},
      {"other.jsonl", {K::kStepStream, "other", false, true, false}},
      {"run.collectives.csv", {K::kCollectives, "run", false, false, false}},
      {"run.gpuacct", {K::kRecording, "run", false, false, false}},
      {"run.gpuacct.tmp.4242", {K::kRecording, "run", false, false, false}},
      {"run.gpuacct.tmp.x1", {K::kOther, "run.gpuacct.tmp.x1", false, false, false}},
      {"x.pt.trace.json.gz", {K::kTrace, "x", false, false, false}},
      {"x.json.gz", {K::kTrace, "x", false, false, false}},
      {"report.json", {K::kReport, "", true, false, false}},
      {"steps.jsonl", {K::kStepStream, "", true, false, false}},
      {"collectives.csv", {K::kCollectives, "", true, false, false}},
      {"xreport.json", {K::kTrace, "xreport", false, true, false}},
      {"job.json", {K::kOther, "job.json", false, false, true}},
      {"a.timeline.json", {K::kOther, "a.timeline.json", false, false, true}},
      {"a.steps.csv", {K::kOther, "a.steps.csv", false, false, true}},
      {"notes.txt", {K::kOther, "notes.txt", false, false, false}},
  };
  for (const auto& [name, want] : cases) {
    const RankFileName got = rank_file_name(name);
    EXPECT_EQ(std::make_tuple(got.kind, got.base, got.alone, got.by_content, got.tool_output), want)
        << name;
  }
}

TEST(RankFileNames, WhatWritersNameAndTheStemOfOutputs) {
  EXPECT_EQ(rank_file("out/r", RankFileKind::kReport), "out/r.report.json");
  EXPECT_EQ(rank_file("out/r", RankFileKind::kStepStream), "out/r.steps.jsonl");
  EXPECT_EQ(rank_file("out/r", RankFileKind::kCollectives), "out/r.collectives.csv");
  EXPECT_EQ(rank_file("out/r", RankFileKind::kRecording), "out/r.gpuacct");
  EXPECT_EQ(rank_file("out/r", RankFileKind::kTrace), "");
  EXPECT_EQ(step_rows_csv_file("out/r"), "out/r.steps.csv");
  // Each written name reads back as its kind and base.
  for (const RankFileKind k : {RankFileKind::kReport, RankFileKind::kStepStream,
                               RankFileKind::kCollectives, RankFileKind::kRecording}) {
    const RankFileName n = rank_file_name(rank_file("r7", k));
    EXPECT_EQ(n.kind, k);
    EXPECT_EQ(n.base, "r7");
    EXPECT_FALSE(n.by_content);
  }
  EXPECT_EQ(output_stem("a/run.steps.jsonl"), "run");
  EXPECT_EQ(output_stem("a/x.pt.trace.json.gz"), "x");
  EXPECT_EQ(output_stem("a/x.report.json"), "x");
  EXPECT_EQ(output_stem("a/x.gpuacct.tmp.99"), "x");
  EXPECT_EQ(output_stem("runs/rank3/report.json"), "rank3");
  EXPECT_EQ(output_stem("report.json"), "report");
  EXPECT_EQ(output_stem("a/notes.txt"), "notes.txt");
}

class RankFolders : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("gpuacct_rank_files_" + std::to_string(getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string write(const std::string& name, const std::string& text) {
    const fs::path p = dir_ / name;
    fs::create_directories(p.parent_path());
    std::ofstream(p) << text;
    return p.string();
  }
  std::string stream(const std::string& name, int rank) {
    return write(name, "{\"schema\":\"gpuacct.steps/1\",\"rank\":" + std::to_string(rank) + "}\n");
  }
  std::string report(const std::string& name) {
    return write(name, "{\"schema\": \"gpuacct.report/1\", \"steps\": []}\n");
  }
  fs::path dir_;
};

TEST_F(RankFolders, RanksSideBySideAreGroupedByBaseName) {
  const std::string d = dir_.string();
  for (int r = 0; r < 2; ++r) {
    const std::string base = "gpuacct_h_1" + std::to_string(r) + "_rank" + std::to_string(r);
    report(base + ".report.json");
    stream(base + ".steps.jsonl", r);
    write(base + ".collectives.csv", "# gpuacct.collectives/1 {}\n");
  }
  write("job.json", "{}");
  write("notes.txt", "x");
  const auto groups = group_folder(folder_files(d));
  ASSERT_EQ(groups.size(), 2u);
  EXPECT_EQ(groups[0].label, d + "/gpuacct_h_10_rank0");
  EXPECT_EQ(groups[0].report, d + "/gpuacct_h_10_rank0.report.json");
  EXPECT_EQ(groups[0].step_stream, d + "/gpuacct_h_10_rank0.steps.jsonl");
  EXPECT_EQ(groups[0].collectives, d + "/gpuacct_h_10_rank0.collectives.csv");
  EXPECT_TRUE(groups[1].left_out.empty());
}

TEST_F(RankFolders, AFolderWithAFileNamedAfterItsKindIsOneRank) {
  // The case: each rank's default outputs in its own folder under the pattern "report"
  // (an older library: report.json), analyze's output beside them.
  const std::string r0 = (dir_ / "rank0").string();
  report("rank0/report.json");
  stream("rank0/report.steps.jsonl", 0);
  write("rank0/report.collectives.csv", "# gpuacct.collectives/1 {}\n");
  report("rank0/report.report.json");
  const auto groups = group_folder(folder_files(r0));
  ASSERT_EQ(groups.size(), 1u);
  EXPECT_EQ(groups[0].label, r0);
  EXPECT_EQ(groups[0].step_stream, r0 + "/report.steps.jsonl");
  EXPECT_EQ(groups[0].collectives, r0 + "/report.collectives.csv");
  EXPECT_EQ(groups[0].report, r0 + "/report.json");  // the first in path order
  ASSERT_EQ(groups[0].left_out.size(), 1u);
  EXPECT_NE(groups[0].left_out[0].find("report.report.json: a second report for " + r0),
            std::string::npos);
  // Named, the other report is used and brings the rank's other files.
  const RankFiles beside = files_beside(r0 + "/report.report.json");
  EXPECT_EQ(beside.report, r0 + "/report.report.json");
  EXPECT_EQ(beside.collectives, r0 + "/report.collectives.csv");
}

TEST_F(RankFolders, OneProcessesFilesUnderTwoBaseNamesAreOneRank) {
  // The library took a fresh name for its report (a file it must not replace was there):
  // job-1.report.json beside job.steps.jsonl and job.collectives.csv, all of pid 42.
  const std::string d = dir_.string();
  write("job-1.report.json",
        "{\n  \"run\": {\"hostname\": \"h{1}\", \"job_id\": \"j\", \"pid\": 42, "
        "\"rank\": 3},\n  \"schema\": \"gpuacct.report/1\", \"steps\": []\n}\n");
  write("job.steps.jsonl",
        "{\"schema\":\"gpuacct.steps/1\",\"job_id\":\"j\",\"pid\":42,\"rank\":3}\n");
  write("job.collectives.csv",
        "# gpuacct.collectives/1 {\"job_id\":\"j\",\"pid\":42,\"rank\":3}\n");
  // Another process of the same rank (a restart): its own rank, never mixed in.
  write("other.steps.jsonl",
        "{\"schema\":\"gpuacct.steps/1\",\"job_id\":\"j\",\"pid\":77,\"rank\":3}\n");
  const auto groups = group_folder(folder_files(d));
  ASSERT_EQ(groups.size(), 2u);
  EXPECT_EQ(groups[0].report, d + "/job-1.report.json");
  EXPECT_EQ(groups[0].step_stream, d + "/job.steps.jsonl");
  EXPECT_EQ(groups[0].collectives, d + "/job.collectives.csv");
  EXPECT_EQ(groups[1].step_stream, d + "/other.steps.jsonl");
}

TEST_F(RankFolders, AnOldNameReportIsAReportByItsContent) {
  const std::string d = dir_.string();
  report("gpuacct_h_1_rank0.json");
  write("gpuacct_h_1_rank0.collectives.csv", "# gpuacct.collectives/1 {}\n");
  write("truth.jsonl", "{\"kind\": \"step\"}\n");  // by content: no step stream, left out
  const auto groups = group_folder(folder_files(d));
  ASSERT_EQ(groups.size(), 1u);
  EXPECT_EQ(groups[0].report, d + "/gpuacct_h_1_rank0.json");
  EXPECT_EQ(groups[0].trace, "");
  EXPECT_EQ(files_beside(d + "/gpuacct_h_1_rank0.json").collectives,
            d + "/gpuacct_h_1_rank0.collectives.csv");
  // A file beside nothing is its own rank.
  const std::string lone = stream("lone.steps.jsonl", 3);
  EXPECT_EQ(files_beside(lone).step_stream, lone);
  EXPECT_EQ(files_beside(lone).collectives, "");
}

}  // namespace
}  // namespace gpuacct
