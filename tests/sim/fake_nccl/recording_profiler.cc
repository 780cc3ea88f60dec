// A profiler plugin for the fake NCCL's own tests (libsimnccl_recording_profiler.so): exports
// ncclProfiler_v1 ... v5 and writes every call it gets as a JSON line to
// GPUACCT_SIM_NCCL_RECORD (a file per process), so a test can compare what the fake NCCL told a
// plugin with the fake's truth file, for each interface version.
//   GPUACCT_SIM_NCCL_RECORD_MASK    the activation mask init returns (default: Group, Coll, P2p,
//                                   KernelCh and the v5 API / KernelLaunch events)
//   GPUACCT_SIM_NCCL_RECORD_REFUSE  1: init fails (NCCL then runs without the plugin)
// Lines: {"ev":"init","v":V,"comm":"hex","nranks":N,"rank":R}, {"ev":"start","v":V,"type":T,
// "id":I,"parent":P,"t":NS,...descriptor fields}, {"ev":"state","id":I,"state":S,"ptimer":NS},
// {"ev":"stop","id":I,"t":NS}, {"ev":"finalize","v":V}.  Ids count events from 1; parent is
// the id of the parent event (0 = none).
#include <time.h>

#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <mutex>
#include <string>

#include "profiler_abi.h"

using namespace simprof;  // NOLINT(build/namespaces): the ABI declarations of this folder

