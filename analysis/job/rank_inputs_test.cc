// The job view from rank files on disk: step streams, reports, rows files; the problems of
// bad inputs; the export tables.  Small versions of the benchmark (bench/job_bench.cc).
#include "analysis/job/rank_inputs.h"

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <map>
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
  EXPECT_NE(steps.find(",flops,tokens,samples,sampled,sm_active_pct,tensor_active_pct,dram_pct,"
                       "compute_sol_pct,memory_sol_pct,clock_offset_ns,job_step_ns,waited_ns,"
                       "late_ns\n"),
            std::string::npos);
  EXPECT_EQ(collectives.rfind("job,host,rank,step_index,comm,seq,collective,bytes,", 0), 0u);
  EXPECT_NE(
      collectives.find(
          ",gpu_end_ns,source,kernel_ops,arrival_ns,last_rank,wait_ns,transfer_ns,busbw_gbs\n"),
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
// README there): steps from the front door, collectives (send/recv) by kernel order.  The
// send/recv kernels have no peer in the trace, so the i-th of rank 0 and the i-th of rank 1
// are not one transfer (they are matched to other stages): they are not matched, they are
// listed per rank, and waiting vs transfer is the floor's, computed here from the step rows.
TEST_F(RankFilesTest, TwoRanksOfARealJobFromTheirTraces) {
  const std::string data = GPUACCT_TEST_DATA_DIR;
  const JobInputs in = load_job_inputs(
      {data + "/kineto/sampled_rank-1.json.gz", data + "/kineto/sampled_rank-0.json.gz"});
  ASSERT_EQ(in.ranks.size(), 2u);
  EXPECT_EQ(in.world_size, 128);
  EXPECT_TRUE(has_problem(in.problems, "ranks 2-127 of 128 are missing"));
  EXPECT_EQ(in.ranks[0].rank, 0);
  EXPECT_EQ(in.ranks[0].step_source, "trace");
  EXPECT_TRUE(in.ranks[0].has_collectives);

  // The floor, from each rank's step rows alone: per step both ranks have (not warm-up), the
  // least exposed communication is the transfer and each rank's excess is waiting.
  std::vector<std::map<int64_t, StepRow>> rows(2);
  std::vector<int64_t> records(2, 0);
  for (size_t s = 0; s < 2; ++s) {
    auto stream = in.ranks[s].open(true);
    ASSERT_TRUE(stream.ok()) << stream.status().message();
    std::vector<StepRow> all;
    std::vector<CollectiveRecord> collectives;
    while (stream.value()->next_step() != kNoMoreSteps) {
      stream.value()->read_until(stream.value()->next_step() + 1, &all, &collectives);
    }
    for (const StepRow& r : all) {
      auto [it, fresh] = rows[s].emplace(r.step_index, r);
      if (!fresh && r.device < it->second.device) it->second = r;
    }
    for (const CollectiveRecord& c : collectives) {
      EXPECT_EQ(c.type, CollectiveType::kSendRecv);
      EXPECT_EQ(c.source, CollectiveSource::kKernelOrder);
      ++records[s];
    }
  }
  std::vector<int64_t> waited(2, 0), transfer(2, 0);
  int64_t common = 0;
  for (const auto& [index, row0] : rows[0]) {
    const auto other = rows[1].find(index);
    if (other == rows[1].end() || row0.warmup || other->second.warmup) continue;
    ++common;
    const int64_t exposed[2] = {row0.cat.comm_exposed, other->second.cat.comm_exposed};
    const int64_t floor = std::min(exposed[0], exposed[1]);
    for (size_t s = 0; s < 2; ++s) {
      waited[s] += exposed[s] - floor;
      transfer[s] += floor;
    }
  }
  ASSERT_EQ(common, 2);
  ASSERT_EQ(rows[0].size(), 2u);  // every step of each rank is a common one
  ASSERT_EQ(rows[1].size(), 2u);
  EXPECT_EQ(records[0], 10);
  EXPECT_EQ(records[1], 10);

  const JobView v = build_job_view(in);
  EXPECT_EQ(v.method, std::string(kMethodStepRowsFloor));
  EXPECT_EQ(v.steps, common);
  EXPECT_EQ(v.instances, 0);  // nothing matched
  EXPECT_EQ(v.alignment.instances_cross_host, 0);
  for (size_t s = 0; s < 2; ++s) {
    EXPECT_EQ(v.ranks[s].waited_ns, waited[s]) << "rank " << s;
    EXPECT_EQ(v.ranks[s].transfer_ns, transfer[s]) << "rank " << s;
    EXPECT_EQ(v.ranks[s].clock_offset_ns, 0);
  }
  // Not a split by arrival: rank 0 waits, per step, less than its exposed communication.
  EXPECT_GT(waited[0], 0);
  EXPECT_LT(waited[0], rows[0].begin()->second.cat.comm_exposed);
  // The per-collective table: SendRecv, 10 per rank, unmatched for want of a peer.
  ASSERT_EQ(v.unmatched.size(), 2u);
  for (size_t s = 0; s < 2; ++s) {
    const UnmatchedCollectiveRow& u = v.unmatched[s];
    EXPECT_EQ(u.rank, static_cast<int>(s));
    EXPECT_EQ(u.type, CollectiveType::kSendRecv);
    EXPECT_EQ(u.reason, std::string(kUnmatchedNoPeer));
    EXPECT_EQ(u.records, 10);
    EXPECT_EQ(u.timed, 10);
    EXPECT_GT(u.duration_ns, 0);
  }
  EXPECT_TRUE(has_problem(v.matching_notes, "20 point-to-point records without their peer"));
  EXPECT_TRUE(has_problem(v.matching_notes, "no matched collective could be trusted"));
  const std::string text = render_job_view(v);
  EXPECT_NE(text.find("step rows only: transfer floor"), std::string::npos) << text;
  EXPECT_NE(text.find("p2p_without_peer"), std::string::npos) << text;
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
