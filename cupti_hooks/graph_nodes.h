// Node counts of CUDA graphs by CUPTI graph id, for GRAPH_TRACE records, which give a graph
// launch's span but not what ran in it (CUpti_ActivityGraphTrace2: "without giving visibility
// about the execution of its nodes").  Counted from the resource callbacks
// CUPTI_CBID_RESOURCE_GRAPHNODE_CREATED / _CLONED / _DESTROY_STARTING (CUpti_GraphData.graph,
// id by cuptiGetGraphId): once per node built -- stream capture, instantiation (which clones the
// nodes into the graph that runs), never per launch -- on whichever thread builds the graph,
// read by the worker.  Which graph id a GRAPH_TRACE record carries (the captured graph's or the
// clone's) is not documented; the clone's counts are kept too, and a span whose id has no
// count says so (ParseTotals::graph_spans_without_nodes).
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
  // How CUPTI reported a node: built (GRAPHNODE_CREATED) or cloned into another graph
  // (GRAPHNODE_CLONED: instantiation clones the captured graph into the one that runs, and
  // NVIDIA's cuda_graphs_trace sample sees instantiation report nodes as either).  Each is
  // counted apart and a graph's count is the larger: a clone reported both ways is not counted
  // twice.
  enum Source : uint8_t { kCreated = 0, kCloned = 1 };
  // `delta` nodes more (or fewer) in graph `graph_id`; a count never goes below 0.  A node about
  // to go (GRAPHNODE_DESTROY_STARTING) is taken from both.
  void add(uint32_t graph_id, int32_t delta, Source source = kCreated);
  // The graph's nodes now; 0 when unknown.
  uint32_t nodes(uint32_t graph_id) const;
  // Graphs that found no free slot.
  uint64_t dropped() const { return dropped_.load(std::memory_order_relaxed); }
  void clear_for_testing();

  static constexpr size_t kSlots = 4096;

 private:
  using Table = std::array<std::atomic<uint64_t>, kSlots>;
  bool add_to(Table& t, uint32_t graph_id, int32_t delta);
  static uint32_t read(const Table& t, uint32_t graph_id);
  Table tables_[2]{};
  std::atomic<uint64_t> dropped_{0};
};

}  // namespace gpuacct::cupti
