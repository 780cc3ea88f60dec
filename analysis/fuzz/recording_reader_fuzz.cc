// libFuzzer target: arbitrary bytes through the recording reader, then through everything that
// consumes a recording's events the way `gpuacct analyze` and `gpuacct timeline` do (the front
// door: step detection, the step accountant; then the report and the timeline writer).  Any crash,
// sanitizer report, leak or hang is a bug: the reader must reject bad input with a Status, never
// abort. Version-1 files have no checksums, so the fuzzer reaches every decoder through them; the
// seed corpus holds version-2 files for the checksum path.
//
//   CC=clang CXX=clang++ cmake -S . -B build-fuzz -DGPUACCT_BUILD_FUZZ=ON ...
//   build-fuzz/analysis/fuzz/recording_reader_fuzz -max_total_time=600 \
//       -dict=analysis/fuzz/recording.dict corpus_work/ analysis/fuzz/recording_corpus/
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "analysis/input/input.h"
#include "analysis/model/json_text.h"
#include "analysis/report/report.h"
#include "analysis/report/timeline_writer.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace gpuacct;
  NameTable names;
  TimelineWriter timeline(names);
  AccountingObservers observers = timeline_observers(timeline);
  // The collectives too (identity, step assignment): a step index is a step or -1.
  observers.on_collective = [](const CollectiveRecord& r) {
    if (r.step_index < -1) __builtin_trap();
  };
  const Input input = Input::from_buffer(
      std::string_view(reinterpret_cast<const char*>(data), size), "fuzz", InputFormat::kRecording);
  auto accounted = account_input(input, AccountingConfig{}, names, {}, observers);
  if (!accounted.ok()) {
    if (accounted.status().message().empty()) __builtin_trap();  // an error must say what
    return 0;
  }
  const InputContents& contents = accounted->contents;
  timeline.set_metadata(contents.metadata);
  (void)dump_json(
      build_report(*accounted->accountant, contents.metadata, names, ReportParts{contents.sections, {}}));
  (void)timeline.to_json();
  return 0;
}
