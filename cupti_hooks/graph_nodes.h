// Node counts of CUDA graphs by CUPTI graph id, for GRAPH_TRACE records, which give a graph
// launch's span but not what ran in it (CUpti_ActivityGraphTrace2: "without giving visibility
// about the execution of its nodes").  Counted from the resource callbacks
// CUPTI_CBID_RESOURCE_GRAPHNODE_CREATED / _DESTROY_STARTING (CUpti_GraphData.graph, id by
// cuptiGetGraphId): once per node built -- stream capture, instantiation (which clones the
// nodes into the graph that runs), never per launch -- on whichever thread builds the graph,
// read by the worker.
//
// Lock-free and allocation-free: a fixed table of 64-bit slots, (graph id + 1) << 32 | nodes,
// open addressing.  A full table drops the graph (its spans then carry no count: counted by
// the reader as unknown, the walls do not depend on it).
#pragma once

#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>

namespace gpuacct::cupti {

class GraphNodeCounts {
 public:
  // `delta` nodes more (or fewer) in graph `graph_id`; the count never goes below 0.
  void add(uint32_t graph_id, int32_t delta);
  // The graph's nodes now; 0 when unknown.
  uint32_t nodes(uint32_t graph_id) const;
  // Graphs that found no free slot.
  uint64_t dropped() const { return dropped_.load(std::memory_order_relaxed); }
  void clear_for_testing();

  static constexpr size_t kSlots = 4096;

 private:
  std::array<std::atomic<uint64_t>, kSlots> slots_{};
  std::atomic<uint64_t> dropped_{0};
};

}  // namespace gpuacct::cupti
