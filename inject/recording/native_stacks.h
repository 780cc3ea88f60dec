// Native call sites (libunwind) of blocking synchronisations and of launches that end a host
// pause (the launches that end idle gaps).  Captured only on those events, never per launch;
// symbolised on the worker thread.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace gpuacct::inject {

// Fills up to `max` return addresses of the calling thread.  Returns the count (0 on failure).
int capture_stack(uint64_t* frames, int max);

enum class SiteKind : uint8_t { kSync = 0, kLaunchAfterPause = 1 };

// Aggregates captured stacks by call site (worker thread only).
class SiteTable {
 public:
  // Distinct sites kept; by the time a run has this many, its top sites are long known.
  static constexpr size_t kMaxSites = 4096;

  // False when the sample was left out: a new site with the table full.
  bool add(SiteKind kind, const uint64_t* frames, int n, int64_t ns);
  // Top `limit` sites per kind, by total time: [{"kind","site","frames","count","total_ms"}].
  nlohmann::json to_json(size_t limit) const;
  size_t size() const { return sites_.size(); }

 private:
  struct Site {
    SiteKind kind;
    std::vector<uint64_t> frames;  // the user's frames (CUDA / CUPTI / gpuacct frames skipped)
    int64_t count = 0;
    int64_t total_ns = 0;
  };
  std::vector<Site> sites_;
};

// "function+0x12 (module)" for an address (dladdr, demangled).
std::string describe_frame(uint64_t pc);

}  // namespace gpuacct::inject
