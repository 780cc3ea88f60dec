// libFuzzer target: arbitrary bytes through the collectives rows reader
// (analysis/model/collective_rows.h).  Any crash, sanitizer report or hang is a bug: bad input
// is an error Status or counted bad lines.  Every row it takes must read back the same after
// it is written again (collective_row_csv): what the reader accepts, the writer can say.
//
//   build-fuzz/analysis/fuzz/collective_rows_fuzz -max_total_time=600 \
//       -dict=analysis/fuzz/collective_rows.dict corpus_work/ analysis/fuzz/collective_rows_corpus/
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>

#include "analysis/model/collective_rows.h"

namespace {

bool same(const gpuacct::CollectiveRecord& a, const gpuacct::CollectiveRecord& b) {
  return std::memcmp(&a, &b, sizeof(a)) == 0;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace gpuacct;
  const std::string_view bytes(reinterpret_cast<const char*>(data), size);
  int64_t rows = 0;
  auto contents = read_collective_rows_buffer(bytes, "fuzz", [&](const CollectiveRecord& r) {
    ++rows;
    const std::string again = "# gpuacct.collectives/1 {}\n"
                              "step_index,comm,seq,collective,bytes,datatype,algo,proto,rank,"
                              "nranks,device,stream,host_enqueue_ns,gpu_start_ns,gpu_end_ns,"
                              "source\n" +
                              collective_row_csv(r) + "\n";
    int64_t back = 0;
    auto reread = read_collective_rows_buffer(again, "again", [&](const CollectiveRecord& b) {
      ++back;
      if (!same(r, b)) __builtin_trap();
    });
    if (!reread.ok() || back != 1 || reread->bad_lines != 0) __builtin_trap();
  });
  if (!contents.ok()) {
    if (contents.status().message().empty()) __builtin_trap();  // an error must say what
    return 0;
  }
  if (contents->rows_read != rows || contents->bad_lines < 0) __builtin_trap();
  return 0;
}
