#include "cupti_hooks/activity_parser.h"

#include <cstring>
#include <string>
#include <string_view>

#include "analysis/model/nccl_names.h"
#include "cupti_hooks/api_table.h"
#include "cupti_hooks/cupti_record_types.h"

namespace gpuacct::cupti {
namespace {

CopyDir copy_dir_of(uint8_t kind) {
  switch (kind) {
    case CUPTI_ACTIVITY_MEMCPY_KIND_HTOD:
    case CUPTI_ACTIVITY_MEMCPY_KIND_HTOA:
      return CopyDir::kH2D;
    case CUPTI_ACTIVITY_MEMCPY_KIND_DTOH:
    case CUPTI_ACTIVITY_MEMCPY_KIND_ATOH:
      return CopyDir::kD2H;
    case CUPTI_ACTIVITY_MEMCPY_KIND_DTOD:
    case CUPTI_ACTIVITY_MEMCPY_KIND_DTOA:
    case CUPTI_ACTIVITY_MEMCPY_KIND_ATOD:
    case CUPTI_ACTIVITY_MEMCPY_KIND_ATOA:
      return CopyDir::kD2D;
    case CUPTI_ACTIVITY_MEMCPY_KIND_HTOH:
      return CopyDir::kH2H;
    case CUPTI_ACTIVITY_MEMCPY_KIND_PTOP:
      return CopyDir::kP2P;
    default:
      return CopyDir::kNone;
  }
}

// A CUPTI timestamp on the host clock (`offset`: CUPTI's clock minus the host's); 0 = unknown.
inline TimeNs host_time(uint64_t v, int64_t offset) {
  return v == 0 ? 0 : static_cast<TimeNs>(v) - offset;
}

// The fields every GPU-op record (kernel, memcpy, P2P memcpy, memset) shares.
template <typename Record>
GpuOp op_from(const Record* r, GpuOpKind kind, int64_t clock_offset) {
  GpuOp op;
  op.start = host_time(r->start, clock_offset);
  op.end = host_time(r->end, clock_offset);
  op.correlation_id = r->correlationId;
  op.stream = r->streamId;
  op.graph_id = r->graphId;
  op.device = static_cast<uint16_t>(r->deviceId);
  op.kind = kind;
  return op;
}

}  // namespace

ActivityParser::ActivityParser(NameTable& names) : names_(names) {
  copy_names_[static_cast<size_t>(CopyDir::kNone)] = names_.intern("[memcpy]");
  copy_names_[static_cast<size_t>(CopyDir::kH2D)] = names_.intern("[memcpy HtoD]");
  copy_names_[static_cast<size_t>(CopyDir::kD2H)] = names_.intern("[memcpy DtoH]");
  copy_names_[static_cast<size_t>(CopyDir::kD2D)] = names_.intern("[memcpy DtoD]");
  copy_names_[static_cast<size_t>(CopyDir::kP2P)] = names_.intern("[memcpy PtoP]");
  copy_names_[static_cast<size_t>(CopyDir::kH2H)] = names_.intern("[memcpy HtoH]");
  memset_name_ = names_.intern("[memset]");
  size_t n = 0;
  const TracedApi* apis = traced_apis(&n);
  api_names_.resize(n);
  api_sync_type_.assign(n, 0);
  for (size_t i = 0; i < n; ++i) {
    api_names_[i] = names_.intern(apis[i].name);
    if (apis[i].kind != HostApiKind::kSync) continue;
    const std::string_view name = apis[i].name;
    api_sync_type_[i] =
        static_cast<uint8_t>(name.find("StreamSynchronize") != std::string_view::npos
                                 ? CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_STREAM_SYNCHRONIZE
                             : name.find("EventSynchronize") != std::string_view::npos
                                 ? CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_EVENT_SYNCHRONIZE
                                 : CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_CONTEXT_SYNCHRONIZE);
  }
}

NameId ActivityParser::graph_name(uint32_t graph_id, uint32_t nodes) {
  GraphName& g = graph_names_[graph_id];
  if (g.name == kNoName || g.nodes != nodes) {
    g.nodes = nodes;
    std::string text = "[CUDA graph " + std::to_string(graph_id);
    text += nodes > 0 ? ": " + std::to_string(nodes) + " nodes]" : "]";
    g.name = names_.intern(text);
  }
  return g.name;
}

NameId ActivityParser::kernel_name(const char* name, CollectiveType* collective) {
  if (name == nullptr) {
    *collective = CollectiveType::kNone;
    return kNoName;
  }
  // CUPTI shares one name pointer between all records of a kernel: cache by pointer.
  const auto h = (reinterpret_cast<uintptr_t>(name) >> 4) * 0x9E3779B97F4A7C15ull;
  CacheEntry& slot = name_cache_[h >> (64 - 12)];
  if (slot.ptr == name) {
    *collective = slot.collective;
    return slot.id;
  }
  auto it = name_map_.find(name);
  if (it == name_map_.end()) {
    CacheEntry e;
    e.ptr = name;
    e.id = names_.intern(std::string_view(name));
    e.collective = classify_collective(std::string_view(name));
    it = name_map_.emplace(name, e).first;
  }
  slot = it->second;
  *collective = slot.collective;
  return slot.id;
}

void ActivityParser::note_device(uint32_t device) {
  if (device < 64) {
    const uint64_t bit = 1ull << device;
    if ((devices_seen_mask_ & bit) != 0) return;
    devices_seen_mask_ |= bit;
  } else {
    for (uint16_t d : totals_.devices) {
      if (d == device) return;
    }
  }
  totals_.devices.push_back(static_cast<uint16_t>(device));
}

void ActivityParser::push_timed(const GpuOp& op, EventBatch& out, Stats& stats) const {
  if (op.start == 0 || op.end == 0) {
    stats.add(closing_flush_ ? Stat::cupti_records_incomplete : Stat::cupti_records_untimed);
    return;
  }
  out.gpu_ops.push_back(op);
}

void ActivityParser::parse_record(const void* record, EventBatch& out, Stats& stats) {
  const auto* base = static_cast<const CUpti_Activity*>(record);
  switch (base->kind) {
    case CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL:
    case CUPTI_ACTIVITY_KIND_KERNEL: {
      const auto* k = static_cast<const KernelRecord*>(record);
      GpuOp op = op_from(k, GpuOpKind::kKernel, clock_offset_);
      op.name = kernel_name(k->name, &op.collective);
      note_device(k->deviceId);
      push_timed(op, out, stats);
      ++totals_.kernels;
      return;
    }
    case CUPTI_ACTIVITY_KIND_MEMCPY: {
      const auto* m = static_cast<const MemcpyRecord*>(record);
      GpuOp op = op_from(m, GpuOpKind::kMemcpy, clock_offset_);
      op.bytes = m->bytes;
      op.copy_dir = copy_dir_of(m->copyKind);
      op.name = copy_names_[static_cast<size_t>(op.copy_dir)];
      if (m->srcKind == CUPTI_ACTIVITY_MEMORY_KIND_PAGEABLE ||
          m->dstKind == CUPTI_ACTIVITY_MEMORY_KIND_PAGEABLE) {
        op.flags |= kGpuOpPageable;
      }
      note_device(m->deviceId);
      push_timed(op, out, stats);
      ++totals_.memcpys;
      return;
    }
    case CUPTI_ACTIVITY_KIND_MEMCPY2: {
      const auto* m = static_cast<const MemcpyPtoPRecord*>(record);
      GpuOp op = op_from(m, GpuOpKind::kMemcpy, clock_offset_);
      op.bytes = m->bytes;
      op.copy_dir = CopyDir::kP2P;
      op.name = copy_names_[static_cast<size_t>(CopyDir::kP2P)];
      note_device(m->deviceId);
      push_timed(op, out, stats);
      ++totals_.memcpys;
      return;
    }
    case CUPTI_ACTIVITY_KIND_MEMSET: {
      const auto* m = static_cast<const MemsetRecord*>(record);
      GpuOp op = op_from(m, GpuOpKind::kMemset, clock_offset_);
      op.bytes = m->bytes;
      op.name = memset_name_;
      note_device(m->deviceId);
      push_timed(op, out, stats);
      ++totals_.memsets;
      return;
    }
    case CUPTI_ACTIVITY_KIND_RUNTIME:
    case CUPTI_ACTIVITY_KIND_DRIVER: {
      const auto* a = static_cast<const ApiRecord*>(record);
      const ApiDomain domain =
          base->kind == CUPTI_ACTIVITY_KIND_RUNTIME ? ApiDomain::kRuntime : ApiDomain::kDriver;
      const TracedApi* api = find_traced_api(domain, a->cbid);
      if (api == nullptr) return;  // traced by someone else's settings; not ours to account
      size_t n = 0;
      const TracedApi* first = traced_apis(&n);
      // A call that failed submitted nothing: no op will come for its id (it is still host
      // time in CUDA).  The thread is a pthread id when SYSTEM ids were refused:
      // resolve_threads.
      add_call(static_cast<size_t>(api - first), host_time(a->start, clock_offset_),
               host_time(a->end, clock_offset_), a->returnValue == 0 ? a->correlationId : 0,
               a->threadId, out);
      return;
    }
    case CUPTI_ACTIVITY_KIND_GRAPH_TRACE: {
      const auto* g = static_cast<const GraphTraceRecord*>(record);
      // "If this is INT_MAX, then the start is on the host" (a graph beginning with a host
      // node): the device is where it ends.
      constexpr uint32_t kOnHost = 0x7fffffffu;
      const uint32_t device = g->deviceId != kOnHost ? g->deviceId : g->endDeviceId;
      if (device == kOnHost) {
        stats.add(Stat::cupti_records_unparsed);
        return;
      }
      GpuOp op;
      op.start = host_time(g->start, clock_offset_);
      op.end = host_time(g->end, clock_offset_);
      op.correlation_id = g->correlationId;
      op.stream = g->streamId;
      op.graph_id = g->graphId;
      op.device = static_cast<uint16_t>(device);
      op.kind = GpuOpKind::kKernel;
      op.flags = kGpuOpGraphSpan;
      op.graph_nodes = graph_nodes_ != nullptr ? graph_nodes_->nodes(g->graphId) : 0;
      op.name = graph_name(g->graphId, op.graph_nodes);
      note_device(device);
      push_timed(op, out, stats);
      ++totals_.graph_spans;
      if (op.graph_nodes == 0) ++totals_.graph_spans_without_nodes;
      return;
    }
    case CUPTI_ACTIVITY_KIND_SYNCHRONIZATION: {
      const auto* s = static_cast<const SyncRecord*>(record);
      const auto type = static_cast<size_t>(s->type);
      if (type < totals_.sync.count.size()) {
        ++totals_.sync.count[type];
        if (s->end > s->start) totals_.sync.ns[type] += static_cast<int64_t>(s->end - s->start);
      }
      return;
    }
    default:
      stats.add(Stat::cupti_records_unparsed);
      return;
  }
}

void ThreadIds::started(uint32_t cupti_id, uint32_t tid, int64_t ns) {
  std::vector<Life>& lives = by_id_[cupti_id].lives;
  if (!lives.empty() && lives.back().end == kOpen) {
    if (lives.back().tid == tid) return;  // told twice
    lives.back().end = ns;
  }
  lives.push_back({tid, kOpen});
}

void ThreadIds::exited(uint32_t cupti_id, uint32_t tid, int64_t ns) {
  auto it = by_id_.find(cupti_id);
  if (it == by_id_.end()) return;
  std::vector<Life>& lives = it->second.lives;
  // The latest life of `tid` (a tid can come back too); a successor may have closed it at its
  // own start, later than this exit.
  for (auto life = lives.rbegin(); life != lives.rend(); ++life) {
    if (life->tid != tid) continue;
    if (ns < life->end) life->end = ns;
    return;
  }
}

uint32_t ThreadIds::resolve(uint32_t cupti_id, int64_t t) const {
  auto it = by_id_.find(cupti_id);
  if (it == by_id_.end() || t < it->second.forgotten_until) return 0;
  const std::vector<Life>& lives = it->second.lives;
  for (const Life& life : lives) {
    if (t < life.end) return life.tid;
  }
  // A thread's exit is stamped after its last call returned, so never before that call; a clock
  // that did not move in between (a 0 ns call, then the exit) gives both the same time.  No
  // later thread is known to have had the id, so the call is the last one's.
  if (!lives.empty() && lives.back().end == t) return lives.back().tid;
  return 0;
}

void ThreadIds::forget_before(int64_t t) {
  for (auto& [id, entry] : by_id_) {
    std::vector<Life>& lives = entry.lives;
    size_t n = 0;  // ends increase along the list: the forgotten lives are a prefix
    while (n < lives.size() && lives[n].end < t) {
      if (lives[n].end > entry.forgotten_until) entry.forgotten_until = lives[n].end;
      ++n;
    }
    lives.erase(lives.begin(), lives.begin() + static_cast<std::ptrdiff_t>(n));
  }
}

size_t ThreadIds::lives() const {
  size_t n = 0;
  for (const auto& [id, entry] : by_id_) n += entry.lives.size();
  return n;
}

void ActivityParser::add_call(size_t traced_index, TimeNs start, TimeNs end,
                              uint64_t correlation_id, uint32_t thread, EventBatch& out,
                              bool nested) {
  size_t n = 0;
  const TracedApi* apis = traced_apis(&n);
  HostApiCall call;
  call.start = start;
  call.end = end;
  call.correlation_id = correlation_id;
  call.thread = thread;
  call.name = api_names_[traced_index];
  call.kind = apis[traced_index].kind;
  out.api_calls.push_back(call);
  if (nested) {
    ++totals_.api_calls_nested;
    return;
  }
  ++totals_.api_calls;
  if (sync_from_api_ && api_sync_type_[traced_index] != 0) {
    ++totals_.sync.count[api_sync_type_[traced_index]];
    if (end > start) totals_.sync.ns[api_sync_type_[traced_index]] += end - start;
  }
}

bool ActivityParser::add_timed_call(size_t traced_index, TimeNs start, TimeNs end,
                                    uint32_t correlation_id, uint32_t thread, EventBatch& out,
                                    bool nested) {
  size_t n = 0;
  traced_apis(&n);
  if (traced_index >= n) return false;
  add_call(traced_index, start, end, correlation_id, thread, out, nested);
  return true;
}

void ActivityParser::resolve_threads(std::vector<HostApiCall>& calls, size_t from,
                                     Stats& stats) const {
  int64_t unknown = 0;
  for (size_t i = from; i < calls.size(); ++i) {
    const uint32_t tid = thread_ids_.resolve(calls[i].thread, calls[i].start);
    if (tid != 0) {
      calls[i].thread = tid;
    } else {
      ++unknown;
    }
  }
  if (unknown > 0) stats.add(Stat::cupti_thread_ids_unknown, unknown);
}

size_t ActivityParser::parse_buffer(void* next_record, uint8_t* buffer, size_t valid_bytes,
                                    EventBatch& out, Stats& stats) {
  using NextFn = CUptiResult (*)(uint8_t*, size_t, CUpti_Activity**);
  auto next = reinterpret_cast<NextFn>(next_record);
  if (next == nullptr || buffer == nullptr || valid_bytes == 0) return 0;
  size_t n = 0;
  CUpti_Activity* rec = nullptr;
  while (next(buffer, valid_bytes, &rec) == CUPTI_SUCCESS && rec != nullptr) {
    parse_record(rec, out, stats);
    ++n;
  }
  return n;
}

std::vector<uint8_t> ActivityParser::make_synthetic_records(size_t count, size_t* record_stride) {
  static const char* const kNames[] = {
      "void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<float>>",
      "sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64_warpgroupsize1x1x1",
      "ncclDevKernel_AllReduce_Sum_bf16_RING_LL",
      "void at::native::reduce_kernel<512, 1, at::native::ReduceOp<float>>"};
  size_t stride = sizeof(KernelRecord);
  if (sizeof(MemcpyRecord) > stride) stride = sizeof(MemcpyRecord);
  if (sizeof(ApiRecord) > stride) stride = sizeof(ApiRecord);
  stride = (stride + 7) & ~size_t{7};
  *record_stride = stride;
  std::vector<uint8_t> data(count * stride);
  uint64_t t = 1'000'000'000ull;
  for (size_t i = 0; i < count; ++i) {
    uint8_t* p = data.data() + i * stride;
    const uint32_t corr = static_cast<uint32_t>(i / 3 + 1);
    switch (i % 3) {
      case 0: {
        ApiRecord a{};
        a.kind = CUPTI_ACTIVITY_KIND_RUNTIME;
        a.cbid = CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000;
        a.start = t;
        a.end = t + 3000;
        a.correlationId = corr;
        a.threadId = 1234;
        std::memcpy(p, &a, sizeof(a));
        break;
      }
      case 1: {
        KernelRecord k{};
        k.kind = CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL;
        k.start = t + 5000;
        k.end = t + 25000;
        k.deviceId = 0;
        k.streamId = 7;
        k.correlationId = corr;
        k.name = kNames[(i / 3) % 4];
        std::memcpy(p, &k, sizeof(k));
        break;
      }
      default: {
        MemcpyRecord m{};
        m.kind = CUPTI_ACTIVITY_KIND_MEMCPY;
        m.copyKind = CUPTI_ACTIVITY_MEMCPY_KIND_HTOD;
        m.srcKind = CUPTI_ACTIVITY_MEMORY_KIND_PINNED;
        m.dstKind = CUPTI_ACTIVITY_MEMORY_KIND_DEVICE;
        m.bytes = 1 << 20;
        m.start = t + 26000;
        m.end = t + 30000;
        m.streamId = 7;
        m.correlationId = corr;
        std::memcpy(p, &m, sizeof(m));
        t += 30000;
        break;
      }
    }
  }
  return data;
}

size_t ActivityParser::parse_records_contiguous(const uint8_t* data, size_t count, size_t stride,
                                                EventBatch& out, Stats& stats) {
  for (size_t i = 0; i < count; ++i) parse_record(data + i * stride, out, stats);
  return count;
}

}  // namespace gpuacct::cupti
