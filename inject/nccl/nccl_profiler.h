// libgpuacct.so as an NCCL profiler plugin (docs/injection.md, "NCCL profiler plugin").
//
// The library exports ncclProfiler_v5 ... ncclProfiler_v1 (inject/nccl/nccl_profiler_abi.h has the
// layouts) and, when it loads, points NCCL_PROFILER_PLUGIN at itself
// (prepare_nccl_profiler_env, called from the load constructor).  NCCL then calls it:
//   init       once per communicator: we keep its hash, name, ranks, rank, nodes (v4+) and ask
//              for collective and point-to-point events (NCCL's `coll` / `p2p`) and their
//              kernel plan's `group` event (one per kernel: its id tells which operations
//              shared a kernel);
//   startEvent for each collective / p2p operation, on the thread that launches its kernel
//              (right after the launch, NCCL's enqueue.cc): one fixed-size CollectiveRecord
//              stamped host_enqueue = now goes into that thread's queue (O(1), no lock, no
//              allocation after the thread's first event; a full queue drops the record and
//              counts it);
//   stopEvent  marks the end of the *enqueue*, not of the GPU work: nothing is recorded.
// GPU times come later, in the worker, from the CUPTI kernel of the launch next to the record
// on the same thread (inject/nccl/nccl_match.h).
//
// Forwarding: when NCCL_PROFILER_PLUGIN named another plugin before we replaced it, that plugin
// is loaded at the first init and gets every call for the event types it asked for (NCCL loads
// only one plugin).  Rule and limits: docs/injection.md.
//
// Every entry point is noexcept, accepts null pointers and unknown event types (ignored), and
// never fails the communicator: it returns success and counts what it lost.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "analysis/model/collective.h"

namespace gpuacct::inject {

// One collective / p2p as the plugin saw it, for the worker.
struct PluginRecord {
  CollectiveRecord record;  // source kNcclPlugin, host_enqueue set, GPU fields 0
  uint32_t thread = 0;      // gettid() of the enqueuing thread (HostApiCall::thread)
  int32_t peer = -1;        // p2p: the other rank; -1 otherwise (not in CollectiveRecord)
  // The kernel plan it is part of: the id of the `Group` event its descriptor names as its
  // group (v5: coll.parentGroup / p2p.parentGroup; v1-v4: its parent).  NCCL starts one Group
  // event per kernel plan and then the plan's operations under it (src/plugin/profiler.cc,
  // ncclProfilerStartGroupEvent / StartTaskEvents, called by enqueue.cc hostStreamPlanTask): the
  // same group is the same kernel.  0 = not known (no Group event, or its handle was lost).
  uint64_t group = 0;
};

// What the plugin did so far (process-wide, monotonic).
struct NcclPluginCounters {
  int version = 0;               // the interface version NCCL called (0: never initialised)
  uint64_t communicators = 0;    // init calls
  uint64_t records = 0;          // collectives / p2p queued
  uint64_t events_dropped = 0;   // lost: queue full, no handle left, allocation failed
  bool forwarding = false;       // another plugin gets our events
};
NcclPluginCounters nccl_plugin_counters();
// One line on forwarding ("forwards to ... (v5)", "... offers no v5: not forwarded", ...);
// empty when no other plugin was named.
std::string nccl_plugin_forward_note();

// Worker: appends every queued record (any thread) to `out`, per thread in enqueue order.
void drain_nccl_records(std::vector<PluginRecord>& out);

// Load constructor: NCCL_PROFILER_PLUGIN := `self` (this library's absolute path), keeping a
// plugin it already named in GPUACCT_NCCL_PROFILER_NEXT for forwarding.  Left alone when it
// names us already or is "none" (the user switched NCCL's profiler off).  No allocation beyond
// setenv's own.
void prepare_nccl_profiler_env(const char* self);

// The environment variable that keeps the other plugin (inherited by child processes).
inline constexpr const char* kNcclNextPluginEnv = "GPUACCT_NCCL_PROFILER_NEXT";

}  // namespace gpuacct::inject
