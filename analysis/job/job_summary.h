// The job view's result: per-rank rows, the collective-type table, per-step blame (bounded),
// clock offsets and residuals, the headline and the per-rank corrections; job.json and the
// terminal text (docs/job_view.md, *Job summary*).
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "analysis/accounting/taxonomy.h"
#include "analysis/job/blame.h"
#include "analysis/job/clock_align.h"
#include "analysis/model/events.h"

namespace gpuacct {

inline constexpr const char* kJobSchema = "gpuacct.job/1";

// How waiting was told from transfer.
inline constexpr const char* kMethodCollectives = "collectives";  // matched instances (blame.h)
// No collective rows: per step, the least exposed communication across ranks is the transfer
// floor and each rank's excess is waiting; the rank with the most non-communication work is
// the late one (the only thing step rows can say; it cannot see a slow link).
inline constexpr const char* kMethodStepRowsFloor = "step_rows_floor";
// Both: matched instances where they can be trusted, the floor for the steps whose
// collectives could not be matched (job_merge.h, *Matching*).
inline constexpr const char* kMethodMixed = "collectives+step_rows_floor";

// Collectives that were not matched across ranks, per rank and type and reason: what each
// rank ran, without a split into waiting and transfer.
inline constexpr const char* kUnmatchedNoPeer = "p2p_without_peer";
inline constexpr const char* kUnmatchedImplausible = "implausible_matching";
struct UnmatchedCollectiveRow {
  int rank = -1;
  CollectiveType type = CollectiveType::kNone;
  const char* reason = kUnmatchedNoPeer;
  int64_t records = 0;
  int64_t duration_ns = 0;  // sum of gpu_end - gpu_start (records with both)
  int64_t timed = 0;        // records with both times
  uint64_t bytes = 0;       // sum over records with bytes known
  int64_t bytes_known = 0;
};

struct JobRankResult {
  int rank = -1;
  std::string label;
  std::string host;
  int host_index = -1;
  int64_t clock_offset_ns = 0;  // subtracted from its times
  std::string verdict_bound;    // its own verdict, when its report said
  std::string step_source;
  // Summary steps (not warm-up) and their sums, first device.
  int64_t steps = 0;
  int64_t step_ns = 0;
  WallBreakdown walls;
  // Collectives (summary steps).
  int64_t instances = 0;
  int64_t waited_ns = 0;    // waiting for a later rank
  int64_t transfer_ns = 0;  // its own transfers
  int64_t late_ns = 0;      // lateness it cost the others (instances where it came last)
  int64_t last_count = 0;   // instances where it came last
  std::array<int64_t, 16> last_by_type{};  // by CollectiveType
  std::array<int64_t, 16> instances_by_type{};
  std::map<int, int64_t> waited_for;       // by the rank it waited for
  std::array<int64_t, kWallCount> late_attributed{};  // step blame: its lateness by wall
  int64_t late_unexplained_ns = 0;
  int64_t late_steps = 0;  // steps where it was the late rank
  bool slow_link = false;  // its transfers are well above the job median (see job_summary.cc)
  double transfer_ratio = 0;  // its mean transfer / the median rank's
};

struct CollectiveTypeRow {
  CollectiveType type = CollectiveType::kNone;
  int64_t instances = 0;
  int64_t incomplete = 0;           // instances some of whose ranks had no record
  int64_t transfer_ns = 0;          // sum of instance transfers
  // Instances with an expected transfer (link_blame.h): their count, expected and actual
  // transfers, the bus bandwidth expected of those with bytes; and how many were slow.
  int64_t expected_instances = 0;
  int64_t expected_ns = 0, expected_transfer_ns = 0;
  double expected_busbw_sum = 0;
  int64_t expected_busbw_instances = 0;
  int64_t slow = 0;
  int64_t wait_ns = 0;              // sum over rank records of waits
  int64_t rank_records = 0;
  int64_t lateness_ns = 0;          // sum of instance lateness
  double busbw_gbs_sum = 0;         // over instances with bytes and a transfer
  int64_t busbw_instances = 0;
};

struct JobHost {
  std::string name;
  std::vector<int> ranks;
  int64_t offset_ns = 0;
  bool aligned = false;  // shared an instance with another host
  bool inferred = false;  // no host name: inferred (job_hosts.h), or a rank's own clock
};

// One step's link blame (link_blame.h).
struct LinkStep {
  int64_t step_index = 0;
  int64_t job_step_ns = 0;
  int64_t what_if_step_ns = 0;  // the job step at the reference bandwidth
  int64_t slow_instances = 0;
  double slowest_ratio = 0;  // the largest transfer / expected of its slow instances
};

// Slow-link blame over the summary steps (docs/job_view.md, *Slow links*).
struct JobLink {
  double reference_gbs = 0;    // the given reference (--link-peak-gbs); 0: the job's own best
  int64_t instances = 0;       // summary instances with an expected transfer
  int64_t slow_instances = 0;  // of those, slow on the link
  std::array<int64_t, 16> slow_by_type{};
  int64_t slow_transfer_ns = 0, slow_expected_ns = 0;      // sums over the slow instances
  double slow_busbw_sum = 0, slow_expected_busbw_sum = 0;  // over slow instances with bytes
  int64_t slow_busbw_instances = 0;
  std::string algo, proto;      // of the first slow instance (empty: unknown)
  int64_t steps_slow = 0;       // summary steps the link costs >= kLinkStepShare of
  int64_t what_if_step_ns = 0;  // sum over summary steps of the job step at the reference
  std::vector<LinkStep> worst;  // the steps the link costs most, most first (bounded)
  bool blamed = false;          // finish_job_summary: the link is a wall of this job
};

struct JobView {
  std::string job_id;
  int world_size = 0;
  std::string method = kMethodCollectives;
  std::vector<JobRankResult> ranks;
  std::vector<JobHost> hosts;  // the clocks: one per host, or per rank whose host is unknown
  // How many hosts, and how that is known: "hostnames", "inferred from <job_hosts.h basis>",
  // or "unknown" (host_count -1).
  int host_count = 0;
  std::string host_basis = "hostnames";
  // An instance whose last arrival is within this of the second-latest has no last rank (a
  // tie: nobody made the others wait): 1 us on one clock, more where clocks were aligned.
  int64_t tie_ns = 1000;
  ClockAlignment alignment;
  // The residual: the spread (last - first) of the aligned ends of each instance.
  SampleReservoir residual_sample;
  double residual_p50_ns = 0, residual_p99_ns = 0;
  int64_t residual_instances = 0;
  std::vector<CollectiveTypeRow> types;  // by CollectiveType
  double link_peak_gbs = 0;               // JobOptions::link_peak_gbs (0 = unknown)
  int64_t instances = 0, incomplete_instances = 0, duplicate_records = 0;
  int64_t clock_suspect_records = 0;  // ends before the last arrival, after alignment
  int64_t records_without_times = 0;
  // Steps.
  int64_t steps = 0;  // summary steps with rows from >= 2 ranks
  int64_t blamed_steps = 0;  // of those, steps where some rank was late
  int64_t job_step_ns = 0;
  // The job step had the rank that stands out (the headline's) arrived with the others; the
  // job step itself when no rank stands out (finish_job_summary: nothing to remove).
  int64_t what_if_step_ns = 0;
  SampleReservoir job_step_sample;
  JobLink link;
  std::vector<StepBlame> top_steps;  // the steps with the most lateness, most first
  size_t top_steps_limit = 10;
  // Matching: what could not be matched, and why (one line each).
  std::vector<UnmatchedCollectiveRow> unmatched;  // by rank slot, then type, then reason
  std::vector<std::string> matching_notes;
  int64_t communicators_checked = 0, communicators_unreliable = 0;
  int64_t floor_steps = 0;  // summary steps blamed by the floor (method mixed or floor)
  // Findings.
  std::string headline;
  std::vector<std::string> corrections;  // "rank 0: communication 61% is waiting for rank 2"
  std::vector<std::string> slow_links;
  std::vector<std::string> problems;
};

// The headline, corrections and slow links from the numbers the merge filled in.
void finish_job_summary(JobView* view);
nlohmann::json job_view_to_json(const JobView& view);
std::string render_job_view(const JobView& view);

}  // namespace gpuacct
