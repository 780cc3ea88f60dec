#include "analysis/accounting/taxonomy.h"

#include <gtest/gtest.h>

#include <set>
#include <string>

#include "analysis/accounting/step_row.h"
#include "analysis/report/report.h"

namespace gpuacct {
namespace {

// The category -> wall map the reports and docs/accounting.md publish.
TEST(Taxonomy, CategoriesRollUpIntoTheDocumentedWalls) {
  EXPECT_EQ(kCategoryCount, 7);
  EXPECT_EQ(kWallCount, 5);
  EXPECT_EQ(wall_of(Category::kCompute), Wall::kCompute);
  EXPECT_EQ(wall_of(Category::kCommExposed), Wall::kCommunication);
  EXPECT_EQ(wall_of(Category::kCopyInput), Wall::kData);
  EXPECT_EQ(wall_of(Category::kDataWait), Wall::kData);
  EXPECT_EQ(wall_of(Category::kLaunchGap), Wall::kLaunch);
  EXPECT_EQ(wall_of(Category::kCopyOther), Wall::kOther);
  EXPECT_EQ(wall_of(Category::kHostOther), Wall::kOther);
}

TEST(Taxonomy, TablesAreIndexedByTheirEnums) {
  std::set<std::string> names;
  for (size_t i = 0; i < kCategories.size(); ++i) {
    EXPECT_EQ(static_cast<size_t>(kCategories[i].category), i);
    EXPECT_EQ(std::string(to_string(kCategories[i].category)), std::string(kCategories[i].name));
    names.insert(std::string(kCategories[i].name));
  }
  for (size_t i = 0; i < kWalls.size(); ++i) {
    EXPECT_EQ(static_cast<size_t>(kWalls[i].wall), i);
    EXPECT_NE(std::string(kWalls[i].colour), "");
  }
  EXPECT_EQ(names.size(), kCategories.size());
  EXPECT_EQ(std::string(to_string(Category::kCommExposed)), "comm_exposed");
  EXPECT_EQ(std::string(to_string(Wall::kCommunication)), "communication");
}

// Indexed access reaches the named fields; the walls partition the categories exactly.
TEST(Taxonomy, IndexedFieldsSumsAndWalls) {
  CategoryNs c;
  int64_t v = 1;
  for (const CategoryInfo& k : kCategories) c[k.category] = (v *= 3);
  EXPECT_EQ(c.compute, 3);
  EXPECT_EQ(c.comm_exposed, 9);
  EXPECT_EQ(c.host_other, 2187);
  EXPECT_EQ(c.sum(), 3 + 9 + 27 + 81 + 243 + 729 + 2187);
  EXPECT_EQ(c.idle(), 243 + 729 + 2187);
  const WallBreakdown w = WallBreakdown::from(c);
  EXPECT_EQ(w.compute, c.compute);
  EXPECT_EQ(w.communication, c.comm_exposed);
  EXPECT_EQ(w.data, c.data_wait + c.copy_input);
  EXPECT_EQ(w.launch, c.launch_gap);
  EXPECT_EQ(w.other, c.host_other + c.copy_other);
  EXPECT_EQ(w.sum(), c.sum());
  EXPECT_EQ(w[Wall::kData], w.data);
  CategoryNs twice = c;
  twice += c;
  EXPECT_EQ(twice.sum(), 2 * c.sum());
  // Sums saturate instead of overflowing.
  CategoryNs big;
  big.compute = INT64_MAX;
  big.data_wait = 5;
  EXPECT_EQ(big.sum(), INT64_MAX);
}

// The CSV columns are generated from the tables; this is the published header (docs).
TEST(Taxonomy, CsvHeaderIsThePublishedOne) {
  const std::string csv = step_rows_csv({});
  EXPECT_EQ(csv,
            "step_index,step_number,device,warmup,window_begin_ns,window_end_ns,duration_ns,"
            "compute_ns,comm_exposed_ns,copy_input_ns,copy_other_ns,data_wait_ns,launch_gap_ns,"
            "host_other_ns,wall_compute_ns,wall_communication_ns,wall_data_ns,wall_launch_ns,"
            "wall_other_ns,comm_total_ns,comm_overlapped_ns,gpu_busy_ns,kernels,copies,launches,"
            "flops,tokens,samples,sampled,sm_active_pct,tensor_active_pct,dram_pct,compute_sol_pct,"
            "memory_sol_pct\n");
}

TEST(Taxonomy, HostOnlyRowsAreReportedAsDeviceMinusOne) {
  EXPECT_EQ(reported_device(kHostOnlyDevice), -1);
  EXPECT_EQ(reported_device(3), 3);
  StepRow r;
  r.device = kHostOnlyDevice;
  EXPECT_EQ(step_row_to_json(r)["device"], -1);
  EXPECT_EQ(step_row_to_json(r)["host_only"], true);
}

}  // namespace
}  // namespace gpuacct
