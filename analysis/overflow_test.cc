// Arithmetic at the ends of int64.  Times and durations come from files and other processes; a
// corrupt record can hold any value, and sums and differences of them must never overflow
// (undefined behaviour).  The cases here were found by the recording fuzzer; under the
// sanitizer build (scripts/test.sh --sanitize=address,undefined) and in the fuzz smoke tests
// they fail as UBSan reports when the arithmetic is not guarded.
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "analysis/input/input.h"
#include "analysis/model/events.h"
#include "analysis/model/json_text.h"
#include "analysis/report/report.h"
#include "analysis/report/run_summary.h"
#include "analysis/report/timeline_writer.h"

namespace gpuacct {
namespace {

TEST(Overflow, SaturatingArithmetic) {
  EXPECT_EQ(saturating_add(INT64_MAX, 1), INT64_MAX);
  EXPECT_EQ(saturating_add(INT64_MIN, -1), INT64_MIN);
  EXPECT_EQ(saturating_add(5, -7), -2);
  EXPECT_EQ(saturating_sub(INT64_MIN, 1), INT64_MIN);
  EXPECT_EQ(saturating_sub(INT64_MAX, -1), INT64_MAX);
  EXPECT_EQ(saturating_sub(-8460120759347774428, 1700000000001786557), INT64_MIN);
  EXPECT_EQ(saturating_sub(7, 9), -2);
}

// Windows of almost 2^63 ns each (valid for the accountant) on several steps: the run summary's
// sums over rows saturate (they wrapped to negative totals and shares).
TEST(Overflow, RunSummaryOfHugeWindowsSaturates) {
  std::vector<StepRow> rows;
  for (int64_t i = 0; i < 3; ++i) {
    StepRow r;
    r.step_index = i;
    r.window_begin = -(int64_t{1} << 62);
    r.window_end = (int64_t{1} << 62) - 1;
    r.cat.compute = r.duration() / 2;
    r.cat.data_wait = r.duration() - r.cat.compute;
    r.gpu_busy = r.cat.compute;
    r.comm_total = r.cat.compute;
    rows.push_back(r);
  }
  const RunSummary s = summarize(rows, Stats{});
  EXPECT_EQ(s.categories.compute, INT64_MAX);
  EXPECT_EQ(s.categories.data_wait, INT64_MAX);
  EXPECT_EQ(s.walls.total_ns, INT64_MAX);
  EXPECT_EQ(s.gpu_busy_ns, INT64_MAX);
  EXPECT_EQ(s.comm_total_ns, INT64_MAX);
  for (double share : s.walls.share) EXPECT_TRUE(share >= 0 && share <= 1) << share;
}

// Every regress_* input of the recording fuzzer's corpus, through what `gpuacct analyze` and
// `gpuacct timeline` do with a recording (the front door, as the fuzz target runs it).
TEST(Overflow, FuzzerFindingsReplay) {
  const std::filesystem::path corpus =
      std::filesystem::path(GPUACCT_SOURCE_DIR) / "analysis/fuzz/recording_corpus";
  int replayed = 0;
  for (const auto& entry : std::filesystem::directory_iterator(corpus)) {
    if (entry.path().filename().string().rfind("regress_", 0) != 0) continue;
    std::ifstream in(entry.path(), std::ios::binary);
    const std::string bytes((std::istreambuf_iterator<char>(in)), {});
    NameTable names;
    TimelineWriter timeline(names);
    AccountingObservers observers;
    observers.events = &timeline;
    observers.on_row = [&](const StepRow& r) { timeline.on_step_row(r); };
    observers.on_segment = [&](const CategorySegment& s) { timeline.on_segment(s); };
    const Input input = Input::from_buffer(bytes, entry.path().string(), InputFormat::kRecording);
    auto accounted = account_input(input, AccountingConfig{}, names, {}, observers);
    ASSERT_TRUE(accounted.ok()) << accounted.status().message();
    const InputContents& contents = accounted->contents;
    EXPECT_FALSE(
        dump_json(build_report(*accounted->accountant, contents.metadata, names, ReportParts{contents.sections, {}}))
            .empty());
    timeline.set_metadata(contents.metadata);
    EXPECT_FALSE(timeline.to_json().empty());
    ++replayed;
  }
  EXPECT_GE(replayed, 2);
}

}  // namespace
}  // namespace gpuacct
