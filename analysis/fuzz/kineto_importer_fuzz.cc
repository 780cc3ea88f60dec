// libFuzzer target: arbitrary bytes (plain or gzip) through the Kineto importer, then through
// everything that consumes its events (HTA totals, the step accountant, the timeline writer).
// Any crash, sanitizer report, leak or hang is a bug: the importer must reject bad input with
// a Status, never abort.
//
//   CC=clang-14 CXX=clang++-14 cmake -S . -B build-fuzz -DGPUACCT_BUILD_FUZZ=ON ...
//   build-fuzz/analysis/fuzz/kineto_importer_fuzz -max_total_time=300 \
//       -dict=analysis/fuzz/kineto.dict corpus_work/ analysis/fuzz/corpus/
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "analysis/accounting/step_accountant.h"
#include "analysis/import/kineto_importer.h"
#include "analysis/report/timeline_writer.h"
#include "analysis/report/trace_totals.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace gpuacct;
  NameTable names;
  StepAccountant acc;
  TraceTotals totals(names);
  TimelineWriter timeline(names);
  acc.set_segment_sink([&](const CategorySegment& s) { timeline.on_segment(s); });
  acc.set_row_sink([&](const StepRow& r) { timeline.on_step_row(r); });
  TeeSink tee({&acc, &totals, &timeline});
  auto meta = import_kineto_buffer(std::string_view(reinterpret_cast<const char*>(data), size),
                                   names, tee, acc.mutable_stats());
  acc.finish();
  if (meta.ok()) {
    timeline.set_metadata(meta.value());
    (void)totals.to_json().dump();
    (void)timeline.to_json();
  } else if (meta.status().message().empty()) {
    __builtin_trap();  // an error must always say what is wrong
  }
  return 0;
}
