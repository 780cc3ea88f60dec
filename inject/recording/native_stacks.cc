#include "inject/recording/native_stacks.h"

#define UNW_LOCAL_ONLY
#include <cxxabi.h>
#include <dlfcn.h>
#if GPUACCT_HAVE_LIBUNWIND
#include <libunwind.h>
#else
#include <execinfo.h>  // fallback where libunwind-dev is missing (e.g. a bare GPU image)
#endif

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace gpuacct::inject {
namespace {

// Frames inside these modules are the CUDA stack, CUPTI or gpuacct itself: not a call site.
bool is_infrastructure(uint64_t pc) {
  Dl_info info{};
  if (dladdr(reinterpret_cast<void*>(pc), &info) == 0 || info.dli_fname == nullptr) return false;
  const char* base = std::strrchr(info.dli_fname, '/');
  base = base != nullptr ? base + 1 : info.dli_fname;
  static const char* const kSkip[] = {"libcupti",   "libcuda.",  "libcudart",
                                      "libgpuacct", "libunwind", "libnvToolsExt"};
  for (const char* s : kSkip) {
    if (std::strncmp(base, s, std::strlen(s)) == 0) return true;
  }
  return false;
}

}  // namespace

int capture_stack(uint64_t* frames, int max) {
  if (max <= 0) return 0;
  void* buf[64];
  const int want = std::min(max, 64);
#if GPUACCT_HAVE_LIBUNWIND
  const int n = unw_backtrace(buf, want);
#else
  const int n = backtrace(buf, want);
#endif
  if (n <= 0) return 0;
  for (int i = 0; i < n; ++i) frames[i] = reinterpret_cast<uint64_t>(buf[i]);
  return n;
}

std::string describe_frame(uint64_t pc) {
  Dl_info info{};
  if (dladdr(reinterpret_cast<void*>(pc), &info) == 0) {
    char b[32];
    std::snprintf(b, sizeof b, "0x%llx", static_cast<unsigned long long>(pc));
    return b;
  }
  std::string module = info.dli_fname != nullptr ? info.dli_fname : "?";
  const size_t slash = module.rfind('/');
  if (slash != std::string::npos) module = module.substr(slash + 1);
  std::string fn;
  uint64_t off = 0;
  if (info.dli_sname != nullptr) {
    int status = 0;
    char* dem = abi::__cxa_demangle(info.dli_sname, nullptr, nullptr, &status);
    fn = (status == 0 && dem != nullptr) ? dem : info.dli_sname;
    std::free(dem);
    off = pc - reinterpret_cast<uint64_t>(info.dli_saddr);
  } else {
    fn = "?";
    off = pc - reinterpret_cast<uint64_t>(info.dli_fbase);
  }
  if (fn.size() > 160) fn = fn.substr(0, 157) + "...";
  char b[48];
  std::snprintf(b, sizeof b, "+0x%llx", static_cast<unsigned long long>(off));
  return fn + b + " (" + module + ")";
}

bool SiteTable::add(SiteKind kind, const uint64_t* frames, int n, int64_t ns) {
  std::vector<uint64_t> user;
  for (int i = 0; i < n; ++i) {
    if (user.empty() && is_infrastructure(frames[i])) continue;
    user.push_back(frames[i]);
    if (user.size() >= 4) break;
  }
  if (user.empty() && n > 0) user.push_back(frames[n - 1]);
  for (Site& s : sites_) {
    if (s.kind == kind && s.frames == user) {
      ++s.count;
      s.total_ns += ns;
      return true;
    }
  }
  if (sites_.size() >= kMaxSites) return false;
  sites_.push_back(Site{kind, std::move(user), 1, ns});
  return true;
}

nlohmann::json SiteTable::to_json(size_t limit) const {
  nlohmann::json out = nlohmann::json::array();
  for (SiteKind kind : {SiteKind::kSync, SiteKind::kLaunchAfterPause}) {
    std::vector<const Site*> v;
    for (const Site& s : sites_) {
      if (s.kind == kind) v.push_back(&s);
    }
    std::sort(v.begin(), v.end(),
              [](const Site* a, const Site* b) { return a->total_ns > b->total_ns; });
    for (size_t i = 0; i < v.size() && i < limit; ++i) {
      nlohmann::json frames = nlohmann::json::array();
      for (uint64_t pc : v[i]->frames) frames.push_back(describe_frame(pc));
      out.push_back(
          {{"kind", kind == SiteKind::kSync ? "blocking_sync" : "launch_after_host_pause"},
           {"site", frames.empty() ? std::string("?") : frames[0].get<std::string>()},
           {"frames", frames},
           {"count", v[i]->count},
           {"total_ms", static_cast<double>(v[i]->total_ns) / 1e6}});
    }
  }
  return out;
}

}  // namespace gpuacct::inject