namespace {

struct Event {
  uint64_t id;
};

std::mutex g_mu;
std::FILE* g_out = nullptr;
uint64_t g_next_id = 1;
std::deque<Event> g_events;  // stable addresses: the handles given to NCCL

void Write(const std::string& line) {
  std::lock_guard<std::mutex> lock(g_mu);
  if (g_out == nullptr) {
    const char* path = std::getenv("GPUACCT_SIM_NCCL_RECORD");
    if (path == nullptr || *path == '\0') return;
    g_out = std::fopen(path, "w");
    if (g_out == nullptr) return;
  }
  std::fprintf(g_out, "%s\n", line.c_str());
  std::fflush(g_out);
}

uint64_t NowNs() {
  timespec ts{};
  clock_gettime(CLOCK_REALTIME, &ts);  // the sim clock under the fake driver
  return static_cast<uint64_t>(ts.tv_sec) * 1000000000ull + static_cast<uint64_t>(ts.tv_nsec);
}

Event* NewEvent() {
  std::lock_guard<std::mutex> lock(g_mu);
  g_events.push_back({g_next_id++});
  return &g_events.back();
}

uint64_t IdOf(const void* handle) {
  return handle != nullptr ? static_cast<const Event*>(handle)->id : 0;
}

std::string Str(const char* s) {
  std::string out = "\"";
  for (const char* p = s != nullptr ? s : ""; *p != '\0'; ++p) {
    if (*p == '"' || *p == '\\') out += '\\';
    out += (static_cast<unsigned char>(*p) < 0x20) ? '?' : *p;
  }
  return out + "\"";
}

std::string Hex(uint64_t x) {
  char b[24];
  std::snprintf(b, sizeof(b), "\"%016" PRIx64 "\"", x);
  return b;
}

int Mask() {
  const char* m = std::getenv("GPUACCT_SIM_NCCL_RECORD_MASK");
  if (m != nullptr && *m != '\0') return static_cast<int>(std::strtol(m, nullptr, 0));
  return static_cast<int>(kGroup | kColl | kP2p | kKernelCh | kGroupApi | kCollApi | kP2pApi |
                          kKernelLaunch);
}

Result Init(int v, void** ctx, int* mask, uint64_t hash, int nranks, int rank) {
  const char* refuse = std::getenv("GPUACCT_SIM_NCCL_RECORD_REFUSE");
  if (refuse != nullptr && std::strcmp(refuse, "1") == 0) {
    Write("{\"ev\":\"init_refused\",\"v\":" + std::to_string(v) + "}");
    return 1;
  }
  *ctx = NewEvent();
  *mask = Mask();
  Write("{\"ev\":\"init\",\"v\":" + std::to_string(v) + ",\"comm\":" + Hex(hash) +
        ",\"nranks\":" + std::to_string(nranks) + ",\"rank\":" + std::to_string(rank) + "}");
  return 0;
}

Result InitV1to3(int v, void** ctx, int* mask) {
  return Init(v, ctx, mask, 0, 0, -1);
}
Result InitOld1(void** ctx, int* mask) { return InitV1to3(1, ctx, mask); }
Result InitOld2(void** ctx, int* mask) { return InitV1to3(2, ctx, mask); }
Result InitOld3(void** ctx, int* mask) { return InitV1to3(3, ctx, mask); }
Result InitNew4(void** ctx, int* mask, const char*, uint64_t hash, int, int nranks, int rank,
                Logger) {
  return Init(4, ctx, mask, hash, nranks, rank);
}
Result InitNew5(void** ctx, uint64_t hash, int* mask, const char*, int, int nranks, int rank,
                Logger) {
  return Init(5, ctx, mask, hash, nranks, rank);
}

// The start line's common part; the caller appends the descriptor's own fields and "}".
std::string StartLine(int v, uint64_t type, const void* parent, Event* e) {
  return "{\"ev\":\"start\",\"v\":" + std::to_string(v) + ",\"type\":" + std::to_string(type) +
         ",\"id\":" + std::to_string(e->id) + ",\"parent\":" + std::to_string(IdOf(parent)) +
         ",\"t\":" + std::to_string(NowNs());
}

template <typename Coll>
std::string CollStrings(const Coll& k) {
  return ",\"seq\":" + std::to_string(k.seq) + ",\"func\":" + Str(k.func) +
         ",\"count\":" + std::to_string(k.count) + ",\"datatype\":" + Str(k.datatype) +
         ",\"algo\":" + Str(k.algo) + ",\"proto\":" + Str(k.proto);
}

Result StartV1(void*, void** h, DescrV1* d) {
  Event* e = NewEvent();
  *h = e;
  std::string line = StartLine(1, d->type, d->parent, e);
  if (d->type == kColl) {
    line += ",\"comm\":" + Hex(d->coll.comm_hash) + ",\"seq\":" + std::to_string(d->coll.seq) +
            ",\"func_id\":" + std::to_string(d->coll.func) +
            ",\"count\":" + std::to_string(d->coll.count) +
            ",\"datatype_id\":" + std::to_string(d->coll.datatype) +
            ",\"traffic_bytes\":" + std::to_string(d->coll.traffic_bytes);
  } else if (d->type == kP2p) {
    line += ",\"comm\":" + Hex(d->p2p.comm_hash) + ",\"func_id\":" + std::to_string(d->p2p.func) +
            ",\"peer\":" + std::to_string(d->p2p.peer) + ",\"count\":" + std::to_string(d->p2p.count);
  }
  Write(line + "}");
  return 0;
}

template <int V, typename Descr>
Result StartV2V3(void*, void** h, Descr* d) {
  Event* e = NewEvent();
  *h = e;
  std::string line = StartLine(V, d->type, d->parent, e);
  if (d->type == kColl) {
    line += ",\"comm\":" + Hex(d->coll.comm_hash) + CollStrings(d->coll);
  } else if (d->type == kP2p) {
    line += ",\"comm\":" + Hex(d->p2p.comm_hash) + ",\"func\":" + Str(d->p2p.func) +
            ",\"peer\":" + std::to_string(d->p2p.peer) + ",\"count\":" + std::to_string(d->p2p.count);
  } else if constexpr (V == 3) {
    if (d->type == kKernelCh) line += ",\"channel\":" + std::to_string(d->kernel_ch.channel);
  }
  Write(line + "}");
  return 0;
}

template <int V, typename Descr>
Result StartV4V5(void*, void** h, Descr* d) {
  Event* e = NewEvent();
  *h = e;
  std::string line = StartLine(V, d->type, d->parent, e);
  if (d->type == kColl) {
    line += CollStrings(d->coll);
  } else if (d->type == kP2p) {
    line += ",\"func\":" + Str(d->p2p.func) + ",\"peer\":" + std::to_string(d->p2p.peer) +
            ",\"count\":" + std::to_string(d->p2p.count);
  } else if (d->type == kKernelCh) {
    line += ",\"channel\":" + std::to_string(d->kernel_ch.channel) +
            ",\"ptimer\":" + std::to_string(d->kernel_ch.ptimer);
  }
  if constexpr (V == 5) {
    if (d->type == kCollApi) {
      line += ",\"func\":" + Str(d->coll_api.func) + ",\"count\":" + std::to_string(d->coll_api.count);
    } else if (d->type == kGroupApi) {
      line += ",\"depth\":" + std::to_string(d->group_api.group_depth);
    } else if (d->type == kColl) {
      line += ",\"parent_group\":" + std::to_string(IdOf(d->coll.parent_group));
    }
  }
  Write(line + "}");
  return 0;
}

Result Stop(void* h) {
  Write("{\"ev\":\"stop\",\"id\":" + std::to_string(IdOf(h)) + ",\"t\":" + std::to_string(NowNs()) +
        "}");
  return 0;
}

Result StateOld(void* h, int state, StateArgsV1*) {
  Write("{\"ev\":\"state\",\"id\":" + std::to_string(IdOf(h)) + ",\"state\":" +
        std::to_string(state) + "}");
  return 0;
}

Result StateNew(void* h, int state, StateArgsV4* args) {
  std::string line = "{\"ev\":\"state\",\"id\":" + std::to_string(IdOf(h)) +
                     ",\"state\":" + std::to_string(state);
  if (state == kKernelChStop && args != nullptr) {
    line += ",\"ptimer\":" + std::to_string(args->kernel_ch.ptimer);
  }
  Write(line + "}");
  return 0;
}

template <int V>
Result Finalize(void*) {
  Write("{\"ev\":\"finalize\",\"v\":" + std::to_string(V) + "}");
  return 0;
}

}  // namespace

extern "C" {
__attribute__((visibility("default"))) TableV1 ncclProfiler_v1 = {
    "simnccl-recording", InitOld1, StartV1, Stop, StateOld, Finalize<1>};
__attribute__((visibility("default"))) TableV2 ncclProfiler_v2 = {
    "simnccl-recording", InitOld2, StartV2V3<2, DescrV2>, Stop, StateOld, Finalize<2>};
__attribute__((visibility("default"))) TableV3 ncclProfiler_v3 = {
    "simnccl-recording", InitOld3, StartV2V3<3, DescrV3>, Stop, StateOld, Finalize<3>};
__attribute__((visibility("default"))) TableV4 ncclProfiler_v4 = {
    "simnccl-recording", InitNew4, StartV4V5<4, DescrV4>, Stop, StateNew, Finalize<4>};
__attribute__((visibility("default"))) TableV5 ncclProfiler_v5 = {
    "simnccl-recording", InitNew5, StartV4V5<5, DescrV5>, Stop, StateNew, Finalize<5>};
}
