#include "analysis/step_detection.h"

#include <gtest/gtest.h>

#include "analysis/step_accountant.h"
#include "analysis/synthetic.h"

namespace gpuacct {
namespace {

// A whole recording that marks no steps gets exactly its loop's steps back.
TEST(OfflineStepDetection, FindsTheStepsOfAnUnmarkedLoop) {
  for (const char* preset : {"data_bound", "launch_bound", "comm_bound", "balanced", "demo"}) {
    NameTable names;
    AccountingConfig cfg;
    cfg.warmup_steps = 0;
    StepAccountant acc(cfg);
    OfflineStepDetection detection;
    TeeSink tee({&acc, &detection});
    auto spec = SyntheticSpec::preset(preset);
    ASSERT_TRUE(spec.ok());
    spec->steps = 12;
    spec->emit_steps = false;
    generate_synthetic(*spec, names, tee);
    ASSERT_FALSE(detection.input_marks_steps());
    for (const Marker& m : detection.detect()) acc.add_marker(m);
    acc.finish();
    EXPECT_TRUE(detection.detector().locked()) << preset;
    EXPECT_EQ(acc.rows().size(), 12u) << preset;
    for (const StepRow& r : acc.rows()) EXPECT_EQ(r.cat.sum(), r.duration());
  }
}

// An input with its own steps is left alone.
TEST(OfflineStepDetection, InputWithStepsIsLeftAlone) {
  NameTable names;
  OfflineStepDetection detection;
  auto spec = SyntheticSpec::preset("balanced");
  spec->steps = 6;
  generate_synthetic(*spec, names, detection);
  EXPECT_TRUE(detection.input_marks_steps());
  EXPECT_TRUE(detection.detect().empty());
}

// A burst of one op repeated back to back is not a training step, and neither is a pattern
// that covers only a small part of the run: no lock, rather than nonsense steps.
TEST(OfflineStepDetection, NoLockOnOneOpBurstsOrMinorPatterns) {
  NameTable names;
  OfflineStepDetection detection;
  const NameId sync = names.intern("cudaEventSynchronize");
  const NameId k = names.intern("kernel");
  TimeNs t = 0;
  uint64_t corr = 1;
  for (int i = 0; i < 30; ++i) {  // 30 syncs back to back
    detection.on_api_call(HostApiCall{t, t + 100, corr++, 1, sync, HostApiKind::kSync, {}});
    t += 1000;
  }
  for (int i = 0; i < 200; ++i) {  // then irregular work: kernel names all different
    const NameId n = names.intern("k" + std::to_string(i));
    detection.on_api_call(HostApiCall{t, t + 10, corr, 1, k, HostApiKind::kLaunch, {}});
    GpuOp op;
    op.start = t + 20;
    op.end = t + 50;
    op.correlation_id = corr++;
    op.name = n;
    detection.on_gpu_op(op);
    t += 100;
  }
  EXPECT_TRUE(detection.detect().empty());
  EXPECT_FALSE(detection.detector().locked());
}

}  // namespace
}  // namespace gpuacct
