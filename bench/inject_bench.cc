// Hot paths of the injected library (targets in docs/injection.md):
//   BM_LaunchCallback  - one traced launch as CUPTI delivers it: ENTER + EXIT callbacks through
//                        the collector's dispatch into the per-thread hooks (target <= 100 ns)
//   BM_LaunchCallbackNested - one cudaLaunchKernel with both API domains' callbacks on: runtime
//                        ENTER, the nested cuLaunchKernel's ENTER + EXIT (ignored by the
//                        per-thread nesting depth), runtime EXIT
//   BM_LaunchCallbackTimed - the same with the calls timed by their callbacks
//                        (GPUACCT_CUPTI_API=callbacks): the nest's spans read, one ring record
//   BM_CApiStepMark    - one C API call into the per-thread ring (drained every 4096 calls)
//   BM_NvtxPushPop     - an NVTX push + pop pair through the same ring
//   BM_ActivityParse   - CUPTI activity records -> event model, one core (target >= 10 M/s)
//   BM_SummaryLine/N   - one provisional summary line of the step stream over N step rows
//                        (summarize + report_to_json + dump, what the worker does at most once
//                        a second; inject/pipeline/pipeline.h)
//   BM_PromAddRow      - one finalised row into the live metrics' totals (GPUACCT_PROM_DIR)
//   BM_PromWrite/D     - one rewrite of the live metrics file for D devices: render the text,
//                        write a temporary file in $TMPDIR (default /tmp), rename it over the
//                        last one -- what the worker does once a period
//                        (inject/output/prom_output.h, docs/metrics.md)
#include <benchmark/benchmark.h>

#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include "analysis/model/json_text.h"
#include "analysis/model/name_table.h"
#include "analysis/report/report.h"
#include "cupti_hooks/activity_parser.h"
#include "cupti_hooks/collector.h"
#include "inject/clock.h"
#include "inject/output/prom_output.h"
#include "inject/pipeline/pipeline.h"
#include "inject/recording/recorder.h"

