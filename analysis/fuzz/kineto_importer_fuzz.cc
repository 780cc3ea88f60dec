// libFuzzer target: arbitrary bytes (plain or gzip) through the Kineto importer by the front
// door (HTA totals, step detection, the step accountant), then the report and the timeline.
// Any crash, sanitizer report, leak or hang is a bug: the importer must reject bad input with
// a Status, never abort.
//
//   CC=clang-14 CXX=clang++-14 cmake -S . -B build-fuzz -DGPUACCT_BUILD_FUZZ=ON ...
//   build-fuzz/analysis/fuzz/kineto_importer_fuzz -max_total_time=300 \
//       -dict=analysis/fuzz/kineto.dict corpus_work/ analysis/fuzz/corpus/
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
      std::string_view(reinterpret_cast<const char*>(data), size), "", InputFormat::kKinetoTrace);
  auto accounted = account_input(input, AccountingConfig{}, names, {}, observers);
  if (accounted.ok()) {
    const InputContents& contents = accounted->contents;
    timeline.set_metadata(contents.metadata);
    (void)dump_json(
        build_report(*accounted->accountant, contents.metadata, names, ReportParts{contents.sections, {}}));
    (void)timeline.to_json();
  } else if (accounted.status().message().empty()) {
    __builtin_trap();  // an error must always say what is wrong
  }
  return 0;
}
