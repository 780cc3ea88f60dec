// Hosts of ranks whose inputs carry no host name (docs/job_view.md, *Hosts*): a trace, or
// rows whose writer could not name its host.  Never one host per rank by default: the hosts are
// inferred from what the ranks give away, and marked so, or said to be unknown.
//
//   - clock offsets: each such rank is first aligned as a clock of its own (clock_align.h);
//     ranks of one host read one clock, so ranks whose offsets agree within the tolerance are
//     one clock group, and ranks of different groups are on different hosts.  Hosts whose
//     clocks agree that closely (PTP) fall into one group: a group may be several hosts.
//   - the device layout: under torchrun (and most launchers) the ranks of a host are
//     consecutive and use devices 0, 1, ... (LOCAL_RANK): in rank order, a device number that
//     does not grow starts a host.  Only when some block has two ranks or more (ranks that each
//     see one device -- CUDA_VISIBLE_DEVICES per rank -- all say device 0 and tell nothing).
//   - both: a host is a clock group and a layout block at once.
// One clock group and no layout: unknown (a count of hosts is not claimed).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace gpuacct {

struct HostInference {
  // "clock offsets", "the device layout", "clock offsets and the device layout"; empty:
  // unknown.
  std::string basis;
  int count = 0;             // 0: unknown
  std::vector<int> host_of;  // per rank given (host 0, 1, ... in rank order); empty: unknown
};

// `ranks`: the ranks' ids; `offsets_ns`: each one's clock offset as a clock of its own
// (nullopt: not aligned); `devices`: the device it ran on (-1: unknown).  Offsets within
// `tolerance_ns` of the previous (sorted) are one clock.
HostInference infer_hosts(const std::vector<int>& ranks,
                          const std::vector<std::optional<int64_t>>& offsets_ns,
                          const std::vector<int>& devices, int64_t tolerance_ns);

}  // namespace gpuacct
