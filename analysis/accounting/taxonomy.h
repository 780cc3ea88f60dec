// The accounting taxonomy, written once: the exclusive categories a step window is split into
// and the five walls they roll up into (docs/accounting.md §2-§3).  Everything that names a
// category or a wall is generated from the two tables below: the enums, to_string(), wall_of(),
// the CategoryNs / WallBreakdown fields and their sums, the JSON keys of step rows and
// summaries, the CSV header, the timeline's track names and colours.  Add a category here and
// every output follows; the golden report (tests/golden/sample.report.json) pins the names.
#pragma once

#include <array>
#include <cstdint>
#include <string_view>
#include <type_traits>

#include "analysis/model/events.h"

namespace gpuacct {

// X(Enum, name, timeline_colour): `name` is the C++ field, the JSON key and the CSV column
// stem ("wall_<name>_ns").  The colour is one of Chrome's reserved colour names (Perfetto
// ignores them).  Order = output order.
#define GPUACCT_WALLS(X)                        \
  X(kCompute, compute, "good")                  \
  X(kCommunication, communication, "rail_load") \
  X(kData, data, "terrible")                    \
  X(kLaunch, launch, "bad")                     \
  X(kOther, other, "generic_work")

// X(Enum, name, Wall, idle, description): `name` is the C++ field, the JSON key and the CSV
// column stem ("<name>_ns"); `idle` marks the categories of time the GPU does nothing (split
// by what the host did, docs/accounting.md "Idle gaps").  Order = output order and, among the
// busy ones, the sweep's priority (the first running class wins).
#define GPUACCT_CATEGORIES(X)                                                               \
  X(kCompute, compute, kCompute, false, ">= 1 non-communication kernel running")            \
  X(kCommExposed, comm_exposed, kCommunication, false, "a collective running, no compute")  \
  X(kCopyInput, copy_input, kData, false, "host-to-device copy running, no kernel")         \
  X(kCopyOther, copy_other, kOther, false,                                                  \
    "other memcpy / memset running, no kernel, no host-to-device copy")                     \
  X(kDataWait, data_wait, kData, true, "idle; the launching thread is inside a data range") \
  X(kLaunchGap, launch_gap, kLaunch, true, "idle; the GPU waits for kernel submission")     \
  X(kHostOther, host_other, kOther, true,                                                   \
    "idle; the host paused (CPU work) or the GPU waited on a dependency")

enum class Wall : uint8_t {
#define GPUACCT_WALL_ENUM(e, name, colour) e,
  GPUACCT_WALLS(GPUACCT_WALL_ENUM)
#undef GPUACCT_WALL_ENUM
};

enum class Category : uint8_t {
#define GPUACCT_CATEGORY_ENUM(e, name, wall, idle, desc) e,
  GPUACCT_CATEGORIES(GPUACCT_CATEGORY_ENUM)
#undef GPUACCT_CATEGORY_ENUM
};

#define GPUACCT_COUNT_ONE(...) +1
inline constexpr int kWallCount = 0 GPUACCT_WALLS(GPUACCT_COUNT_ONE);
inline constexpr int kCategoryCount = 0 GPUACCT_CATEGORIES(GPUACCT_COUNT_ONE);
#undef GPUACCT_COUNT_ONE

struct WallInfo {
  Wall wall;
  std::string_view name;
  const char* colour;
};

struct CategoryInfo {
  Category category;
  std::string_view name;
  Wall wall;
  bool idle;
  std::string_view description;
};

inline constexpr std::array<WallInfo, kWallCount> kWalls = {{
#define GPUACCT_WALL_INFO(e, name, colour) {Wall::e, #name, colour},
    GPUACCT_WALLS(GPUACCT_WALL_INFO)
#undef GPUACCT_WALL_INFO
}};

inline constexpr std::array<CategoryInfo, kCategoryCount> kCategories = {{
#define GPUACCT_CATEGORY_INFO(e, name, wall, idle, desc) \
  {Category::e, #name, Wall::wall, idle, desc},
    GPUACCT_CATEGORIES(GPUACCT_CATEGORY_INFO)
#undef GPUACCT_CATEGORY_INFO
}};

constexpr const WallInfo& wall_info(Wall w) {
  return kWalls[static_cast<size_t>(w)];
}
constexpr const CategoryInfo& category_info(Category c) {
  return kCategories[static_cast<size_t>(c)];
}
constexpr Wall wall_of(Category c) {
  return category_info(c).wall;
}
// The names are string literals: data() is NUL-terminated.
inline const char* to_string(Wall w) {
  return wall_info(w).name.data();
}
inline const char* to_string(Category c) {
  return category_info(c).name.data();
}

// Time of one step window on one device per category.  Invariant (tested):
//   sum() == window_end - window_begin, every field >= 0.
// Fields by name (row.cat.compute) or by Category (row.cat[Category::kCompute]).
struct CategoryNs {
#define GPUACCT_CATEGORY_FIELD(e, name, wall, idle, desc) int64_t name = 0;
  GPUACCT_CATEGORIES(GPUACCT_CATEGORY_FIELD)
#undef GPUACCT_CATEGORY_FIELD

  int64_t& operator[](Category c) {
    return field(*this, c);
  }
  int64_t operator[](Category c) const {
    return field(*this, c);
  }

  int64_t sum() const {
    int64_t s = 0;
#define GPUACCT_CATEGORY_SUM(e, name, wall, idle, desc) s = saturating_add(s, name);
    GPUACCT_CATEGORIES(GPUACCT_CATEGORY_SUM)
#undef GPUACCT_CATEGORY_SUM
    return s;
  }
  // The idle categories (the GPU ran nothing).
  int64_t idle() const {
    int64_t s = 0;
#define GPUACCT_CATEGORY_IDLE(e, name, wall, is_idle, desc) \
  if (is_idle) s = saturating_add(s, name);
    GPUACCT_CATEGORIES(GPUACCT_CATEGORY_IDLE)
#undef GPUACCT_CATEGORY_IDLE
    return s;
  }
  CategoryNs& operator+=(const CategoryNs& o) {
#define GPUACCT_CATEGORY_ADD(e, name, wall, idle, desc) name = saturating_add(name, o.name);
    GPUACCT_CATEGORIES(GPUACCT_CATEGORY_ADD)
#undef GPUACCT_CATEGORY_ADD
    return *this;
  }

 private:
  template <typename Self>
  static std::conditional_t<std::is_const_v<Self>, const int64_t&, int64_t&> field(Self& self,
                                                                                   Category c) {
    switch (c) {
#define GPUACCT_CATEGORY_CASE(e, name, wall, idle, desc) \
  case Category::e:                                      \
    return self.name;
      GPUACCT_CATEGORIES(GPUACCT_CATEGORY_CASE)
#undef GPUACCT_CATEGORY_CASE
    }
    return self.host_other;  // unreachable: every enumerator has a case
  }
};

// The five walls a person acts on.  They partition the step exactly: each wall is the sum of
// its categories (wall_of).
struct WallBreakdown {
#define GPUACCT_WALL_FIELD(e, name, colour) int64_t name = 0;
  GPUACCT_WALLS(GPUACCT_WALL_FIELD)
#undef GPUACCT_WALL_FIELD

  int64_t& operator[](Wall w) {
    return field(*this, w);
  }
  int64_t operator[](Wall w) const {
    return field(*this, w);
  }

  static WallBreakdown from(const CategoryNs& c) {
    WallBreakdown w;
#define GPUACCT_CATEGORY_TO_WALL(e, name, wall, idle, desc) \
  w[Wall::wall] = saturating_add(w[Wall::wall], c.name);
    GPUACCT_CATEGORIES(GPUACCT_CATEGORY_TO_WALL)
#undef GPUACCT_CATEGORY_TO_WALL
    return w;
  }
  int64_t sum() const {
    int64_t s = 0;
#define GPUACCT_WALL_SUM(e, name, colour) s = saturating_add(s, name);
    GPUACCT_WALLS(GPUACCT_WALL_SUM)
#undef GPUACCT_WALL_SUM
    return s;
  }

 private:
  template <typename Self>
  static std::conditional_t<std::is_const_v<Self>, const int64_t&, int64_t&> field(Self& self,
                                                                                   Wall w) {
    switch (w) {
#define GPUACCT_WALL_CASE(e, name, colour) \
  case Wall::e:                            \
    return self.name;
      GPUACCT_WALLS(GPUACCT_WALL_CASE)
#undef GPUACCT_WALL_CASE
    }
    return self.other;  // unreachable: every enumerator has a case
  }
};

}  // namespace gpuacct
