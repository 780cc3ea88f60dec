// libFuzzer target: arbitrary bytes through the recording reader, then through everything that
// consumes a recording's events the way `gpuacct analyze` and `gpuacct timeline` do (offline
// step detection, the step accountant, the report, the timeline writer).  Any crash, sanitizer
// report, leak or hang is a bug: the reader must reject bad input with a Status, never abort.
// Version-1 files have no checksums, so the fuzzer reaches every decoder through them; the
// seed corpus holds version-2 files for the checksum path.
//
//   CC=clang CXX=clang++ cmake -S . -B build-fuzz -DGPUACCT_BUILD_FUZZ=ON ...
//   build-fuzz/analysis/fuzz/recording_reader_fuzz -max_total_time=600 \
//       -dict=analysis/fuzz/recording.dict corpus_work/ analysis/fuzz/recording_corpus/
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "analysis/accounting/step_accountant.h"
#include "analysis/accounting/step_detection.h"
#include "analysis/import/recording.h"
#include "analysis/report/report.h"
#include "analysis/report/timeline_writer.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace gpuacct;
  NameTable names;
  StepAccountant acc;
  TimelineWriter timeline(names);
  OfflineStepDetection detection;
  acc.set_segment_sink([&](const CategorySegment& s) { timeline.on_segment(s); });
  acc.set_row_sink([&](const StepRow& r) { timeline.on_step_row(r); });
  TeeSink tee({&acc, &timeline, &detection});
  auto contents = read_recording_buffer(std::string_view(reinterpret_cast<const char*>(data), size),
                                        "fuzz", names, tee, acc.mutable_stats());
  if (!contents.ok()) {
    if (contents.status().message().empty()) __builtin_trap();  // an error must say what
    return 0;
  }
  if (!detection.input_marks_steps()) {
    for (const HostRange& r : detection.detect(names.intern("step (detected)")).steps)
      acc.add_range(r);
  }
  acc.finish();
  timeline.set_metadata(contents->metadata);
  (void)build_report(acc, contents->metadata, names).dump();
  (void)timeline.to_json();
  return 0;
}
