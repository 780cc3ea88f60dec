// NVTX injection: the NVTX3 loader in the application (PyTorch, NCCL, the program itself)
// dlopens NVTX_INJECTION64_PATH on its first NVTX call and calls InitializeInjectionNvtx2
// with its export table.  We fill the core (and core2 = domain) callback slots; every other
// slot stays a no-op.  Each callback writes one record into the calling thread's ring, stamped
// with the clock read as the callback's first act: the first call starts the library
// (inject/recording/recorder.h, emit).
#define NVTX_NO_IMPL
#include <nvtx3/nvToolsExt.h>

#include <atomic>
#include <cstring>
#include <new>

#include "inject/clock.h"
#include "inject/recording/recorder.h"

// The handle types NVTX leaves for tools to define.
struct nvtxDomainRegistration_st {
  uint32_t id;
  char name[48];
  nvtxDomainRegistration_st* next;  // every domain made, reachable from g_domains (below)
};
struct nvtxStringRegistration_st {
  char text[1];  // allocated with the string's length
};

namespace gpuacct::inject {
namespace {

std::atomic<uint32_t> g_next_domain{1};  // 0 = the default domain

const char* message_of(const nvtxEventAttributes_t* a) {
  if (a == nullptr) return nullptr;
  switch (a->messageType) {
    case NVTX_MESSAGE_TYPE_ASCII:
      return a->message.ascii;
    case NVTX_MESSAGE_TYPE_REGISTERED:
      return a->message.registered != nullptr ? reinterpret_cast<const char*>(a->message.registered)
                                              : nullptr;
    default:
      return nullptr;  // wide strings: not matched against patterns
  }
}

uint32_t domain_id(nvtxDomainHandle_t d) {
  return d != nullptr ? d->id : 0;
}

// ---- core -----------------------------------------------------------------------------------
void NVTX_API MarkEx(const nvtxEventAttributes_t* a) {
  const int64_t ts = now_ns();
  try {
    emit(ts, HostRecType::kNvtxMark, 0, message_of(a));
  } catch (...) {
  }
}
void NVTX_API MarkA(const char* m) {
  const int64_t ts = now_ns();
  try {
    emit(ts, HostRecType::kNvtxMark, 0, m);
  } catch (...) {
  }
}
nvtxRangeId_t NVTX_API RangeStartEx(const nvtxEventAttributes_t* a) {
  const int64_t ts = now_ns();
  try {
    const uint64_t id = next_range_id();
    emit(ts, HostRecType::kNvtxStart, static_cast<int64_t>(id), message_of(a));
    return id;
  } catch (...) {
    return 0;
  }
}
nvtxRangeId_t NVTX_API RangeStartA(const char* m) {
  const int64_t ts = now_ns();
  try {
    const uint64_t id = next_range_id();
    emit(ts, HostRecType::kNvtxStart, static_cast<int64_t>(id), m);
    return id;
  } catch (...) {
    return 0;
  }
}
void NVTX_API RangeEnd(nvtxRangeId_t id) {
  const int64_t ts = now_ns();
  try {
    emit(ts, HostRecType::kNvtxEnd, static_cast<int64_t>(id), nullptr);
  } catch (...) {
  }
}
int NVTX_API RangePushEx(const nvtxEventAttributes_t* a) {
  const int64_t ts = now_ns();
  try {
    emit(ts, HostRecType::kNvtxPush, 0, message_of(a));
  } catch (...) {
  }
  return 0;
}
int NVTX_API RangePushA(const char* m) {
  const int64_t ts = now_ns();
  try {
    emit(ts, HostRecType::kNvtxPush, 0, m);
  } catch (...) {
  }
  return 0;
}
int NVTX_API RangePop() {
  const int64_t ts = now_ns();
  try {
    emit(ts, HostRecType::kNvtxPop, 0, nullptr);
  } catch (...) {
  }
  return 0;
}

// ---- core2 (domains) ------------------------------------------------------------------------
void NVTX_API DomainMarkEx(nvtxDomainHandle_t d, const nvtxEventAttributes_t* a) {
  const int64_t ts = now_ns();
  try {
    emit(ts, HostRecType::kNvtxMark, 0, message_of(a), domain_id(d));
  } catch (...) {
  }
}
nvtxRangeId_t NVTX_API DomainRangeStartEx(nvtxDomainHandle_t d, const nvtxEventAttributes_t* a) {
  const int64_t ts = now_ns();
  try {
    const uint64_t id = next_range_id();
    emit(ts, HostRecType::kNvtxStart, static_cast<int64_t>(id), message_of(a), domain_id(d));
    return id;
  } catch (...) {
    return 0;
  }
}
void NVTX_API DomainRangeEnd(nvtxDomainHandle_t d, nvtxRangeId_t id) {
  const int64_t ts = now_ns();
  try {
    emit(ts, HostRecType::kNvtxEnd, static_cast<int64_t>(id), nullptr, domain_id(d));
  } catch (...) {
  }
}
int NVTX_API DomainRangePushEx(nvtxDomainHandle_t d, const nvtxEventAttributes_t* a) {
  const int64_t ts = now_ns();
  try {
    emit(ts, HostRecType::kNvtxPush, 0, message_of(a), domain_id(d));
  } catch (...) {
  }
  return 0;
}
int NVTX_API DomainRangePop(nvtxDomainHandle_t d) {
  const int64_t ts = now_ns();
  try {
    emit(ts, HostRecType::kNvtxPop, 0, nullptr, domain_id(d));
  } catch (...) {
  }
  return 0;
}
nvtxStringHandle_t NVTX_API DomainRegisterStringA(nvtxDomainHandle_t, const char* s) {
  // Registered strings live for the process (NVTX has no unregister); rare calls.
  if (s == nullptr) return nullptr;
  const size_t n = std::strlen(s);
  char* copy = new (std::nothrow) char[n + 1];
  if (copy == nullptr) return nullptr;
  std::memcpy(copy, s, n + 1);
  return reinterpret_cast<nvtxStringHandle_t>(copy);
}
std::atomic<nvtxDomainRegistration_st*> g_domains{nullptr};

nvtxDomainHandle_t NVTX_API DomainCreateA(const char* name) {
  auto* d = new (std::nothrow) nvtxDomainRegistration_st();
  if (d == nullptr) return nullptr;
  d->id = g_next_domain.fetch_add(1, std::memory_order_relaxed);
  // Domains live for the process (records may name them after nvtxDomainDestroy); kept in a
  // list so that they stay reachable, not leaked (LeakSanitizer).
  d->next = g_domains.load(std::memory_order_relaxed);
  while (!g_domains.compare_exchange_weak(d->next, d, std::memory_order_release,
                                          std::memory_order_relaxed)) {
  }
  if (name != nullptr) {
    std::strncpy(d->name, name, sizeof(d->name) - 1);
    d->name[sizeof(d->name) - 1] = '\0';
  }
  return d;
}
void NVTX_API DomainDestroy(nvtxDomainHandle_t) {
  // Kept: records may still name the domain id; a handful of bytes per domain.
}

template <typename F>
void set_slot(NvtxFunctionTable table, unsigned int size, unsigned int id, F fn) {
  if (table == nullptr || id == 0 || id > size || table[id] == nullptr) return;
  *table[id] = reinterpret_cast<NvtxFunctionPointer>(fn);
}

}  // namespace
}  // namespace gpuacct::inject

