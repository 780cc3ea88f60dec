// Turns CUPTI activity records into the event model (analysis/model/events.h).  CUDA-free
// interface: records are passed as opaque pointers; activity_parser.cc reads them with the layouts
// chosen in cupti_record_types.h.
//
// Threading: one parser per consumer thread (the library's worker).  Not thread-safe.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <unordered_map>
#include <vector>

#include "analysis/model/events.h"
#include "analysis/model/name_table.h"
#include "analysis/model/stats.h"
#include "cupti_hooks/graph_nodes.h"

namespace gpuacct::cupti {

// Host-blocking synchronisation seen through SYNCHRONIZATION records, by
// CUpti_ActivitySynchronizationType (1 event sync, 2 stream wait event, 3 stream sync,
// 4 context sync).
struct SyncTotals {
  std::array<int64_t, 5> count{};
  std::array<int64_t, 5> ns{};
};

// CUPTI's default thread ids, used when cuptiSetThreadIdType(SYSTEM) is refused: the low 32
// bits of pthread_self(), which the C library gives to a new thread once an old one has gone,
// mapped onto gettid() by time.  The library learns each thread's id at the thread's first
// call, before CUPTI has a record of it, and its exit (inject/recording/recorder.h, Registry); a
// record belongs to the thread that had its id when the call was made.  A thread's lives stay known
// after it exits, until forget_before() says no record of it can still come.
class ThreadIds {
 public:
  // Thread `tid` had `cupti_id` from `ns` on.  An open life of another thread with that id is
  // over by then (the ids of live threads are unique).
  void started(uint32_t cupti_id, uint32_t tid, int64_t ns);
  // Thread `tid`'s life with `cupti_id` ended at `ns`.
  void exited(uint32_t cupti_id, uint32_t tid, int64_t ns);
  // The tid of the thread that had `cupti_id` at `t` (the first life not over by then, or the
  // latest life when it ended exactly at `t`: a call made at the instant its thread exited); 0
  // when none is known, or its life was forgotten.
  uint32_t resolve(uint32_t cupti_id, int64_t t) const;
  // Forgets lives that ended before `t` (the watermark: no record made before it is to come).
  void forget_before(int64_t t);
  size_t lives() const;

 private:
  struct Life {
    uint32_t tid;
    int64_t end;  // kOpen while the thread lives
  };
  struct Lives {
    int64_t forgotten_until = std::numeric_limits<int64_t>::min();  // records before it: unknown
    std::vector<Life> lives;  // in the order the threads started
  };
  static constexpr int64_t kOpen = std::numeric_limits<int64_t>::max();
  std::unordered_map<uint32_t, Lives> by_id_;
};

struct ParseTotals {
  SyncTotals sync;
  int64_t kernels = 0, memcpys = 0, memsets = 0, api_calls = 0;
  int64_t api_calls_nested = 0;  // timed by callbacks: driver calls nested in runtime calls
  // GRAPH_TRACE records (one per graph launch), and those whose graph's node count was unknown.
  int64_t graph_spans = 0, graph_spans_without_nodes = 0;
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

  // CUPTI thread ids are gettid() when cuptiSetThreadIdType(SYSTEM) succeeded, as the host
  // ranges' are.  Otherwise parse_record() leaves CUPTI's pthread ids in HostApiCall.thread and
  // the worker, once it has learnt the threads that made the parsed records (thread_ids()),
  // calls resolve_threads() on them.  A call whose thread stays unknown keeps CUPTI's id and is
  // counted (Stat::cupti_thread_ids_unknown): its data ranges cannot be told.
  ThreadIds& thread_ids() { return thread_ids_; }
  void resolve_threads(std::vector<HostApiCall>& calls, size_t from, Stats& stats) const;

  // CUPTI's clock minus the host clock (Collector::clock_offset_ns): every record timestamp is
  // moved onto the host clock by subtracting it.  0 (the default) when CUPTI reads the host
  // clock itself.  A 0 timestamp (unknown, or an unfinished op of a forced flush) stays 0.
  void set_clock_offset(int64_t cupti_minus_host_ns) { clock_offset_ = cupti_minus_host_ns; }

  // Whether the buffers parsed next came from the library's closing forced flush
  // (Collector::stop).  A GPU record CUPTI hands out with a zero start or end (CUPTI_TIMESTAMP_
  // UNKNOWN) is never turned into an op; it is counted by where it came from:
  //  - the closing flush: work still running at exit (Stat::cupti_records_incomplete);
  //  - anywhere else: work that ran but whose time is unknown -- "no timing information could
  //    be collected for lack of device memory" (cupti_activity.h, cuptiActivityGetNextRecord),
  //    or a forced flush mid-run (a context being destroyed, cudaDeviceReset) -- so its GPU time
  //    is missing from the rows (Stat::cupti_records_untimed, data loss).
  void set_closing_flush(bool closing) { closing_flush_ = closing; }

  // Where GRAPH_TRACE records find their graph's node count (Collector::graph_node_counts);
  // without it every span's count is unknown.
  void set_graph_node_counts(const GraphNodeCounts* counts) { graph_nodes_ = counts; }
  // Without SYNCHRONIZATION records (the design leaves the kind out: the accounting does not
  // read it), the totals' blocking syncs come from the API records of the traced sync calls.
  void set_sync_from_api_calls(bool on) { sync_from_api_ = on; }

  // A traced call timed by its own callbacks (ApiSource::kCallbacks, host clock): the same
  // HostApiCall, name and totals its API record would give.  `correlation_id` 0: the call
  // failed.  `nested`: the driver call inside a runtime call, under an id of its own (counted
  // in totals().api_calls_nested, not in api_calls or the sync totals).  False (nothing added)
  // for an index outside traced_apis().
  bool add_timed_call(size_t traced_index, TimeNs start, TimeNs end, uint32_t correlation_id,
                      uint32_t thread, EventBatch& out, bool nested = false);

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
  NameId graph_name(uint32_t graph_id, uint32_t nodes);
  void note_device(uint32_t device);
  void add_call(size_t traced_index, TimeNs start, TimeNs end, uint64_t correlation_id,
                uint32_t thread, EventBatch& out, bool nested = false);
  // Appends `op` unless CUPTI gave it no start or end (counted: set_closing_flush).
  void push_timed(const GpuOp& op, EventBatch& out, Stats& stats) const;

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
  ThreadIds thread_ids_;
  const GraphNodeCounts* graph_nodes_ = nullptr;
  // "[CUDA graph 5: 998 nodes]" by graph id, made again when the count changes.
  struct GraphName {
    uint32_t nodes = 0;
    NameId name = kNoName;
  };
  std::unordered_map<uint32_t, GraphName> graph_names_;
  bool sync_from_api_ = false;
  // By traced-api index: the CUpti_ActivitySynchronizationType a sync call is (0: not a sync).
  std::vector<uint8_t> api_sync_type_;
  uint64_t devices_seen_mask_ = 0;
  int64_t clock_offset_ = 0;
  bool closing_flush_ = false;
  ParseTotals totals_;
};

}  // namespace gpuacct::cupti
