// The job view at scale (docs/job_view.md, *Scale*): writes a planted job's rank files --
// <dir>/rank<R>.steps.jsonl and rank<R>.collectives.csv -- a step at a time, for timing
// `gpuacct job DIR` under /usr/bin/time -v (time and peak RSS).  Not a Google Benchmark: the
// thing measured is the CLI's process.
//
//   job_bench DIR [--ranks 1024] [--hosts 128] [--steps 10000] [--collectives 50]
//                 [--every 10] [--straggler 13] [--seed 1]
//
// Collectives run on steps s % every == 0 (10,000 steps, every 10: 1,000 steps x 50 x 1024
// ranks = 51.2 M rows); hosts' clocks are off by planted offsets within +-5 ms; one straggler
// waits 15 ms for data every step.
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <string>

#include "analysis/job/job_test_util.h"

int main(int argc, char** argv) {
  if (argc < 2 || std::strcmp(argv[1], "--help") == 0) {
    std::fprintf(stderr,
                 "usage: job_bench DIR [--ranks N] [--hosts N] [--steps N] [--collectives N] "
                 "[--every N] [--straggler R] [--seed N]\n");
    return 2;
  }
  gpuacct::testing::PlantedJob job;
  job.ranks = 1024;
  job.hosts = 128;
  job.steps = 10000;
  job.collectives_per_step = 50;
  job.collective_every = 10;
  job.straggler = 13;
  job.work_ns = 1'000'000;
  job.transfer_ns = 500'000;
  job.job_id = "bench";
  for (int i = 2; i + 1 < argc; i += 2) {
    const std::string flag = argv[i];
    const long long v = std::atoll(argv[i + 1]);
    if (flag == "--ranks") job.ranks = static_cast<int>(v);
    else if (flag == "--hosts") job.hosts = static_cast<int>(v);
    else if (flag == "--steps") job.steps = static_cast<int>(v);
    else if (flag == "--collectives") job.collectives_per_step = static_cast<int>(v);
    else if (flag == "--every") job.collective_every = static_cast<int>(v);
    else if (flag == "--straggler") job.straggler = static_cast<int>(v);
    else if (flag == "--seed") job.seed = static_cast<uint64_t>(v);
    else {
      std::fprintf(stderr, "job_bench: unknown option %s\n", flag.c_str());
      return 2;
    }
  }
  // Offsets within +-5 ms, one per host, known from the seed (printed for the check).
  for (int h = 0; h < job.hosts; ++h) {
    job.host_offset_ns.push_back(((h * 7919) % 10001 - 5000) * 1000);
  }
  std::filesystem::create_directories(argv[1]);
  auto written = gpuacct::testing::write_planted_job(job, argv[1]);
  if (!written.ok()) {
    std::fprintf(stderr, "job_bench: %s\n", written.status().message().c_str());
    return 1;
  }
  std::printf("wrote %d ranks: %lld step rows, %lld collective rows into %s\n", job.ranks,
              static_cast<long long>(written->step_rows),
              static_cast<long long>(written->collective_rows), argv[1]);
  std::printf("planted: straggler rank %d (+15 ms data every step); host h offset = "
              "((h*7919) %% 10001 - 5000) us, e.g. node1 %+.3f ms vs node0 %+.3f ms\n",
              job.straggler, static_cast<double>(job.host_offset_ns[static_cast<size_t>(1 % job.hosts)]) / 1e6,
              static_cast<double>(job.host_offset_ns[0]) / 1e6);
  return 0;
}