namespace {

using gpuacct::inject::HostRecType;

void make_recording() {
  gpuacct::inject::g_hot.ring_capacity = 1 << 16;
  gpuacct::inject::g_hot.stacks = true;
  gpuacct::inject::g_mode.store(gpuacct::inject::kModeRecording);
}

void drain_all() {
  std::vector<gpuacct::inject::ThreadState*> threads;
  gpuacct::inject::Registry::get().snapshot(threads);
  for (auto* t : threads) {
    t->ring.drain([](const gpuacct::inject::HostRecord&, uint64_t, gpuacct::inject::HostRing&) {});
  }
}

void BM_LaunchCallback(benchmark::State& state) {
  make_recording();
  auto& col = gpuacct::cupti::Collector::instance();
  gpuacct::cupti::CollectorHooks hooks;
  hooks.api_enter = &gpuacct::inject::hook_api_enter;
  hooks.api_exit = &gpuacct::inject::hook_api_exit;
  col.set_hooks_for_testing(hooks);
  const uint32_t cbid = gpuacct::cupti::Collector::cbid_cuda_launch_kernel();
  uint32_t corr = 1;
  for (auto _ : state) {
    uint64_t scratch = 0;
    col.invoke_api_callback_for_testing(true, cbid, true, &scratch, corr);
    col.invoke_api_callback_for_testing(true, cbid, false, &scratch, corr);
    ++corr;
    benchmark::DoNotOptimize(scratch);
  }
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_LaunchCallback);

// A cudaLaunchKernel and the cuLaunchKernel nested in it, as CUPTI calls back with both
// domains on.  `timed`: the calls timed by their callbacks (GPUACCT_CUPTI_API=callbacks): four
// clock reads and one ring record a launch, drained every 4096 launches as the worker would.
void nested_launches(benchmark::State& state, bool timed) {
  make_recording();
  gpuacct::inject::g_hot.api_calls = timed;
  auto& col = gpuacct::cupti::Collector::instance();
  gpuacct::cupti::CollectorHooks hooks;
  hooks.api_enter = &gpuacct::inject::hook_api_enter;
  hooks.api_exit = &gpuacct::inject::hook_api_exit;
  col.set_hooks_for_testing(hooks);
  const uint32_t rt = gpuacct::cupti::Collector::cbid_cuda_launch_kernel();
  const uint32_t drv = gpuacct::cupti::Collector::cbid_cu_launch_kernel();
  uint32_t corr = 1;
  for (auto _ : state) {
    uint64_t rt_scratch = 0, drv_scratch = 0;
    col.invoke_api_callback_for_testing(true, rt, true, &rt_scratch, corr);
    col.invoke_api_callback_for_testing(false, drv, true, &drv_scratch, corr + 1);
    col.invoke_api_callback_for_testing(false, drv, false, &drv_scratch, corr + 1);
    col.invoke_api_callback_for_testing(true, rt, false, &rt_scratch, corr);
    corr += 2;
    if ((corr & 8191) == 1) drain_all();
    benchmark::DoNotOptimize(rt_scratch);
  }
  gpuacct::inject::g_hot.api_calls = false;
  state.SetItemsProcessed(state.iterations());
}

void BM_LaunchCallbackNested(benchmark::State& state) {
  nested_launches(state, /*timed=*/false);
}
BENCHMARK(BM_LaunchCallbackNested);

void BM_LaunchCallbackTimed(benchmark::State& state) {
  nested_launches(state, /*timed=*/true);
}
BENCHMARK(BM_LaunchCallbackTimed);

void BM_CApiStepMark(benchmark::State& state) {
  make_recording();
  int64_t i = 0;
  for (auto _ : state) {
    gpuacct::inject::emit(gpuacct::inject::now_ns(), HostRecType::kStepMark, i, nullptr);
    if ((++i & 4095) == 0) drain_all();
  }
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_CApiStepMark);

void BM_NvtxPushPop(benchmark::State& state) {
  make_recording();
  int64_t i = 0;
  for (auto _ : state) {
    gpuacct::inject::emit(gpuacct::inject::now_ns(), HostRecType::kNvtxPush, 0, "aten::linear");
    gpuacct::inject::emit(gpuacct::inject::now_ns(), HostRecType::kNvtxPop, 0, nullptr);
    if ((++i & 2047) == 0) drain_all();
  }
  state.SetItemsProcessed(state.iterations() * 2);
}
BENCHMARK(BM_NvtxPushPop);

void BM_ActivityParse(benchmark::State& state) {
  gpuacct::NameTable names;
  gpuacct::cupti::ActivityParser parser(names);
  size_t stride = 0;
  const size_t n = 1 << 16;
  const std::vector<uint8_t> data =
      gpuacct::cupti::ActivityParser::make_synthetic_records(n, &stride);
  gpuacct::EventBatch batch;
  batch.gpu_ops.reserve(n);
  batch.api_calls.reserve(n);
  gpuacct::Stats stats;
  for (auto _ : state) {
    batch.clear();
    parser.parse_records_contiguous(data.data(), n, stride, batch, stats);
    benchmark::DoNotOptimize(batch.gpu_ops.data());
  }
  state.SetItemsProcessed(state.iterations() * static_cast<int64_t>(n));
}
BENCHMARK(BM_ActivityParse);

void BM_SummaryLine(benchmark::State& state) {
  const auto n = static_cast<size_t>(state.range(0));
  std::vector<gpuacct::StepRow> rows(n);
  for (size_t i = 0; i < n; ++i) {
    gpuacct::StepRow& r = rows[i];
    r.step_index = static_cast<int64_t>(i / 8);  // 8 devices
    r.device = static_cast<uint16_t>(i % 8);
    r.warmup = i < 16;
    r.window_begin = static_cast<int64_t>(i / 8) * 100'000'000;
    r.window_end = r.window_begin + 90'000'000 + static_cast<int64_t>(i % 7) * 1'000'000;
    r.cat.compute = 60'000'000;
    r.cat.data_wait = 20'000'000 + static_cast<int64_t>(i % 7) * 1'000'000;
    r.cat.comm_exposed = 8'000'000;
    r.cat.launch_gap = 2'000'000;
    r.gpu_busy = 70'000'000;
    r.kernels = 500;
    r.launches = 520;
  }
  gpuacct::Stats stats;
  stats.set(gpuacct::Stat::gpu_ops_received, 1'000'000);
  gpuacct::RunMetadata meta;
  const gpuacct::AccountingConfig config;
  for (auto _ : state) {
    const std::string line = gpuacct::dump_json(gpuacct::inject::summary_line(
        gpuacct::summary_report(rows, stats, config, meta), static_cast<int64_t>(n), true));
    benchmark::DoNotOptimize(line.data());
  }
  state.SetItemsProcessed(state.iterations() * static_cast<int64_t>(n));
}
BENCHMARK(BM_SummaryLine)->Arg(1000)->Arg(10000)->Arg(100000)->Unit(benchmark::kMicrosecond);

gpuacct::StepRow prom_row(int64_t step, uint16_t device) {
  gpuacct::StepRow r;
  r.step_index = step;
  r.device = device;
  r.window_begin = step * 100'000'000;
  r.window_end = r.window_begin + 90'000'000 + (step % 7) * 1'000'000;
  r.cat.compute = 60'000'000;
  r.cat.data_wait = 20'000'000 + (step % 7) * 1'000'000;
  r.cat.comm_exposed = 8'000'000;
  r.cat.launch_gap = 2'000'000;
  return r;
}

void BM_PromAddRow(benchmark::State& state) {
  gpuacct::PrometheusMetrics metrics;
  int64_t i = 0;
  for (auto _ : state) {
    metrics.add_row(prom_row(i, static_cast<uint16_t>(i % 8)));
    ++i;
  }
  benchmark::DoNotOptimize(metrics.rows());
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_PromAddRow);

void BM_PromWrite(benchmark::State& state) {
  // In $TMPDIR (default /tmp): the cost depends on the file system (docs/metrics.md, *Cost*).
  const char* tmp = std::getenv("TMPDIR");
  std::string dir_name = std::string(tmp != nullptr && *tmp != '\0' ? tmp : "/tmp") +
                         "/gpuacct_prom_bench_XXXXXX";
  char* dir = dir_name.data();
  if (mkdtemp(dir) == nullptr) {
    state.SkipWithError("mkdtemp failed");
    return;
  }
  gpuacct::inject::Config cfg;
  cfg.prom_dir = dir;
  cfg.host = "bench-host";
  cfg.job_id = "bench-job";
  cfg.rank = 0;
  gpuacct::inject::PromOutput out(cfg);
  const auto devices = static_cast<uint16_t>(state.range(0));
  for (int64_t step = 0; step < 100; ++step) {
    for (uint16_t d = 0; d < devices; ++d) out.add_row(prom_row(step, d));
  }
  const gpuacct::Stats stats;
  for (auto _ : state) out.write(stats);
  if (out.enabled()) {
    state.counters["bytes"] = static_cast<double>(std::filesystem::file_size(out.path()));
  } else {
    state.SkipWithError("the metrics file could not be written");
  }
  std::filesystem::remove_all(dir);
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_PromWrite)->Arg(1)->Arg(8)->Unit(benchmark::kMicrosecond);

}  // namespace

BENCHMARK_MAIN();
