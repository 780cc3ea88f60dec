// Slow-link blame (docs/job_view.md, *Slow links*): a collective that nobody waited for but
// whose transfer is well above what the link should give.  Pure functions and a small table;
// analysis/job/job_merge.cc feeds them the matched instances.
//
// Expected transfer of an instance (on the job clock, last arrival to end; blame.h):
//   - with a reference bus bandwidth given (`gpuacct job --link-peak-gbs`): bus bytes (bytes x
//     the nccl-tests factor, blame.h bus_bandwidth_factor) over the reference times the
//     protocol's share of the link (link_protocol_efficiency) -- when the record's bytes are
//     known;
//   - else (or bytes unknown) from the job's own best: the instances that share a link group
//     (type, ranks, algorithm, protocol and message size -- a power of two; with bytes unknown,
//     the communicator) give their 10th-percentile transfer per bus byte (the fastest tenth:
//     "the job's own best steps"); an instance is expected to move its bus bytes at that rate.
// An instance is slow on the link when its transfer is >= kSlowLinkRatio x expected and at
// least kSlowLinkFloorNs above it (timestamps, latency: a small collective is never called
// slow by a few microseconds).  Its excess is transfer - expected.
//
// What the step would be at the reference bandwidth (link_gain_ns): per rank, only the part of
// a slow instance that nothing else overlapped shortens the step.  The rank's exposed
// communication (its communication wall) is taken to be the tail of its collectives: walking
// its records from the last end backwards, each takes up to its own duration of what is left;
// a slow instance then gives min(its exposed part, its excess).  The job step at the reference
// is the longest of the ranks' (step - gain).  Exact when the exposed communication is the
// collectives' tails (compute overlaps their beginnings: DDP's buckets, then the last ones
// alone); an overlap in the middle of a collective would be over-counted.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <tuple>
#include <vector>

#include "analysis/job/clock_align.h"
#include "analysis/model/collective.h"

namespace gpuacct {

inline constexpr double kSlowLinkRatio = 1.5;
inline constexpr int64_t kSlowLinkFloorNs = 50'000;
// A step is slow on the link when the link costs it at least this share of the job step.
inline constexpr double kLinkStepShare = 0.01;
// The job's own reference: this percentile of the transfer per bus byte (the fastest tenth).
inline constexpr double kOwnReferencePercentile = 10;

// The share of the link's bus bandwidth a protocol moves data at, as NCCL's own tuning model
// (NVIDIA/nccl src/graph/tuning.cc, ncclTopoTuneModel: ring LL x 1/4 for all-reduce (1/3 for
// the other collectives on one node), LL128 x 0.92 (120 of 128 bytes); tree x 0.9, tree LL a
// further 1/3.8, tree LL128 7/9); 1 for SIMPLE and for an unknown algorithm or protocol.
double link_protocol_efficiency(const CollectiveRecord& record);

// Instances whose transfers are compared with each other (the job's own reference).
struct LinkGroup {
  CollectiveType type = CollectiveType::kNone;
  int nranks = 0;
  std::string algo, proto;
  int size_log2 = -1;  // floor(log2(bytes)); -1: bytes unknown
  uint64_t comm = 0;   // only when bytes are unknown
  bool operator<(const LinkGroup& o) const {
    return std::tie(type, nranks, algo, proto, size_log2, comm) <
           std::tie(o.type, o.nranks, o.algo, o.proto, o.size_log2, o.comm);
  }
};
LinkGroup link_group(const CollectiveRecord& record, int nranks);
// What an instance moves over the link (bytes x the bus factor); 1 when bytes are unknown (the
// reference is then a time per instance).
double bus_bytes(const CollectiveRecord& record, int nranks);

// The expected transfer of an instance: the given reference, else the job's own.
class LinkReference {
 public:
  explicit LinkReference(double given_busbw_gbs = 0) : given_(given_busbw_gbs) {}
  bool given() const { return given_ > 0; }
  double given_gbs() const { return given_; }
  // One matched instance (its first record, the instance's transfer): the job's own sample.
  void add(const CollectiveRecord& record, int nranks, int64_t transfer_ns);
  // Fixes the job's own reference from the samples (call after the last add).
  void finish();
  // Expected transfer in ns (0: no reference for it).
  double expected_ns(const CollectiveRecord& record, int nranks) const;
  // The bus bandwidth the reference expects of it (GB/s; 0: none or bytes unknown).
  double expected_busbw_gbs(const CollectiveRecord& record, int nranks) const;
  void clear() { samples_.clear(), own_.clear(); }

 private:
  double given_;
  std::map<LinkGroup, SampleReservoir> samples_;
  std::map<LinkGroup, double> own_;  // ns per bus byte
};

// One rank's record of an instance in a step, on the job clock, with the instance's excess
// (0 when the instance is not slow on the link).
struct LinkPiece {
  TimeNs start = 0;
  TimeNs end = 0;
  int64_t excess_ns = 0;
};
// How much shorter the rank's step would be at the reference bandwidth (see the top).
int64_t link_gain_ns(std::vector<LinkPiece> pieces, int64_t exposed_comm_ns);

}  // namespace gpuacct
