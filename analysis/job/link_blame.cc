#include "analysis/job/link_blame.h"

#include <strings.h>
#include <algorithm>

#include "analysis/job/blame.h"

namespace gpuacct {
namespace {

// NCCL names them "Ring", "LL128", "Simple" (ncclAlgoStr, ncclProtoStr); other sources in
// capitals.
bool named(const ShortName& n, const char* text) {
  return strcasecmp(n.text, text) == 0;
}

}  // namespace

double link_protocol_efficiency(const CollectiveRecord& r) {
  const bool ring = named(r.algo, "RING");
  const bool tree = named(r.algo, "TREE");
  const bool ll = named(r.proto, "LL");
  const bool ll128 = named(r.proto, "LL128");
  if (ring && ll) {
    const bool reduces = r.type == CollectiveType::kAllReduce || r.type == CollectiveType::kReduce;
    return reduces ? 1.0 / 4.0 : 1.0 / 3.0;
  }
  if (ring && ll128) return 0.92;
  if (tree && ll) return 0.9 / 3.8;
  if (tree && ll128) return 0.9 * 7.0 / 9.0;
  if (tree) return 0.9;
  return 1.0;
}

LinkGroup link_group(const CollectiveRecord& r, int nranks) {
  LinkGroup g;
  g.type = r.type;
  g.nranks = nranks;
  g.algo = r.algo.text;
  g.proto = r.proto.text;
  if (r.bytes > 0) {
    int log2 = 0;
    for (uint64_t b = r.bytes; b > 1; b >>= 1) ++log2;
    g.size_log2 = log2;
  } else {
    g.comm = r.comm_hash;
  }
  return g;
}

double bus_bytes(const CollectiveRecord& r, int nranks) {
  return r.bytes > 0 ? static_cast<double>(r.bytes) * bus_bandwidth_factor(r.type, nranks) : 1.0;
}

void LinkReference::add(const CollectiveRecord& r, int nranks, int64_t transfer_ns) {
  if (transfer_ns <= 0) return;
  auto [it, fresh] = samples_.try_emplace(link_group(r, nranks), 1024);
  it->second.add(static_cast<double>(transfer_ns) / bus_bytes(r, nranks));
}

void LinkReference::finish() {
  own_.clear();
  for (const auto& [group, sample] : samples_) {
    own_[group] = sample.percentile(kOwnReferencePercentile);
  }
}

double LinkReference::expected_ns(const CollectiveRecord& r, int nranks) const {
  if (given() && r.bytes > 0) {
    // bytes per ns is GB/s.
    return bus_bytes(r, nranks) / (given_ * link_protocol_efficiency(r));
  }
  const auto it = own_.find(link_group(r, nranks));
  return it == own_.end() ? 0.0 : it->second * bus_bytes(r, nranks);
}

double LinkReference::expected_busbw_gbs(const CollectiveRecord& r, int nranks) const {
  const double ns = expected_ns(r, nranks);
  return r.bytes > 0 && ns > 0 ? bus_bytes(r, nranks) / ns : 0.0;
}

int64_t link_gain_ns(std::vector<LinkPiece> pieces, int64_t exposed_comm_ns) {
  std::sort(pieces.begin(), pieces.end(),
            [](const LinkPiece& a, const LinkPiece& b) { return a.end > b.end; });
  int64_t left = std::max<int64_t>(0, exposed_comm_ns);
  int64_t gain = 0;
  for (const LinkPiece& p : pieces) {
    if (left <= 0) break;
    const int64_t exposed = std::min(left, std::max<int64_t>(0, p.end - p.start));
    left -= exposed;
    gain += std::min(exposed, std::max<int64_t>(0, p.excess_ns));
  }
  return gain;
}

}  // namespace gpuacct
