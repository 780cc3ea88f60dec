#include "analysis/accounting/collective_steps.h"

#include <algorithm>
#include <map>
#include <random>
#include <variant>
#include <vector>

#include <gtest/gtest.h>

namespace gpuacct {
namespace {

// A run's step rows: host ranges with gaps (and touching steps), windows tiling each device,
// empty windows, steps before a device takes part, host-only steps at the start.
std::vector<StepRow> random_rows(std::mt19937_64& rng, int steps) {
  std::vector<StepRow> rows;
  std::map<uint16_t, TimeNs> window_end;  // per device
  TimeNs t = 1'000'000;
  for (int k = 0; k < steps; ++k) {
    const TimeNs begin = t + (rng() % 3 == 0 ? 0 : static_cast<TimeNs>(rng() % 50'000));
    const TimeNs end = begin + 10'000 + static_cast<TimeNs>(rng() % 100'000);
    t = end;
    std::vector<uint16_t> devices;
    if (k >= 2) devices = {0, 1};
    if (k >= 6) devices.push_back(2);
    if (devices.empty()) devices.push_back(kHostOnlyDevice);
    for (const uint16_t d : devices) {
      StepRow r;
      r.step_index = k;
      r.device = d;
      r.host_begin = begin;
      r.host_end = end;
      if (d == kHostOnlyDevice) {
        r.window_begin = begin;
        r.window_end = end;
      } else {
        const auto known = window_end.find(d);
        r.window_begin = known == window_end.end() ? begin : known->second;
        // Work that spills past the host end, or finished early (an empty window).
        const TimeNs last_op = end + static_cast<TimeNs>(rng() % 60'000) - 30'000;
        r.window_end = std::max(r.window_begin, rng() % 8 == 0 ? r.window_begin : last_op);
        window_end[d] = r.window_end;
      }
      rows.push_back(r);
    }
  }
  return rows;
}

std::vector<CollectiveRecord> random_records(std::mt19937_64& rng, const std::vector<StepRow>& rows,
                                             size_t n) {
  const TimeNs lo = rows.front().host_begin - 50'000;
  const TimeNs hi = rows.back().host_end + 100'000;
  const auto time = [&] { return lo + static_cast<TimeNs>(rng() % static_cast<uint64_t>(hi - lo)); };
  std::vector<CollectiveRecord> out(n);
  for (size_t i = 0; i < n; ++i) {
    CollectiveRecord& r = out[i];
    r.correlation_id = i;  // the record's identity in these tests
    r.seq = i;
    r.host_enqueue = rng() % 10 < 3 ? 0 : time();
    r.gpu_start = rng() % 10 == 0 ? 0 : time();
    r.gpu_end = r.gpu_start + 100;
    r.device = static_cast<uint16_t>(rng() % 4);  // device 3 never has a row
    r.step_index = 12345;                         // overwritten
  }
  return out;
}

// The rule, brute force, from the header's words.
int64_t expected_step(const CollectiveRecord& r, const std::vector<StepRow>& rows) {
  if (r.host_enqueue != 0) {
    for (const StepRow& row : rows)
      if (row.host_begin <= r.host_enqueue && r.host_enqueue < row.host_end) return row.step_index;
  }
  if (r.gpu_start != 0) {
    for (const StepRow& row : rows)
      if (row.device == r.device && row.window_begin <= r.gpu_start && r.gpu_start < row.window_end)
        return row.step_index;
  }
  return -1;
}

using Delivery = std::variant<StepRow, CollectiveRecord>;

// Rows in step order (a step's rows per device possibly apart), records anywhere among them.
std::vector<Delivery> random_order(std::mt19937_64& rng, const std::vector<StepRow>& rows,
                                   const std::vector<CollectiveRecord>& records) {
  std::vector<Delivery> out;
  std::vector<CollectiveRecord> shuffled = records;
  std::shuffle(shuffled.begin(), shuffled.end(), rng);
  const int mode = static_cast<int>(rng() % 4);
  if (mode == 1) out.insert(out.end(), shuffled.begin(), shuffled.end());  // records first
  size_t next = 0;
  for (const StepRow& row : rows) {
    out.push_back(row);
    if (mode >= 2) {
      const size_t take = std::min(shuffled.size() - next, static_cast<size_t>(rng() % 120));
      out.insert(out.end(), shuffled.begin() + static_cast<long>(next),
                 shuffled.begin() + static_cast<long>(next + take));
      next += take;
    }
  }
  if (mode != 1) out.insert(out.end(), shuffled.begin() + static_cast<long>(next), shuffled.end());
  return out;
}

struct Outcome {
  std::map<uint64_t, int64_t> step_of;  // by record id
  int64_t emitted = 0;
  CollectiveStepCounts counts;
};

Outcome deliver(const std::vector<Delivery>& order, CollectiveStepAssignerOptions options) {
  Outcome out;
  CollectiveStepAssigner assigner(
      [&](const CollectiveRecord& r) {
        ++out.emitted;
        EXPECT_TRUE(out.step_of.emplace(r.correlation_id, r.step_index).second)
            << "record " << r.correlation_id << " emitted twice";
      },
      options);
  for (const Delivery& d : order) {
    if (const auto* row = std::get_if<StepRow>(&d)) {
      assigner.add_row(*row);
    } else {
      assigner.add(std::get<CollectiveRecord>(d));
    }
  }
  assigner.finish();
  EXPECT_EQ(assigner.held(), 0u);
  out.counts = assigner.counts();
  return out;
}

TEST(CollectiveSteps, SameStepsWhateverTheDeliveryOrder) {
  std::mt19937_64 rng(2024);
  for (int trial = 0; trial < 60; ++trial) {
    const auto rows = random_rows(rng, 40);
    const auto records = random_records(rng, rows, 1500);
    std::map<uint64_t, int64_t> want;
    int64_t assigned = 0;
    for (const auto& r : records) {
      want[r.correlation_id] = expected_step(r, rows);
      assigned += want[r.correlation_id] >= 0;
    }
    ASSERT_GT(assigned, 500);  // the scenario exercises both rules and the -1 case
    ASSERT_LT(assigned, 1400);
    const Outcome got = deliver(random_order(rng, rows, records), {});
    EXPECT_EQ(got.emitted, 1500);
    EXPECT_EQ(got.step_of, want) << "trial " << trial;
    EXPECT_EQ(got.counts.records, 1500);
    EXPECT_EQ(got.counts.assigned, assigned);
    EXPECT_EQ(got.counts.unassigned, 1500 - assigned);
    EXPECT_EQ(got.counts.over_limit, 0);
    EXPECT_EQ(got.counts.too_late, 0);
  }
}

TEST(CollectiveSteps, EmitsARecordOnceTheRowsThatCouldHoldItAreIn) {
  std::vector<CollectiveRecord> emitted;
  CollectiveStepAssigner assigner([&](const CollectiveRecord& r) { emitted.push_back(r); });
  const auto row = [](int64_t k, uint16_t device) {
    StepRow r;
    r.step_index = k;
    r.device = device;
    r.host_begin = 1000 * k;
    r.host_end = 1000 * k + 800;
    r.window_begin = 1000 * k;
    r.window_end = 1000 * k + 1000;
    return r;
  };
  CollectiveRecord by_host;
  by_host.host_enqueue = 5100;  // step 5's host range
  by_host.gpu_start = 7200;     // (would be step 7's window: the host rule comes first)
  assigner.add(by_host);
  CollectiveRecord in_gap;
  in_gap.host_enqueue = 2900;  // between step 2's and step 3's host ranges
  in_gap.gpu_start = 3950;     // step 3's window on device 1
  in_gap.device = 1;
  assigner.add(in_gap);
  CollectiveRecord unknown;  // no time at all: -1 at once
  assigner.add(unknown);
  ASSERT_EQ(emitted.size(), 1u);
  EXPECT_EQ(emitted[0].step_index, -1);
  for (int64_t k = 0; k <= 3; ++k) assigner.add_row(row(k, 0));
  EXPECT_EQ(emitted.size(), 1u);  // the gap record waits for device 1's windows
  assigner.add_row(row(3, 1));
  ASSERT_EQ(emitted.size(), 2u);
  EXPECT_EQ(emitted[1].step_index, 3);
  assigner.add_row(row(4, 0));
  EXPECT_EQ(emitted.size(), 2u);
  assigner.add_row(row(5, 0));
  ASSERT_EQ(emitted.size(), 3u);
  EXPECT_EQ(emitted[2].step_index, 5);
  // After the rows: decided on arrival.
  CollectiveRecord late;
  late.host_enqueue = 1500;  // step 1
  assigner.add(late);
  ASSERT_EQ(emitted.size(), 4u);
  EXPECT_EQ(emitted[3].step_index, 1);
  CollectiveRecord after_last;
  after_last.gpu_start = 99999;  // after every window: waits, then -1 at finish
  assigner.add(after_last);
  EXPECT_EQ(emitted.size(), 4u);
  assigner.finish();
  ASSERT_EQ(emitted.size(), 5u);
  EXPECT_EQ(emitted[4].step_index, -1);
  EXPECT_EQ(assigner.counts().assigned, 3);
  EXPECT_EQ(assigner.counts().unassigned, 2);
}

TEST(CollectiveSteps, HeldRecordLimitEmitsTheOldestUnassignedAndCountsThem) {
  std::mt19937_64 rng(77);
  for (int trial = 0; trial < 20; ++trial) {
    const auto rows = random_rows(rng, 40);
    const auto records = random_records(rng, rows, 1500);
    CollectiveStepAssignerOptions options;
    options.held_record_limit = 50;
    const Outcome got = deliver(random_order(rng, rows, records), options);
    EXPECT_EQ(got.emitted, 1500);
    EXPECT_LE(got.counts.held_peak, 50);
    EXPECT_EQ(got.counts.assigned + got.counts.unassigned, 1500);
    int64_t differ = 0;
    for (const auto& r : records) {
      const int64_t step = got.step_of.at(r.correlation_id);
      if (step != expected_step(r, rows)) {
        EXPECT_EQ(step, -1);  // an evicted record is never given a wrong step
        ++differ;
      }
    }
    EXPECT_LE(differ, got.counts.over_limit);
  }
  // Many records through a tiny limit: the skipped index entries are dropped (compaction) and
  // what is not evicted still gets its step.
  {
    const auto rows = random_rows(rng, 200);
    const auto records = random_records(rng, rows, 30000);
    std::vector<Delivery> order;
    CollectiveRecord never;  // waits for device 3, which has no rows, until the limit
    never.correlation_id = 999999;
    never.gpu_start = rows.front().host_begin;
    never.device = 3;
    order.push_back(never);
    const auto rest = random_order(rng, rows, records);
    order.insert(order.end(), rest.begin(), rest.end());
    CollectiveStepAssignerOptions options;
    options.held_record_limit = 10;
    const Outcome got = deliver(order, options);
    EXPECT_EQ(got.emitted, 30001);
    EXPECT_GT(got.counts.over_limit, 0);
    int64_t differ = 0;
    for (const auto& r : records) {
      const int64_t step = got.step_of.at(r.correlation_id);
      if (step != expected_step(r, rows)) {
        EXPECT_EQ(step, -1);
        ++differ;
      }
    }
    EXPECT_LE(differ, got.counts.over_limit);
  }
  // All records before any row: the limit is what decides, and says so.
  const auto rows = random_rows(rng, 10);
  const auto records = random_records(rng, rows, 400);
  std::vector<Delivery> order(records.begin(), records.end());
  order.insert(order.end(), rows.begin(), rows.end());
  CollectiveStepAssignerOptions options;
  options.held_record_limit = 100;
  const Outcome got = deliver(order, options);
  EXPECT_EQ(got.emitted, 400);
  EXPECT_GE(got.counts.over_limit, 250);  // at most 100 held, some decided on arrival
}

TEST(CollectiveSteps, RecordsForForgottenStepsAreCountedTooLate) {
  std::mt19937_64 rng(5);
  const auto rows = random_rows(rng, 40);
  const auto records = random_records(rng, rows, 1000);
  std::vector<Delivery> order(rows.begin(), rows.end());
  order.insert(order.end(), records.begin(), records.end());  // every record after every row
  CollectiveStepAssignerOptions options;
  options.kept_step_limit = 10;
  const Outcome got = deliver(order, options);
  EXPECT_EQ(got.emitted, 1000);
  EXPECT_GT(got.counts.too_late, 300);
  int64_t differ = 0;
  for (const auto& r : records) {
    const int64_t step = got.step_of.at(r.correlation_id);
    const int64_t want = expected_step(r, rows);
    if (step != want) {
      EXPECT_EQ(step, -1);
      ++differ;
    } else if (want >= 0) {
      EXPECT_GE(want, 30);  // only the newest 10 steps are known
    }
  }
  EXPECT_LE(differ, got.counts.too_late);
}

}  // namespace
}  // namespace gpuacct