extern "C" __attribute__((visibility("default"))) int InitializeInjectionNvtx2(
    NvtxGetExportTableFunc_t get_export_table) {
  using namespace gpuacct::inject;
  try {
    if (get_export_table == nullptr) return 0;
    const auto* cb =
        static_cast<const NvtxExportTableCallbacks*>(get_export_table(NVTX_ETID_CALLBACKS));
    if (cb == nullptr || cb->GetModuleFunctionTable == nullptr) return 0;
    NvtxFunctionTable core = nullptr;
    unsigned int core_size = 0;
    if (cb->GetModuleFunctionTable(NVTX_CB_MODULE_CORE, &core, &core_size) == 0 ||
        core == nullptr) {
      return 0;
    }
    set_slot(core, core_size, NVTX_CBID_CORE_MarkEx, &MarkEx);
    set_slot(core, core_size, NVTX_CBID_CORE_MarkA, &MarkA);
    set_slot(core, core_size, NVTX_CBID_CORE_RangeStartEx, &RangeStartEx);
    set_slot(core, core_size, NVTX_CBID_CORE_RangeStartA, &RangeStartA);
    set_slot(core, core_size, NVTX_CBID_CORE_RangeEnd, &RangeEnd);
    set_slot(core, core_size, NVTX_CBID_CORE_RangePushEx, &RangePushEx);
    set_slot(core, core_size, NVTX_CBID_CORE_RangePushA, &RangePushA);
    set_slot(core, core_size, NVTX_CBID_CORE_RangePop, &RangePop);
    NvtxFunctionTable core2 = nullptr;
    unsigned int core2_size = 0;
    if (cb->GetModuleFunctionTable(NVTX_CB_MODULE_CORE2, &core2, &core2_size) != 0 &&
        core2 != nullptr) {
      set_slot(core2, core2_size, NVTX_CBID_CORE2_DomainMarkEx, &DomainMarkEx);
      set_slot(core2, core2_size, NVTX_CBID_CORE2_DomainRangeStartEx, &DomainRangeStartEx);
      set_slot(core2, core2_size, NVTX_CBID_CORE2_DomainRangeEnd, &DomainRangeEnd);
      set_slot(core2, core2_size, NVTX_CBID_CORE2_DomainRangePushEx, &DomainRangePushEx);
      set_slot(core2, core2_size, NVTX_CBID_CORE2_DomainRangePop, &DomainRangePop);
      set_slot(core2, core2_size, NVTX_CBID_CORE2_DomainRegisterStringA, &DomainRegisterStringA);
      set_slot(core2, core2_size, NVTX_CBID_CORE2_DomainCreateA, &DomainCreateA);
      set_slot(core2, core2_size, NVTX_CBID_CORE2_DomainDestroy, &DomainDestroy);
    }
    return 1;
  } catch (...) {
    return 0;
  }
}
