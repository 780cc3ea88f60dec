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

// Field by field: the struct's tail padding is whatever the reader's stack held.
bool same(const gpuacct::CollectiveRecord& a, const gpuacct::CollectiveRecord& b) {
  auto name = [](const gpuacct::ShortName& x, const gpuacct::ShortName& y) {
    return std::memcmp(x.text, y.text, sizeof x.text) == 0;
  };
  return a.comm_hash == b.comm_hash && a.seq == b.seq && a.bytes == b.bytes &&
         a.host_enqueue == b.host_enqueue && a.gpu_start == b.gpu_start &&
         a.gpu_end == b.gpu_end && a.correlation_id == b.correlation_id &&
         a.step_index == b.step_index && a.rank == b.rank && a.nranks == b.nranks &&
         a.stream == b.stream && a.device == b.device && a.type == b.type &&
         a.source == b.source && a.kernel_ops == b.kernel_ops && name(a.datatype, b.datatype) &&
         name(a.algo, b.algo) && name(a.proto, b.proto);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace gpuacct;
  const std::string_view bytes(reinterpret_cast<const char*>(data), size);
  int64_t rows = 0;
  auto contents = read_collective_rows_buffer(bytes, "fuzz", [&](const CollectiveRecord& r) {
    ++rows;
    // The columns the writer writes today (kernel_ops was added after the first version).
    const std::string again = "# gpuacct.collectives/1 {}\n" +
                              std::string(collective_rows_columns()) + "\n" +
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
