// The job view from rank files on disk: step streams, reports, rows files; the problems of
// bad inputs; the export tables.  Small versions of the benchmark (bench/job_bench.cc).
#include "analysis/job/rank_inputs.h"

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include <gtest/gtest.h>

#include "analysis/input/input.h"
#include "analysis/job/job_merge.h"
#include "analysis/job/job_test_util.h"

namespace gpuacct {
namespace {

namespace fs = std::filesystem;
using testing::PlantedJob;
using testing::StepFormat;
using testing::write_planted_job;

class RankFilesTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("gpuacct_job_test_" + std::to_string(getpid()) + "_" +
                                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string dir() const { return dir_.string(); }
  static std::string read(const std::string& path) {
    std::ifstream in(path);
    std::ostringstream s;
    s << in.rdbuf();
    return s.str();
  }
  static bool has_problem(const std::vector<std::string>& problems, const std::string& text) {
    for (const std::string& p : problems) {
      if (p.find(text) != std::string::npos) return true;
    }
    return false;
  }
  fs::path dir_;
};

PlantedJob sixteen_ranks() {
  PlantedJob job;
  job.ranks = 16;
  job.hosts = 4;
  job.host_offset_ns = {0, 5'000'000, -5'000'000, 2'500'000};
  job.straggler = 9;
  job.steps = 64;
  job.collectives_per_step = 5;
  job.collective_every = 2;
  job.missing_share = 0.02;
  job.seed = 5;
  return job;
}

TEST_F(RankFilesTest, StepStreamsAndRowsFilesInWindowsGiveThePlantedAnswer) {
  const PlantedJob job = sixteen_ranks();
  auto written = write_planted_job(job, dir());
  ASSERT_TRUE(written.ok()) << written.status().message();
  const JobInputs in = load_job_inputs({dir()});
  ASSERT_EQ(in.ranks.size(), 16u);
  EXPECT_TRUE(in.problems.empty()) << in.problems[0];
  EXPECT_EQ(in.job_id, job.job_id);
  EXPECT_EQ(in.world_size, 16);
  for (size_t i = 0; i < in.ranks.size(); ++i) {
    EXPECT_EQ(in.ranks[i].rank, static_cast<int>(i));
    EXPECT_EQ(in.ranks[i].step_source, "step_stream");
    EXPECT_TRUE(in.ranks[i].has_collectives);
  }
  JobOptions opts;
  opts.window_steps = 3;  // windows that do not divide the steps
  JobExport exporter;
  ASSERT_TRUE(exporter.open(dir() + "/export").ok());
  const JobView v = build_job_view(in, opts, &exporter);
  ASSERT_TRUE(exporter.finish().ok());
  EXPECT_EQ(v.steps, job.steps);
  EXPECT_EQ(v.headline.rfind("rank 9 arrives last", 0), 0u) << v.headline;
  // Host offsets relative to node0 (rank 0's host), within 50 us.
  const int64_t want[] = {0, 5'000'000, -5'000'000, 2'500'000};
  for (const JobHost& h : v.hosts) {
    const int host = h.name.back() - '0';
    EXPECT_NEAR(static_cast<double>(h.offset_ns), static_cast<double>(want[host]), 50'000.0)
        << h.name;
    EXPECT_EQ(h.ranks.size(), 4u);
  }
  EXPECT_GT(v.incomplete_instances, 0);  // the planted missing records
  // Every rank row and every collective row is in the export, with the documented columns.
  const std::string steps = read(dir() + "/export/job_steps.csv");
  const std::string collectives = read(dir() + "/export/job_collectives.csv");
  EXPECT_EQ(steps.rfind("job,host,rank,step_index,step_number,device,warmup,", 0), 0u);
  EXPECT_NE(steps.find(",flops,clock_offset_ns,job_step_ns,waited_ns,late_ns\n"), std::string::npos);
  EXPECT_EQ(collectives.rfind("job,host,rank,step_index,comm,seq,collective,bytes,", 0), 0u);
  EXPECT_NE(collectives.find(",gpu_end_ns,source,arrival_ns,last_rank,wait_ns,transfer_ns,busbw_gbs\n"),
            std::string::npos);
  EXPECT_EQ(exporter.step_lines(), written->step_rows);
  EXPECT_EQ(exporter.collective_lines(), written->collective_rows);
  EXPECT_EQ(std::count(steps.begin(), steps.end(), '\n'), written->step_rows + 1);
  EXPECT_EQ(std::count(collectives.begin(), collectives.end(), '\n'), written->collective_rows + 1);
  // The straggler's rows: late every step with collectives, on node1 (9 % 4), aligned times.
  EXPECT_NE(steps.find("job-7,node1,9,"), std::string::npos);
}

TEST_F(RankFilesTest, ReportsGiveTheSameAnswerAsStreamsAndAreRecognisedByContent) {
  PlantedJob job = sixteen_ranks();
  job.ranks = 8;
  job.hosts = 2;
  job.host_offset_ns = {1'000'000, -4'000'000};
  job.straggler = 3;
  job.steps = 24;
  ASSERT_TRUE(write_planted_job(job, dir(), StepFormat::kReport).ok());
  auto input = Input::open(dir() + "/rank0.report.json");
  ASSERT_TRUE(input.ok());
  EXPECT_EQ(input->format(), InputFormat::kReport);
  // Files named on the command line, in any order.
  std::vector<std::string> files;
  for (int r : {5, 0, 7, 2, 1, 6, 3, 4}) {
    files.push_back(dir() + "/rank" + std::to_string(r) + ".collectives.csv");
    files.push_back(dir() + "/rank" + std::to_string(r) + ".report.json");
  }
  const JobInputs in = load_job_inputs(files);
  ASSERT_EQ(in.ranks.size(), 8u);
  EXPECT_EQ(in.ranks[3].step_source, "report");
  const JobView v = build_job_view(in);
  EXPECT_EQ(v.headline.rfind("rank 3 arrives last", 0), 0u) << v.headline;
  EXPECT_NEAR(static_cast<double>(v.hosts[1].offset_ns), -5'000'000.0, 50'000.0);
}

TEST_F(RankFilesTest, BadInputsAreOneLineEachAndTheRestIsUsed) {
  PlantedJob job = sixteen_ranks();
  job.ranks = 8;
  job.hosts = 2;
  job.steps = 20;
  job.straggler = 3;
  // Rank 5 missing altogether.
  ASSERT_TRUE(write_planted_job(job, dir(), StepFormat::kStepStream, {0, 1, 2, 3, 4, 6, 7}).ok());
  // A duplicate of rank 2 in a sub-folder; a rank of another job.
  fs::create_directories(dir_ / "copy");
  fs::copy_file(dir_ / "rank2.steps.jsonl", dir_ / "copy" / "rank2.steps.jsonl");
  PlantedJob other = job;
  other.job_id = "job-8";
  fs::create_directories(dir_ / "other");
  ASSERT_TRUE(write_planted_job(other, (dir_ / "other").string(), StepFormat::kStepStream, {6}).ok());
  fs::rename(dir_ / "other" / "rank6.steps.jsonl", dir_ / "other" / "x6.steps.jsonl");
  fs::rename(dir_ / "other" / "rank6.collectives.csv", dir_ / "other" / "x6.collectives.csv");
  // Rank 4's rows file cut in the middle of a line (its writer killed).
  const std::string rows4 = read(dir() + "/rank4.collectives.csv");
  {
    std::ofstream cut(dir() + "/rank4.collectives.csv", std::ios::trunc);
    cut << rows4.substr(0, rows4.size() * 2 / 3);
  }
  // A file that is nothing the job view reads, named by the user.
  { std::ofstream(dir() + "/junk.gpuacct") << "not a recording"; }
  const JobInputs in = load_job_inputs({dir(), dir() + "/junk.gpuacct"});
  EXPECT_TRUE(has_problem(in.problems, "rank 5 of 8 is missing")) << ::testing::PrintToString(in.problems);
  EXPECT_TRUE(has_problem(in.problems, "rank 2 appears twice"));
  EXPECT_TRUE(has_problem(in.problems, "is of job job-8, not of job job-7: left out"));
  EXPECT_TRUE(has_problem(in.problems, "junk"));
  ASSERT_EQ(in.ranks.size(), 7u);
  const JobView v = build_job_view(in);
  EXPECT_TRUE(has_problem(v.problems, "rank4.collectives.csv: the rows file has no end line"))
      << ::testing::PrintToString(v.problems);
  EXPECT_EQ(v.steps, job.steps);
  EXPECT_EQ(v.headline.rfind("rank 3 arrives last", 0), 0u) << v.headline;
  EXPECT_GT(v.instances, 0);
  EXPECT_NE(render_job_view(v).find("problem: rank 5 of 8 is missing"), std::string::npos);
  EXPECT_FALSE(job_view_to_json(v)["problems"].empty());
}

// Two ranks' PyTorch-profiler traces of a 128-rank pipeline-parallel job (tests/data/kineto,
// README there): steps from the front door, collectives (send/recv) by kernel order.
TEST_F(RankFilesTest, TwoRanksOfARealJobFromTheirTraces) {
  const std::string data = GPUACCT_TEST_DATA_DIR;
  const JobInputs in = load_job_inputs(
      {data + "/kineto/sampled_rank-1.json.gz", data + "/kineto/sampled_rank-0.json.gz"});
  ASSERT_EQ(in.ranks.size(), 2u);
  EXPECT_EQ(in.world_size, 128);
  EXPECT_TRUE(has_problem(in.problems, "ranks 2-127 of 128 are missing"));
  EXPECT_EQ(in.ranks[0].rank, 0);
  EXPECT_EQ(in.ranks[0].step_source, "kineto");
  EXPECT_TRUE(in.ranks[0].has_collectives);
  const JobView v = build_job_view(in);
  EXPECT_EQ(v.steps, 2);
  EXPECT_EQ(v.instances, 10);
  EXPECT_EQ(v.types[static_cast<size_t>(CollectiveType::kSendRecv)].instances, 10);
  // Each rank waits for the other in some instances: both are someone's last rank.
  EXPECT_GT(v.ranks[0].last_count, 0);
  EXPECT_GT(v.ranks[1].last_count, 0);
  EXPECT_EQ(v.ranks[0].last_count + v.ranks[1].last_count, 10);
}

TEST_F(RankFilesTest, ACutReportFallsBackToTheRanksStepStream) {
  PlantedJob job = sixteen_ranks();
  job.ranks = 4;
  job.hosts = 1;
  job.straggler = 2;
  job.steps = 10;
  ASSERT_TRUE(write_planted_job(job, dir(), StepFormat::kReport).ok());
  // Rank 1 also has a step stream; its report is cut.
  fs::create_directories(dir_ / "s");
  ASSERT_TRUE(write_planted_job(job, (dir_ / "s").string(), StepFormat::kStepStream, {1}).ok());
  fs::rename(dir_ / "s" / "rank1.steps.jsonl", dir_ / "rank1.steps.jsonl");
  const std::string report = read(dir() + "/rank1.report.json");
  std::ofstream(dir() + "/rank1.report.json", std::ios::trunc) << report.substr(0, report.size() / 2);
  const JobInputs in = load_job_inputs({dir()});
  EXPECT_TRUE(has_problem(in.problems, "rank1.report.json: a gpuacct report that does not parse"))
      << ::testing::PrintToString(in.problems);
  ASSERT_EQ(in.ranks.size(), 4u);
  EXPECT_EQ(in.ranks[1].step_source, "step_stream");
  EXPECT_EQ(in.ranks[0].step_source, "report");
  const JobView v = build_job_view(in);
  EXPECT_EQ(v.steps, job.steps);
  EXPECT_EQ(v.headline.rfind("rank 2 arrives last", 0), 0u) << v.headline;
}

TEST_F(RankFilesTest, NothingUsableIsEmptyWithAReason) {
  const JobInputs none = load_job_inputs({dir()});
  EXPECT_TRUE(none.ranks.empty());
  EXPECT_TRUE(has_problem(none.problems, "no rank outputs found"));
  const JobInputs missing = load_job_inputs({dir() + "/nope"});
  EXPECT_TRUE(has_problem(missing.problems, "no such file or directory"));
}

}  // namespace
}  // namespace gpuacct
