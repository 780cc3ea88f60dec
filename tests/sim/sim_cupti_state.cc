// The fake CUPTI's state: the callback-name tables, the environment knobs (faults, seed, delay,
// CUPTI's clock) read into State, the fault points, thread ids and the reset a new client gets.
#include <pthread.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iterator>

#include "sim_cupti_state.h"

namespace sim_cupti {

namespace {

// ---- callback names, generated from the real cbid headers at configure time -------------------

struct CbidName {
  int domain;
  uint32_t cbid;
  const char* name;
};
const CbidName kCbidNames[] = {
#include "sim_cbid_names.inc"
};

uint64_t EnvU64(const char* name, uint64_t fallback) {
  const char* v = std::getenv(name);
  if (v == nullptr || *v == '\0') return fallback;
  char* end = nullptr;
  unsigned long long x = std::strtoull(v, &end, 10);
  return end == v ? fallback : static_cast<uint64_t>(x);
}

// GPUACCT_SIM_CUPTI_CLOCK: how far CUPTI's clock is from the sim clock (the host's
// CLOCK_REALTIME).  "host" (default): the same clock, as CUPTI's default on Linux;
// "monotonic": CLOCK_MONOTONIC's reading (what CUPTI uses under WSL); "offset:<ns>": a signed
// constant.
int64_t ParseCuptiClock(const char* spec) {
  if (spec == nullptr || *spec == '\0' || std::strcmp(spec, "host") == 0) return 0;
  if (std::strcmp(spec, "monotonic") == 0) {
    timespec ts{};
    clock_gettime(CLOCK_MONOTONIC, &ts);
    const int64_t mono = static_cast<int64_t>(ts.tv_sec) * 1000000000 + ts.tv_nsec;
    return mono - static_cast<int64_t>(simNow());
  }
  if (std::strncmp(spec, "offset:", 7) == 0) return std::strtoll(spec + 7, nullptr, 10);
  std::fprintf(stderr, "[sim libcupti] unknown GPUACCT_SIM_CUPTI_CLOCK '%s'; using host\n", spec);
  return 0;
}

}  // namespace

size_t DomainCbidLimit(CUpti_CallbackDomain d) {
  switch (d) {
    case CUPTI_CB_DOMAIN_DRIVER_API:
      return CUPTI_DRIVER_TRACE_CBID_SIZE;
    case CUPTI_CB_DOMAIN_RUNTIME_API:
      return CUPTI_RUNTIME_TRACE_CBID_SIZE;
    case CUPTI_CB_DOMAIN_RESOURCE:
      return CUPTI_CBID_RESOURCE_SIZE;
    case CUPTI_CB_DOMAIN_SYNCHRONIZE:
      return CUPTI_CBID_SYNCHRONIZE_SIZE;
    case CUPTI_CB_DOMAIN_NVTX:
      return CUPTI_CBID_NVTX_SIZE;
    case CUPTI_CB_DOMAIN_STATE:
      return CUPTI_CBID_STATE_SIZE;
    default:
      return 0;
  }
}

NameTables::NameTables() {
  for (const CbidName& n : kCbidNames) {
    if (n.domain < 1 || n.domain > 2 || n.cbid >= kMaxCbid) continue;
    full[n.domain][n.cbid] = n.name;
    std::string s = n.name;
    size_t v = s.rfind("_v");
    if (v != std::string::npos && v + 2 < s.size() &&
        s.find_first_not_of("0123456789", v + 2) == std::string::npos) {
      s.resize(v);
    }
    plain[n.domain][n.cbid] = storage.emplace_back(std::move(s)).c_str();
  }
}

const NameTables& Names() {
  static const NameTables* t = new NameTables();
  return *t;
}

size_t RecordSize(CUpti_ActivityKind kind) {
  switch (kind) {
    case CUPTI_ACTIVITY_KIND_KERNEL:
    case CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL:
      return sizeof(CUpti_ActivityKernel10);
    case CUPTI_ACTIVITY_KIND_MEMCPY:
      return sizeof(CUpti_ActivityMemcpy6);
    case CUPTI_ACTIVITY_KIND_MEMCPY2:
      return sizeof(CUpti_ActivityMemcpyPtoP4);
    case CUPTI_ACTIVITY_KIND_MEMSET:
      return sizeof(CUpti_ActivityMemset4);
    case CUPTI_ACTIVITY_KIND_RUNTIME:
    case CUPTI_ACTIVITY_KIND_DRIVER:
      return sizeof(CUpti_ActivityAPI);
    case CUPTI_ACTIVITY_KIND_SYNCHRONIZATION:
      return sizeof(CUpti_ActivitySynchronization2);
    case CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION:
      return sizeof(CUpti_ActivityExternalCorrelation);
    case CUPTI_ACTIVITY_KIND_GRAPH_TRACE:
      return sizeof(CUpti_ActivityGraphTrace2);
    default:
      return 0;
  }
}

uint64_t SplitMix(uint64_t& s) {
  uint64_t z = (s += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

void Faults::Parse(const char* spec) {
  *this = Faults();
  if (spec == nullptr) return;
  std::string all = spec;
  size_t pos = 0;
  while (pos <= all.size()) {
    size_t comma = all.find(',', pos);
    if (comma == std::string::npos) comma = all.size();
    std::string item = all.substr(pos, comma - pos);
    pos = comma + 1;
    while (!item.empty() && item.front() == ' ') item.erase(item.begin());
    while (!item.empty() && item.back() == ' ') item.pop_back();
    if (item.empty()) continue;
    if (item == "subscribe_refused") {
      subscribe_refused = true;
    } else if (item.rfind("drop=", 0) == 0) {
      drop_first = std::strtoull(item.c_str() + 5, nullptr, 10);
    } else if (item.rfind("drop_every=", 0) == 0) {
      drop_every = std::strtoull(item.c_str() + 11, nullptr, 10);
    } else if (item.rfind("untimed_every=", 0) == 0) {
      untimed_every = std::strtoull(item.c_str() + 14, nullptr, 10);
    } else if (item == "buffer_refused") {
      buffer_refused = -1;
    } else if (item.rfind("buffer_refused=", 0) == 0) {
      buffer_refused = std::strtoll(item.c_str() + 15, nullptr, 10);
    } else if (item.rfind("error:", 0) == 0) {
      errors.insert(item.substr(6));
    } else if (item == "no_cupti") {
      // Handled by not putting this library on the path; nothing to do once loaded.
    } else {
      std::fprintf(stderr, "[sim libcupti] unknown GPUACCT_SIM_FAULTS item '%s'\n", item.c_str());
    }
  }
}

void State::Configure() {
  faults.Parse(std::getenv("GPUACCT_SIM_FAULTS"));
  any_error_fault.store(!faults.errors.empty());
  rng = EnvU64("GPUACCT_SIM_SEED", 1);
  delay_pct = static_cast<uint32_t>(std::min<uint64_t>(100, EnvU64("GPUACCT_SIM_DELAY_PCT", 5)));
  shuffle = EnvU64("GPUACCT_SIM_SHUFFLE", 1) != 0;
  gpu_delivery_lag_ns = EnvU64("GPUACCT_SIM_GPU_DELIVERY_LAG_NS", 0);
  hold_buffer_records = EnvU64("GPUACCT_SIM_HOLD_BUFFERS", 0);
  const char* inner = std::getenv("GPUACCT_SIM_INNER_DRIVER");
  inner_driver_callbacks = !(inner != nullptr && std::strcmp(inner, "none") == 0);
  const char* counts_file = std::getenv("GPUACCT_SIM_CUPTI_COUNTS");
  counts_path = counts_file != nullptr ? counts_file : "";
  for (auto& c : counts.callbacks) c.store(0);
  for (auto& c : counts.records) c.store(0);
  for (std::atomic<uint64_t>* c :
       {&counts.launches, &counts.launch_callbacks, &counts.launch_records,
        &counts.launches_with_work, &counts.max_launch_callbacks, &counts.max_launch_records,
        &counts.kind_switches, &counts.callback_switches, &counts.api_filter_switches,
        &counts.timestamp_callback_calls}) {
    c->store(0);
  }
  const char* inc = std::getenv("GPUACCT_SIM_FORCED_INCOMPLETE");
  forced_zero_incomplete = !(inc != nullptr && std::strcmp(inc, "keep") == 0);
  clock_shift.store(ParseCuptiClock(std::getenv("GPUACCT_SIM_CUPTI_CLOCK")));
  timestamp_cb.store(nullptr);
  std::fill(std::begin(attrs), std::end(attrs), 0);
  attrs[CUPTI_ACTIVITY_ATTR_DEVICE_BUFFER_SIZE] = 3u * 1024 * 1024;
  attrs[CUPTI_ACTIVITY_ATTR_DEVICE_BUFFER_SIZE_CDP] = 3u * 1024 * 1024;
  attrs[CUPTI_ACTIVITY_ATTR_DEVICE_BUFFER_POOL_LIMIT] = 250;
  attrs[CUPTI_ACTIVITY_ATTR_PROFILING_SEMAPHORE_POOL_SIZE] = 25000;
  attrs[CUPTI_ACTIVITY_ATTR_PROFILING_SEMAPHORE_POOL_LIMIT] = 25000;
  attrs[CUPTI_ACTIVITY_ATTR_DEVICE_BUFFER_PRE_ALLOCATE_VALUE] = 3;
  attrs[CUPTI_ACTIVITY_ATTR_PROFILING_SEMAPHORE_PRE_ALLOCATE_VALUE] = 3;
  attrs[CUPTI_ACTIVITY_ATTR_PER_THREAD_ACTIVITY_BUFFER] = 1;
}

// Never destroyed: the client's exit-time flushes may run after our static destructors would.
State& S() {
  static State* s = new State();
  return *s;
}

bool Faulted(const char* fn) {
  State& s = S();
  if (!s.any_error_fault.load(std::memory_order_relaxed)) return false;
  std::lock_guard<std::mutex> lock(s.mu);
  return s.faults.errors.count(fn) != 0;
}

uint32_t ThreadIdFor(int type) {
  thread_local uint32_t pthread_id = static_cast<uint32_t>(pthread_self());
  thread_local uint32_t system_id = static_cast<uint32_t>(syscall(SYS_gettid));
  return type == CUPTI_ACTIVITY_THREAD_ID_TYPE_SYSTEM ? system_id : pthread_id;
}

// Per-thread external correlation stacks (cuptiActivityPush/PopExternalCorrelationId).
thread_local std::vector<uint64_t> t_external[CUPTI_EXTERNAL_CORRELATION_KIND_SIZE];

// The distance from the sim clock to CUPTI's clock now.  With a client timestamp callback it is
// measured now, as real CUPTI reads the callback at a host activity and maps GPU times onto it.
int64_t CuptiClockShift(State& s) {
  const CUpti_TimestampCallbackFunc cb = s.timestamp_cb.load(std::memory_order_acquire);
  if (cb != nullptr) s.counts.timestamp_callback_calls.fetch_add(1, std::memory_order_relaxed);
  if (cb != nullptr) return static_cast<int64_t>(cb()) - static_cast<int64_t>(simNow());
  return s.clock_shift.load(std::memory_order_relaxed);
}

void WriteCounts(State& s) {
  if (s.counts_path.empty()) return;
  FILE* f = std::fopen(s.counts_path.c_str(), "w");
  if (f == nullptr) return;
  const State::Counts& c = s.counts;
  auto u = [](const std::atomic<uint64_t>& a) {
    return static_cast<unsigned long long>(a.load(std::memory_order_relaxed));
  };
  std::fprintf(f, "{\"schema\": \"gpuacct-sim-cupti-counts/1\", \"callbacks\": {");
  const char* domains[CUPTI_CB_DOMAIN_SIZE] = {};
  domains[CUPTI_CB_DOMAIN_DRIVER_API] = "driver";
  domains[CUPTI_CB_DOMAIN_RUNTIME_API] = "runtime";
  domains[CUPTI_CB_DOMAIN_RESOURCE] = "resource";
  domains[CUPTI_CB_DOMAIN_SYNCHRONIZE] = "synchronize";
  domains[CUPTI_CB_DOMAIN_NVTX] = "nvtx";
  domains[CUPTI_CB_DOMAIN_STATE] = "state";
  bool first = true;
  for (int d = 1; d < CUPTI_CB_DOMAIN_SIZE; ++d) {
    if (domains[d] == nullptr) continue;
    std::fprintf(f, "%s\"%s\": %llu", first ? "" : ", ", domains[d], u(c.callbacks[d]));
    first = false;
  }
  std::fprintf(f, "}, \"records\": {");
  first = true;
  for (int k = 0; k < CUPTI_ACTIVITY_KIND_COUNT; ++k) {
    if (u(c.records[k]) == 0) continue;
    std::fprintf(f, "%s\"%d\": %llu", first ? "" : ", ", k, u(c.records[k]));
    first = false;
  }
  std::fprintf(f,
               "}, \"launches\": %llu, \"launch_callbacks\": %llu, \"launch_records\": %llu, "
               "\"launches_with_work\": %llu, \"max_launch_callbacks\": %llu, "
               "\"max_launch_records\": %llu, \"kind_switches\": %llu, "
               "\"callback_switches\": %llu, \"api_filter_switches\": %llu, "
               "\"timestamp_callback_calls\": %llu}\n",
               u(c.launches), u(c.launch_callbacks), u(c.launch_records), u(c.launches_with_work),
               u(c.max_launch_callbacks), u(c.max_launch_records), u(c.kind_switches),
               u(c.callback_switches), u(c.api_filter_switches), u(c.timestamp_callback_calls));
  std::fclose(f);
}

void ResetLocked(State& s) {
  s.subscribed = false;
  s.subscriber_name.clear();
  s.callback.store(nullptr);
  s.userdata.store(nullptr);
  for (auto& d : s.cb_enabled) {
    for (auto& c : d) c.store(0);
  }
  for (auto& k : s.kind_enabled) k.store(0);
  for (auto& c : s.runtime_api) c.store(0);
  for (auto& c : s.driver_api) c.store(0);
  s.thread_id_type.store(CUPTI_ACTIVITY_THREAD_ID_TYPE_DEFAULT);
  s.latency_timestamps.store(false);
  s.request = nullptr;
  s.complete = nullptr;
  s.pending.clear();
  s.next_threshold = kThresholdStep;
  s.produced = 0;
  s.gpu_records = 0;
  s.dropped = 0;
  s.buffer_requests = 0;
  s.done.clear();  // test helper: buffers of a previous client are abandoned, not returned
  s.flush_period_ms = 0;
}

bool ValidSubscriber(State& s, CUpti_SubscriberHandle h) {
  return s.subscribed && h == reinterpret_cast<CUpti_SubscriberHandle>(&s);
}

}  // namespace sim_cupti
