// Turns CUPTI activity records into the event model (analysis/model/events.h).  CUDA-free
// interface: records are passed as opaque pointers; activity_parser.cc reads them with the layouts
// chosen in cupti_record_types.h.
//
// Threading: one parser per consumer thread (the library's worker).  Not thread-safe.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <unordered_map>
#include <vector>

#include "analysis/model/events.h"
#include "analysis/model/name_table.h"
#include "analysis/model/stats.h"

namespace gpuacct::cupti {

// Host-blocking synchronisation seen through SYNCHRONIZATION records, by
// CUpti_ActivitySynchronizationType (1 event sync, 2 stream wait event, 3 stream sync,
// 4 context sync).
struct SyncTotals {
  std::array<int64_t, 5> count{};
  std::array<int64_t, 5> ns{};
};

struct ParseTotals {
  SyncTotals sync;
  int64_t kernels = 0, memcpys = 0, memsets = 0, api_calls = 0;
  std::vector<uint16_t> devices;  // distinct device ids seen, in first-seen order
};

class ActivityParser {
 public:
  explicit ActivityParser(NameTable& names);

  // Parses one record (a CUpti_Activity*).  Appends GpuOps / HostApiCalls to `out`.
  void parse_record(const void* record, EventBatch& out, Stats& stats);

  // Walks a completed buffer with cuptiActivityGetNextRecord (`next_record` has its signature:
  // CUptiResult (*)(uint8_t*, size_t, CUpti_Activity**)) and parses every record.  Returns
  // the number of records.
  size_t parse_buffer(void* next_record, uint8_t* buffer, size_t valid_bytes, EventBatch& out,
                      Stats& stats);

  // CUPTI thread ids are gettid() when cuptiSetThreadIdType(SYSTEM) succeeded.  Otherwise they
  // are pthread_self() values: the worker registers pthread -> tid pairs it learns from its
  // per-thread rings so HostApiCall.thread matches the ranges' thread ids.
  void set_thread_alias(uint32_t cupti_thread_id, uint32_t tid) {
    thread_alias_[cupti_thread_id] = tid;
  }

  // CUPTI's clock minus the host clock (Collector::clock_offset_ns): every record timestamp is
  // moved onto the host clock by subtracting it.  0 (the default) when CUPTI reads the host
  // clock itself.  A 0 timestamp (unknown, or an unfinished op of a forced flush) stays 0.
  void set_clock_offset(int64_t cupti_minus_host_ns) { clock_offset_ = cupti_minus_host_ns; }

  const ParseTotals& totals() const { return totals_; }
  ParseTotals& mutable_totals() { return totals_; }
  NameTable& names() { return names_; }

  // Builds a buffer of synthetic records (kernels, memcpys, API calls in rotation) laid out the
  // way parse_records_contiguous() walks them: for benchmarks and tests without CUPTI.
  static std::vector<uint8_t> make_synthetic_records(size_t count, size_t* record_stride);
  // Parses `count` records `stride` bytes apart (no CUPTI call): the per-record cost alone.
  size_t parse_records_contiguous(const uint8_t* data, size_t count, size_t stride, EventBatch& out,
                                  Stats& stats);

 private:
  NameId kernel_name(const char* name, CollectiveType* collective);
  void note_device(uint32_t device);

  NameTable& names_;
  struct CacheEntry {
    const char* ptr = nullptr;
    NameId id = kNoName;
    CollectiveType collective = CollectiveType::kNone;
  };
  std::array<CacheEntry, 4096> name_cache_{};
  std::unordered_map<const char*, CacheEntry> name_map_;
  std::array<NameId, 6> copy_names_{};  // by CopyDir
  NameId memset_name_ = kNoName;
  std::vector<NameId> api_names_;  // by traced-api index
  std::unordered_map<uint32_t, uint32_t> thread_alias_;
  uint64_t devices_seen_mask_ = 0;
  int64_t clock_offset_ = 0;
  ParseTotals totals_;
};

}  // namespace gpuacct::cupti
