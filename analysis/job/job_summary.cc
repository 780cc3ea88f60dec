#include "analysis/job/job_summary.h"

#include <algorithm>
#include <cctype>
#include <cstdarg>
#include <cstdio>
#include <sstream>

#include "analysis/job/link_blame.h"
#include "analysis/model/json_text.h"
#include "analysis/report/run_summary.h"

namespace gpuacct {
namespace {

using nlohmann::json;

double ms(double ns) { return ns / 1e6; }
// A type's mean bus bandwidth over the instances that have one (GB/s; 0 when none does).
double mean_busbw(const CollectiveTypeRow& t) {
  return t.busbw_instances > 0 ? t.busbw_gbs_sum / static_cast<double>(t.busbw_instances) : 0.0;
}
double per(int64_t total, int64_t count) {
  return count > 0 ? static_cast<double>(total) / static_cast<double>(count) : 0.0;
}

std::string format(const char* f, ...) __attribute__((format(printf, 1, 2)));
std::string format(const char* f, ...) {
  char buf[512];
  va_list args;
  va_start(args, f);
  std::vsnprintf(buf, sizeof buf, f, args);
  va_end(args);
  return buf;
}

// How a wall reads as what a late rank was doing instead of arriving.
const char* doing(Wall w) {
  switch (w) {
    case Wall::kData:
      return "data wait";
    case Wall::kLaunch:
      return "launch gaps";
    case Wall::kOther:
      return "host work (other)";
    case Wall::kCompute:
      return "extra compute";
    case Wall::kCommunication:
      break;
  }
  return "communication";
}

size_t top_index(const std::array<int64_t, kWallCount>& a) {
  size_t top = 0;
  for (size_t i = 1; i < a.size(); ++i) {
    if (a[i] > a[top]) top = i;
  }
  return top;
}

const JobRankResult* find_rank(const JobView& v, int rank) {
  for (const JobRankResult& r : v.ranks) {
    if (r.rank == rank) return &r;
  }
  return nullptr;
}

// A rank's main cause of lateness, "(data)", or "" when it has none.
std::string cause_of(const JobRankResult& r) {
  const size_t top = top_index(r.late_attributed);
  if (r.late_attributed[top] <= 0) return "";
  return std::string(" (") + to_string(static_cast<Wall>(top)) + ")";
}

std::string pluralise(CollectiveType t) {
  std::string name = to_string(t);
  std::transform(name.begin(), name.end(), name.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  if (name == "allreduce") return "all-reduces";
  if (name == "allgather") return "all-gathers";
  if (name == "reducescatter") return "reduce-scatters";
  if (name == "alltoall") return "all-to-alls";
  return name + "s";
}

void find_slow_links(JobView* v) {
  std::vector<double> means;
  for (JobRankResult& r : v->ranks) {
    if (r.instances > 0) means.push_back(per(r.transfer_ns, r.instances));
  }
  if (means.size() < 3 || v->method == kMethodStepRowsFloor) return;
  const double median = percentile(means, 50);
  if (median <= 0) return;
  // A slow link: its own transfers take 1.5x the median rank's while it is not the one others
  // wait for -- time it spends moving data, not waiting (and not making others wait).
  for (JobRankResult& r : v->ranks) {
    if (r.instances == 0) continue;
    r.transfer_ratio = per(r.transfer_ns, r.instances) / median;
    if (r.transfer_ratio < 1.5) continue;
    r.slow_link = true;
    v->slow_links.push_back(format(
        "rank %d: slow link: its transfers take %.1fx the median rank's (%.3f vs %.3f ms per "
        "collective); it waits %.3f ms per collective for others",
        r.rank, r.transfer_ratio, ms(per(r.transfer_ns, r.instances)), ms(median),
        ms(per(r.waited_ns, r.instances))));
  }
}

// A late rank stands out when it is the late rank of more than half the steps where anyone
// was late (steps without collectives have nobody to wait for) and costs the others, in those
// steps, a noticeable share of the step: 1% with matched collectives (lateness is measured),
// 3% from step rows alone (the floor's estimate is coarser; the cross-rank rule it replaces).
// From step rows alone every step has a busiest rank, so all steps count (the old rule).
int64_t judged_steps(const JobView& v) {
  return v.method != kMethodStepRowsFloor ? v.blamed_steps : v.steps;
}

bool stands_out(const JobView& v, const JobRankResult* top, double job_step_ms) {
  if (top == nullptr || top->late_steps * 2 <= judged_steps(v)) return false;
  const double share = v.method != kMethodStepRowsFloor ? 0.01 : 0.03;
  return ms(per(top->late_ns, judged_steps(v))) >= share * job_step_ms;
}

// Per-rank rows of job.json: means per summary step.
json ranks_json(const JobView& v) {
  json ranks = json::array();
  for (const JobRankResult& r : v.ranks) {
    json walls = json::object();
    json late_by_wall = json::object();
    for (const WallInfo& w : kWalls) {
      walls[std::string(w.name)] = ms(per(r.walls[w.wall], r.steps));
      late_by_wall[std::string(w.name)] =
          ms(per(r.late_attributed[static_cast<size_t>(w.wall)], r.steps));
    }
    json waited_for = json::object();
    for (const auto& [rank, ns] : r.waited_for) waited_for[std::to_string(rank)] = ms(per(ns, r.steps));
    ranks.push_back({{"rank", r.rank},
                     {"label", json_safe_utf8(r.label)},
                     {"host", json_safe_utf8(r.host)},
                     {"clock_offset_ns", r.clock_offset_ns},
                     {"step_source", r.step_source},
                     {"verdict", r.verdict_bound},
                     {"steps", r.steps},
                     {"step_ms", ms(per(r.step_ns, r.steps))},
                     {"walls_ms", walls},
                     {"collectives", r.instances},
                     {"waited_ms", ms(per(r.waited_ns, r.steps))},
                     {"transfer_ms", ms(per(r.transfer_ns, r.steps))},
                     {"late_ms", ms(per(r.late_ns, r.steps))},
                     {"late_by_wall_ms", late_by_wall},
                     {"late_unexplained_ms", ms(per(r.late_unexplained_ns, r.steps))},
                     {"last_arrivals", r.last_count},
                     {"late_steps", r.late_steps},
                     {"waited_for_ms", waited_for},
                     {"transfer_ratio", r.transfer_ratio},
                     {"slow_link", r.slow_link}});
  }
  return ranks;
}

std::string worst_steps(const JobLink& link, size_t shown) {
  std::string out;
  for (size_t i = 0; i < link.worst.size() && i < shown; ++i) {
    out += (i > 0 ? ", " : "") + std::to_string(link.worst[i].step_index);
  }
  return out;
}

// What the slow transfers were: "AllReduce (RING/SIMPLE) at 25.0 GB/s bus bandwidth, 50% of the
// 50.0 GB/s reference (--link-peak-gbs)".
std::string link_what(const JobView& v) {
  const JobLink& l = v.link;
  size_t type = 0;
  for (size_t t = 1; t < l.slow_by_type.size(); ++t) {
    if (l.slow_by_type[t] > l.slow_by_type[type]) type = t;
  }
  std::string out = to_string(static_cast<CollectiveType>(type));
  if (!l.algo.empty() || !l.proto.empty()) {
    out += " (" + (l.algo.empty() ? std::string("?") : l.algo) + "/" +
           (l.proto.empty() ? std::string("?") : l.proto) + ")";
  }
  out += format(" transfers take %.1fx the expected time",
                static_cast<double>(l.slow_transfer_ns) /
                    static_cast<double>(std::max<int64_t>(1, l.slow_expected_ns)));
  if (l.slow_busbw_instances > 0) {
    out += format(
        ": %.1f GB/s bus bandwidth, %.0f%% of the %.1f GB/s %s",
        l.slow_busbw_sum / static_cast<double>(l.slow_busbw_instances),
        100.0 * l.slow_busbw_sum / l.slow_expected_busbw_sum,
        l.slow_expected_busbw_sum / static_cast<double>(l.slow_busbw_instances),
        l.reference_gbs > 0 ? "expected (--link-peak-gbs)" : "its own fastest transfers reach");
  }
  return out;
}

// Whether the link is a wall of the job (steps it costs >= kLinkStepShare, on average too);
// its line in slow_links.  Returns what it costs per step (ms).
double judge_link(JobView* v, double job_step_ms) {
  JobLink& l = v->link;
  l.reference_gbs = v->link_peak_gbs;
  if (v->steps == 0 || l.steps_slow == 0) return 0;
  const double what_if_ms = ms(per(l.what_if_step_ns, v->steps));
  const double gain = job_step_ms - what_if_ms;
  if (gain < kLinkStepShare * job_step_ms) return 0;
  l.blamed = true;
  v->slow_links.insert(
      v->slow_links.begin(),
      format("the link: %lld of %lld steps lose %.2f ms on average to slow transfers (%s); "
             "worst steps %s; at the reference bandwidth the job step would be %.2f ms instead "
             "of %.2f",
             static_cast<long long>(l.steps_slow), static_cast<long long>(v->steps), gain,
             link_what(*v).c_str(), worst_steps(l, 5).c_str(), what_if_ms, job_step_ms));
  return gain;
}

std::string link_headline(const JobView& v, double job_step_ms) {
  const JobLink& l = v.link;
  return format(
      "the link is the wall in %lld of %lld steps: %s; at the reference bandwidth the "
      "job step would be %.2f ms instead of %.2f (worst steps: %s)",
      static_cast<long long>(l.steps_slow), static_cast<long long>(v.steps), link_what(v).c_str(),
      ms(per(l.what_if_step_ns, v.steps)), job_step_ms, worst_steps(l, 3).c_str());
}

}  // namespace

void finish_job_summary(JobView* v) {
  find_slow_links(v);
  const double job_step_ms = ms(per(v->job_step_ns, v->steps));
  const JobRankResult* top = nullptr;
  for (const JobRankResult& r : v->ranks) {
    if (r.late_ns > 0 && (top == nullptr || r.late_ns > top->late_ns)) top = &r;
  }
  const double late_ms = top != nullptr ? ms(per(top->late_ns, v->steps)) : 0;
  const bool straggler = v->steps > 0 && stands_out(*v, top, job_step_ms);
  // The what-if removes only what stands out: with no rank to blame it is the job step.
  v->what_if_step_ns = v->job_step_ns - (straggler ? top->late_ns : 0);
  const double link_gain_ms = judge_link(v, job_step_ms);
  if (v->steps == 0) {
    v->headline = v->ranks.size() < 2 ? "one rank: nothing to compare"
                                      : "the ranks share no step: nothing to compare";
  } else if (v->link.blamed && (!straggler || link_gain_ms >= late_ms)) {
    v->headline = link_headline(*v, job_step_ms);
  } else if (straggler) {
    std::string where;
    if (v->method != kMethodStepRowsFloor && top->last_count > 0) {
      size_t type = 0;
      for (size_t t = 1; t < top->last_by_type.size(); ++t) {
        if (top->last_by_type[t] > top->last_by_type[type]) type = t;
      }
      where = format("arrives last at %.0f%% of %s", 100.0 * per(top->last_by_type[type],
                                                                 v->types[type].instances),
                     pluralise(static_cast<CollectiveType>(type)).c_str());
    } else {
      where = format("has the most work in %lld of %lld steps",
                     static_cast<long long>(top->late_steps), static_cast<long long>(v->steps));
    }
    const size_t cause = top_index(top->late_attributed);
    std::string of_which;
    if (top->late_attributed[cause] > 0) {
      of_which = format(", of which %.2f ms is its %s", ms(per(top->late_attributed[cause], v->steps)),
                        doing(static_cast<Wall>(cause)));
    }
    // Lateness its walls do not explain (it did what the others did, only later or slower).
    if (top->late_unexplained_ns * 2 > top->late_ns) {
      of_which += format(" (%.2f ms not explained by its walls)",
                         ms(per(top->late_unexplained_ns, v->steps)));
    }
    v->headline = format("rank %d %s, %.2f ms/step%s; without it the job step would be %.2f ms "
                         "instead of %.2f",
                         top->rank, where.c_str(), late_ms, of_which.c_str(),
                         ms(per(v->what_if_step_ns, v->steps)), job_step_ms);
  } else {
    int64_t waited = 0;
    for (const JobRankResult& r : v->ranks) waited += r.waited_ns;
    v->headline = format("no rank stands out: ranks wait %.2f ms/step on average for the last "
                         "to arrive",
                         ms(per(waited, v->steps * static_cast<int64_t>(v->ranks.size()))));
  }
  // Per-rank corrections: a rank whose own verdict says communication, when most of that is
  // waiting for another rank.
  const VerdictBands bands;
  size_t shown = 0, more = 0;
  for (const JobRankResult& r : v->ranks) {
    if (r.steps == 0 || r.step_ns == 0) continue;
    const double comm_share = static_cast<double>(r.walls.communication) / static_cast<double>(r.step_ns);
    const bool says_comm = r.verdict_bound.empty() ? comm_share >= bands.comm_moderate
                                                   : r.verdict_bound == "communication";
    if (!says_comm || r.walls.communication <= 0 || r.waited_for.empty()) continue;
    const double waited_share = std::min(
        1.0, static_cast<double>(r.waited_ns) / static_cast<double>(r.walls.communication));
    if (waited_share < 0.5) continue;
    auto most = std::max_element(r.waited_for.begin(), r.waited_for.end(),
                                 [](const auto& a, const auto& b) { return a.second < b.second; });
    const JobRankResult* other = find_rank(*v, most->first);
    if (shown++ >= 20) {
      ++more;
      continue;
    }
    v->corrections.push_back(format(
        "rank %d: communication (%.0f%% of its step) is %.0f%% waiting for rank %d%s, not "
        "transfer",
        r.rank, 100.0 * comm_share, 100.0 * waited_share, most->first,
        other != nullptr ? cause_of(*other).c_str() : ""));
  }
  if (more > 0) v->corrections.push_back(format("... and %zu more ranks alike", more));
}

namespace {

json link_json(const JobView& v) {
  const JobLink& l = v.link;
  json worst = json::array();
  for (const LinkStep& w : l.worst) {
    worst.push_back({{"step_index", w.step_index},
                     {"job_step_ms", ms(static_cast<double>(w.job_step_ns))},
                     {"what_if_step_ms", ms(static_cast<double>(w.what_if_step_ns))},
                     {"slow_instances", w.slow_instances},
                     {"slowest_transfer_over_expected", w.slowest_ratio}});
  }
  const bool bw = l.slow_busbw_instances > 0;
  return {
      {"blamed", l.blamed},
      {"reference", l.reference_gbs > 0 ? "given" : "job_best"},
      {"reference_gbs", l.reference_gbs > 0 ? json(l.reference_gbs) : json(nullptr)},
      {"slow_rule", "transfer >= 1.5x expected and >= 50 us above it (link_blame.h)"},
      {"instances", l.instances},
      {"slow_instances", l.slow_instances},
      {"transfer_over_expected",
       l.slow_expected_ns > 0
           ? json(static_cast<double>(l.slow_transfer_ns) / static_cast<double>(l.slow_expected_ns))
           : json(nullptr)},
      {"busbw_gbs_mean",
       bw ? json(l.slow_busbw_sum / static_cast<double>(l.slow_busbw_instances)) : json(nullptr)},
      {"busbw_share_of_expected",
       bw ? json(l.slow_busbw_sum / l.slow_expected_busbw_sum) : json(nullptr)},
      {"algo", l.algo},
      {"proto", l.proto},
      {"steps_slow", l.steps_slow},
      {"what_if_step_ms_mean", ms(per(l.what_if_step_ns, v.steps))},
      {"worst_steps", worst}};
}

}  // namespace

json job_view_to_json(const JobView& v) {
  json hosts = json::array();
  for (const JobHost& h : v.hosts) {
    hosts.push_back({{"host", json_safe_utf8(h.name)},
                     {"ranks", h.ranks},
                     {"clock_offset_ns", h.offset_ns},
                     {"aligned", h.aligned},
                     {"inferred", h.inferred}});
  }
  const json ranks = ranks_json(v);
  json types = json::array();
  for (const CollectiveTypeRow& t : v.types) {
    if (t.instances == 0) continue;
    types.push_back(
        {{"collective", to_string(t.type)},
         {"instances", t.instances},
         {"incomplete", t.incomplete},
         {"transfer_ms_mean", ms(per(t.transfer_ns, t.instances))},
         {"wait_ms_mean", ms(per(t.wait_ns, t.rank_records))},
         {"lateness_ms_mean", ms(per(t.lateness_ns, t.instances))},
         // null, not 0, without bytes: nothing was measured
         {"busbw_gbs_mean", t.busbw_instances > 0 ? json(mean_busbw(t)) : json()},
         {"busbw_share_of_peak", v.link_peak_gbs > 0 && t.busbw_instances > 0
                                     ? json(mean_busbw(t) / v.link_peak_gbs)
                                     : json()},
         {"expected_transfer_ms_mean",
          t.expected_instances > 0 ? json(ms(per(t.expected_ns, t.expected_instances))) : json()},
         {"transfer_over_expected", t.expected_ns > 0
                                        ? json(static_cast<double>(t.expected_transfer_ns) /
                                               static_cast<double>(t.expected_ns))
                                        : json()},
         {"expected_busbw_gbs_mean",
          t.expected_busbw_instances > 0
              ? json(t.expected_busbw_sum / static_cast<double>(t.expected_busbw_instances))
              : json()},
         {"slow_on_link", t.slow}});
  }
  json unmatched = json::array();
  for (const UnmatchedCollectiveRow& u : v.unmatched) {
    unmatched.push_back({{"rank", u.rank},
                         {"collective", to_string(u.type)},
                         {"reason", u.reason},
                         {"records", u.records},
                         {"duration_ms_mean", ms(per(u.duration_ns, u.timed))},
                         {"bytes_mean", u.bytes_known > 0 ? json(per(static_cast<int64_t>(u.bytes),
                                                                     u.bytes_known))
                                                          : json(nullptr)}});
  }
  json top = json::array();
  for (const StepBlame& b : v.top_steps) {
    json excess = json::object();
    json attributed = json::object();
    for (const WallInfo& w : kWalls) {
      excess[std::string(w.name)] = ms(static_cast<double>(b.excess[w.wall]));
      attributed[std::string(w.name)] = ms(static_cast<double>(b.attributed[static_cast<size_t>(w.wall)]));
    }
    const JobRankResult& late = v.ranks[static_cast<size_t>(b.late_slot)];
    const JobRankResult& slow = v.ranks[static_cast<size_t>(b.slowest_slot)];
    top.push_back({{"step_index", b.step_index},
                   {"job_step_ms", ms(static_cast<double>(b.job_step_ns))},
                   {"slowest_rank", slow.rank},
                   {"late_rank", late.rank},
                   {"late_ms", ms(static_cast<double>(b.late_ns))},
                   {"excess_ms", excess},
                   {"attributed_ms", attributed},
                   {"unexplained_ms", ms(static_cast<double>(b.unexplained_ns))},
                   {"cause", to_string(b.cause)},
                   {"what_if_step_ms", ms(static_cast<double>(b.what_if_step_ns))}});
  }
  json out = {
      {"schema", kJobSchema},
      {"job_id", json_safe_utf8(v.job_id)},
      {"world_size", v.world_size},
      {"ranks_present", v.ranks.size()},
      {"method", v.method},
      {"headline", json_safe_utf8(v.headline)},
      {"corrections", v.corrections},
      {"slow_links", v.slow_links},
      {"hosts",
       {{"count", v.host_count >= 0 ? json(v.host_count) : json(nullptr)},
        {"basis", v.host_basis}}},
      {"link", link_json(v)},
      {"clocks",
       {{"reference_host",
         v.hosts.empty()
             ? json(nullptr)
             : json(json_safe_utf8(
                   v.hosts[static_cast<size_t>(std::max(0, v.alignment.reference_host)) %
                           v.hosts.size()]
                       .name))},
        {"hosts", hosts},
        {"estimator", "median of per-host end residuals over matched instances (clock_align.h)"},
        {"instances_seen", v.alignment.instances_seen},
        {"instances_cross_host", v.alignment.instances_cross_host},
        {"instances_used", v.alignment.instances_used},
        {"iterations", v.alignment.iterations},
        {"residual_p50_ns", v.residual_p50_ns},
        {"residual_p99_ns", v.residual_p99_ns},
        {"residual_instances", v.residual_instances}}},
      {"collectives",
       {{"instances", v.instances},
        {"incomplete", v.incomplete_instances},
        {"duplicate_records", v.duplicate_records},
        {"records_without_times", v.records_without_times},
        {"clock_suspect_records", v.clock_suspect_records},
        {"by_type", types}}},
      {"matching",
       {{"notes", json::array()},
        {"end_tolerance",
         "every end after the last arrival, ends within 2x the median transfer; both +50 us "
         "(job_merge.h)"},
        {"communicators_checked", v.communicators_checked},
        {"communicators_unreliable", v.communicators_unreliable},
        {"floor_steps", v.floor_steps},
        {"unmatched", unmatched}}},
      {"steps",
       {{"count", v.steps},
        {"with_a_late_rank", v.blamed_steps},
        {"job_step_ms_mean", ms(per(v.job_step_ns, v.steps))},
        {"job_step_ms_p50", ms(v.job_step_sample.percentile(50))},
        {"job_step_ms_p99", ms(v.job_step_sample.percentile(99))},
        {"what_if_step_ms_mean", ms(per(v.what_if_step_ns, v.steps))},
        {"top", top}}},
      {"ranks", ranks},
      {"problems", json::array()}};
  for (const std::string& p : v.problems) out["problems"].push_back(json_safe_utf8(p));
  for (auto& c : out["corrections"]) c = json_safe_utf8(c.get<std::string>());
  for (auto& c : out["slow_links"]) c = json_safe_utf8(c.get<std::string>());
  for (const std::string& n : v.matching_notes) out["matching"]["notes"].push_back(json_safe_utf8(n));
  return out;
}

std::string render_job_view(const JobView& v) {
  std::ostringstream o;
  o << "gpuacct job" << (v.job_id.empty() ? "" : " " + terminal_text(v.job_id)) << " - "
    << v.ranks.size() << " ranks";
  if (v.world_size > 0) o << " of " << v.world_size;
  if (v.host_count < 0) {
    o << " on an unknown number of hosts, ";
  } else {
    o << " on " << v.host_count << (v.host_count == 1 ? " host" : " hosts")
      << (v.host_basis == "hostnames" ? "" : " (" + v.host_basis + ")") << ", ";
  }
  o << v.steps << " steps compared ("
    << (v.method == kMethodCollectives     ? "matched collectives"
        : v.method == kMethodStepRowsFloor ? "step rows only: transfer floor"
                                           : "matched collectives, transfer floor where unmatched")
    << ")\n";
  o << terminal_text(v.headline) << "\n";
  for (const std::string& n : v.matching_notes) o << "matching: " << terminal_text(n) << "\n";
  for (const std::string& s : v.slow_links) o << terminal_text(s) << "\n";
  // Clocks.
  o << "clocks:";
  if (v.hosts.size() == 1) {
    o << " every rank is on host " << terminal_text(v.hosts[0].name) << ": one clock, not shifted\n";
  } else if (v.alignment.instances_cross_host == 0) {
    o << " not aligned: no trusted matched instance spans two hosts (every offset 0)\n";
  } else {
    o << format(" reference host %s; %lld cross-host instances, residual (spread of aligned ends) "
                "p50 %.1f us, p99 %.1f us\n",
                terminal_text(v.hosts[static_cast<size_t>(std::max(0, v.alignment.reference_host)) %
                                      v.hosts.size()].name).c_str(),
                static_cast<long long>(v.alignment.instances_cross_host), v.residual_p50_ns / 1e3,
                v.residual_p99_ns / 1e3);
    size_t shown = 0;
    for (const JobHost& h : v.hosts) {
      if (shown++ == 16) {
        o << "  ... " << v.hosts.size() - 16 << " more hosts in job.json\n";
        break;
      }
      o << format("  %-24s %3zu ranks (one clock)  offset %+.3f ms%s\n", terminal_text(h.name).c_str(),
                  h.ranks.size(), ms(static_cast<double>(h.offset_ns)),
                  h.aligned ? "" : "  (no shared instance: not aligned)");
    }
  }
  // Ranks: all when few, else the most late and the most waiting.
  std::vector<const JobRankResult*> order;
  for (const JobRankResult& r : v.ranks) order.push_back(&r);
  const size_t limit = 16;
  if (order.size() > limit) {
    std::stable_sort(order.begin(), order.end(), [](const auto* a, const auto* b) {
      return a->late_ns + a->waited_ns > b->late_ns + b->waited_ns;
    });
    order.resize(limit);
  }
  o << "per rank (ms/step):\n  rank   step  compute  comm   data launch  other | waited transfer   late  last\n";
  for (const JobRankResult* r : order) {
    const double steps = static_cast<double>(std::max<int64_t>(1, r->steps));
    o << format("  %4d %6.2f %8.2f %5.2f %6.2f %6.2f %6.2f | %6.2f %8.2f %6.2f %5lld%s\n", r->rank,
                ms(static_cast<double>(r->step_ns) / steps), ms(static_cast<double>(r->walls.compute) / steps),
                ms(static_cast<double>(r->walls.communication) / steps),
                ms(static_cast<double>(r->walls.data) / steps), ms(static_cast<double>(r->walls.launch) / steps),
                ms(static_cast<double>(r->walls.other) / steps), ms(static_cast<double>(r->waited_ns) / steps),
                ms(static_cast<double>(r->transfer_ns) / steps), ms(static_cast<double>(r->late_ns) / steps),
                static_cast<long long>(r->last_count), r->slow_link ? "  slow link" : "");
  }
  if (v.ranks.size() > limit) o << "  ... " << v.ranks.size() - limit << " more ranks in job.json\n";
  bool any_type = false;
  for (const CollectiveTypeRow& t : v.types) {
    if (t.instances == 0) continue;
    if (!any_type) {
      o << "collectives:  type            count  transfer ms  wait ms  busbw GB/s"
        << (v.link_peak_gbs > 0 ? format("  of %.0f GB/s peak", v.link_peak_gbs) : "") << "\n";
    }
    any_type = true;
    o << format("              %-14s %6lld %12.3f %8.3f", to_string(t.type),
                static_cast<long long>(t.instances), ms(per(t.transfer_ns, t.instances)),
                ms(per(t.wait_ns, t.rank_records)));
    // "-" without bytes (kernel-order identity, traces without sizes): not a measured 0.
    o << (t.busbw_instances > 0 ? format(" %11.1f", mean_busbw(t)) : format(" %11s", "-"));
    if (v.link_peak_gbs > 0 && t.busbw_instances > 0) {
      o << format("  %17.0f%%", 100.0 * mean_busbw(t) / v.link_peak_gbs);
    }
    o << "\n";
  }
  if (!v.unmatched.empty()) {
    o << "not matched across ranks (per rank, not split into waiting and transfer):\n"
         "  rank  type           count  mean ms     mean bytes  why\n";
    size_t shown = 0;
    for (const UnmatchedCollectiveRow& u : v.unmatched) {
      if (shown++ == 16) {
        o << "  ... " << v.unmatched.size() - 16 << " more rows in job.json\n";
        break;
      }
      const std::string bytes =
          u.bytes_known > 0 ? format("%.0f", per(static_cast<int64_t>(u.bytes), u.bytes_known)) : "-";
      o << format("  %4d  %-14s %5lld %8.3f %14s  %s\n", u.rank, to_string(u.type),
                  static_cast<long long>(u.records), ms(per(u.duration_ns, u.timed)), bytes.c_str(),
                  u.reason);
    }
  }
  for (const std::string& c : v.corrections) o << terminal_text(c) << "\n";
  for (const std::string& p : v.problems) o << "problem: " << terminal_text(p) << "\n";
  return o.str();
}

}  // namespace gpuacct
