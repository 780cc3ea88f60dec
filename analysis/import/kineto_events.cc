// The Kineto importer's hot path, once per trace event: the traceEvents array, each event's
// fields into a RawEvent (json_scanner.h), and its mapping to the event model (GpuOp,
// HostApiCall, HostRange) or the optional outputs.  docs/kineto_import.md has the mapping
// table; the document around the array and the ac2g flow fallback are in kineto_importer.cc.
#include <cstring>
#include <iterator>
#include <string>
#include <string_view>

#include "analysis/import/kineto_importer_internal.h"
#include "analysis/model/nccl_names.h"

namespace gpuacct::kineto_import {

namespace {

// key == lit, as a fixed-size compare the compiler inlines (string_view's == called memcmp for
// every key of every event).
template <size_t N>
bool key_is(std::string_view key, const char (&lit)[N]) {
  return key.size() == N - 1 && std::memcmp(key.data(), lit, N - 1) == 0;
}

// The keys of an X event in the order Kineto writes them, each recognised whole before the
// general key scan (json_scan::KeyPattern: one 16-byte compare): the walk expects the key
// after the one it last recognised, and reads any other key in full.  (Flow events' order
// differs; a second order for them, and the args keys, cost more than they saved.)
constexpr json_scan::KeyPattern kEventKeys[] = {
    json_scan::KeyPattern("ph"),  json_scan::KeyPattern("cat"), json_scan::KeyPattern("name"),
    json_scan::KeyPattern("pid"), json_scan::KeyPattern("tid"), json_scan::KeyPattern("ts"),
    json_scan::KeyPattern("dur"), json_scan::KeyPattern("args")};
// Where each of them goes (args: parsed or skipped by the member walk below).
constexpr Value RawEvent::*kEventFields[] = {&RawEvent::ph,  &RawEvent::cat, &RawEvent::name,
                                             &RawEvent::pid, &RawEvent::tid, &RawEvent::ts,
                                             &RawEvent::dur, nullptr};
static_assert(std::size(kEventFields) == std::size(kEventKeys));

}  // namespace

Result Importer::parse_args(Cursor& c) {
  return scan_.object(c, [&](std::string_view key, Cursor& cc) -> Result {
    Value* dst = nullptr;
    switch (key.size()) {
      case 5:
        if (key_is(key, "bytes")) dst = &ev_.bytes;
        break;
      case 6:
        if (key_is(key, "device"))
          dst = &ev_.device;
        else if (key_is(key, "stream"))
          dst = &ev_.stream;
        break;
      case 8:
        if (key_is(key, "graph id")) dst = &ev_.graph_id;
        break;
      case 11:
        if (key_is(key, "correlation")) dst = &ev_.correlation;
        break;
      default:
        break;
    }
    if (!dst && (dst = ev_.comm.slot(key)) != nullptr) ev_.comm_used = true;
    if (dst) return scan_.value(cc, dst);
    return scan_.skip_value_inline(cc, 2);
  });
}

Result Importer::parse_event(Cursor& c) {
  ev_.clear();
  size_t expect = 0;       // kEventKeys
  Value* known = nullptr;  // the field of the key just recognised (the walk's dispatch skipped)
  auto guess = [&](Cursor& cc, std::string_view* key) {
    if (expect == std::size(kEventKeys) || !kEventKeys[expect].match(cc)) return false;
    *key = kEventKeys[expect].key();
    if (kEventFields[expect] != nullptr) known = &(ev_.*kEventFields[expect]);
    ++expect;
    return true;
  };
  return scan_.object(c, guess, [&](std::string_view key, Cursor& cc) -> Result {
    Value* dst = known;
    known = nullptr;
    if (dst) return scan_.value(cc, dst);
    switch (key.size()) {
      case 2:
        if (key_is(key, "ph"))
          dst = &ev_.ph;
        else if (key_is(key, "ts"))
          dst = &ev_.ts;
        else if (key_is(key, "id"))
          dst = &ev_.id;
        else if (key_is(key, "bp"))
          dst = &ev_.bp;
        break;
      case 3:
        if (key_is(key, "cat"))
          dst = &ev_.cat;
        else if (key_is(key, "dur"))
          dst = &ev_.dur;
        else if (key_is(key, "pid"))
          dst = &ev_.pid;
        else if (key_is(key, "tid"))
          dst = &ev_.tid;
        break;
      case 4:
        if (key_is(key, "name"))
          dst = &ev_.name;
        else if (key_is(key, "args")) {
          ev_.has_args = true;
          if (*cc.p == '{') {
            ev_.args_is_object = true;
            return args_unused() ? scan_.skip_value(cc, 1) : parse_args(cc);
          }
          return scan_.skip_value(cc, 1);
        }
        break;
      default:
        break;
    }
    if (dst) return scan_.value(cc, dst);
    return scan_.skip_value_inline(cc, 1);
  });
}

Status Importer::parse_events_array() {
  // At '['.
  in_.advance();
  in_events_ = true;
  saw_events_ = true;
  bool first = true;
  for (;;) {
    bool at_end = false;
    GPUACCT_RETURN_IF_ERROR(in_.next_nonws(&at_end));
    if (at_end) return truncated(in_.end_offset(), "the traceEvents array");
    char ch = in_.peek();
    if (ch == ']') {
      in_.advance();
      in_events_ = false;
      return Status::Ok();
    }
    if (!first) {
      if (ch != ',') {
        return in_.syntax_error_here("expected ',' or ']' between trace events");
      }
      in_.advance();
      GPUACCT_RETURN_IF_ERROR(in_.next_nonws(&at_end));
      if (at_end) return truncated(in_.end_offset(), "the traceEvents array");
      ch = in_.peek();
    }
    first = false;
    if (ch == '{') {
      GPUACCT_RETURN_IF_ERROR(
          with_refill("a trace event", [&](Cursor& c) { return parse_event(c); }));
      ++object_events_;
      handle_event();
    } else {
      GPUACCT_RETURN_IF_ERROR(
          with_refill("a trace event", [&](Cursor& c) { return scan_.skip_value(c, 1); }));
      ++event_index_;
      skip_event();  // an element that is not an object
    }
  }
}

void Importer::emit_gpu(GpuOp op, const FlowKey& key, bool need_corr) {
  if (need_corr && !correlate_or_wait(key, Pending{true, op, {}}, &op.correlation_id)) return;
  sink_.on_gpu_op(op);
}

void Importer::emit_api(HostApiCall call, const FlowKey& key, bool need_corr) {
  if (need_corr && !correlate_or_wait(key, Pending{false, {}, call}, &call.correlation_id)) return;
  sink_.on_api_call(call);
}

void Importer::map_x_event(CatKind kind) {
  // Ordinary CPU operators (most of a trace) matter only when they are steps or data waits.
  if (kind == CatKind::kCpuOp) {
    if (ev_.name.type != ValueType::kString) return;
    int64_t n = 0;
    if (!profiler_step_number(ev_.name.text, &n) && !is_data_range(ev_.name.text)) {
      if (opts_.collectives != nullptr && ev_.name.text == "record_param_comms") param_comms();
      return;
    }
  }
  // Common fields: name, ts, dur.
  XEvent x;
  if (ev_.name.type != ValueType::kString || ev_.ts.type != ValueType::kNumber ||
      ev_.dur.type != ValueType::kNumber ||
      !parse_span_ns(ev_.ts.text, ev_.dur.text, &x.ts, &x.end)) {
    skip_event();
    return;
  }
  x.name = ev_.name.text;
  x.pid_ok = num_i64(ev_.pid, &x.pid);
  x.tid_ok = num_i64(ev_.tid, &x.tid);
  switch (kind) {
    case CatKind::kKernel:
    case CatKind::kMemcpy:
    case CatKind::kMemset:
      map_gpu_op(kind, x);
      return;
    case CatKind::kCudaSync:
      emit_cuda_sync(x.ts, x.end, x.name, x.pid, x.pid_ok);
      return;
    case CatKind::kRuntime:
      map_api_call(x);
      return;
    case CatKind::kUserAnnotation:
    case CatKind::kCpuOp:
      map_range(kind, x);
      return;
    default:
      return;
  }
}

// The op's device and stream: args.device / args.stream, else pid / tid.  False (the event is
// skipped) when missing or out of range.
bool Importer::device_and_stream(const XEvent& x, int64_t* device, int64_t* stream) {
  if (!num_i64(ev_.device, device)) {
    if (ev_.device.type != ValueType::kNone || !x.pid_ok) return false;
    *device = x.pid;
  }
  if (!num_i64(ev_.stream, stream)) {
    if (ev_.stream.type != ValueType::kNone || !x.tid_ok) return false;
    *stream = x.tid;
  }
  return *device >= 0 && *device <= 0xFFFF && *stream >= 0 && *stream <= 0xFFFFFFFFll;
}

// args.correlation: true with *corr >= 0 when present and valid, *corr = -1 when absent; false
// (skip the event) when present but not a non-negative integer.
bool Importer::correlation(int64_t* corr) {
  *corr = -1;
  const bool has_corr = num_i64(ev_.correlation, corr) && *corr >= 0;
  if (!has_corr) *corr = -1;
  return has_corr || ev_.correlation.type == ValueType::kNone;
}

void Importer::map_gpu_op(CatKind kind, const XEvent& x) {
  int64_t device = -1, stream = -1, corr = -1, bytes = 0, graph = 0;
  if (!device_and_stream(x, &device, &stream) || !correlation(&corr) ||
      (ev_.bytes.type != ValueType::kNone && (!num_i64(ev_.bytes, &bytes) || bytes < 0))) {
    skip_event();
    return;
  }
  if (num_i64(ev_.graph_id, &graph) && (graph < 0 || graph > 0xFFFFFFFFll)) graph = 0;
  GpuOp op;
  op.start = x.ts;
  op.end = x.end;
  op.correlation_id = corr >= 0 ? static_cast<uint64_t>(corr) : 0;
  op.bytes = static_cast<uint64_t>(bytes);
  op.stream = static_cast<uint32_t>(stream);
  op.graph_id = static_cast<uint32_t>(graph);
  op.name = intern(x.name);
  op.device = static_cast<uint16_t>(device);
  if (kind == CatKind::kKernel) {
    op.kind = GpuOpKind::kKernel;
    op.bytes = 0;
    op.collective = classify_collective(x.name);
    if (ev_.comm.collective_name.type == ValueType::kString) {
      CollectiveType byname = classify_collective_name(ev_.comm.collective_name.text);
      if (byname != CollectiveType::kNone &&
          (op.collective == CollectiveType::kNone || op.collective == CollectiveType::kOther ||
           byname != CollectiveType::kOther))
        op.collective = byname;
    }
  } else if (kind == CatKind::kMemcpy) {
    op.kind = GpuOpKind::kMemcpy;
    op.copy_dir = copy_dir_from_name(x.name);
    if (x.name.find("Pageable") != std::string_view::npos) op.flags |= kGpuOpPageable;
  } else {
    op.kind = GpuOpKind::kMemset;
  }
  if (opts_.collectives != nullptr && op.is_communication())
    opts_.collectives->on_collective_kernel(op, ev_.comm);
  emit_gpu(op, FlowKey{x.pid, x.tid, x.ts}, corr < 0 && x.pid_ok && x.tid_ok);
}

void Importer::map_api_call(const XEvent& x) {
  int64_t corr = -1;
  if (!correlation(&corr)) {
    skip_event();
    return;
  }
  if (host_pid_ == 0 && x.pid_ok) host_pid_ = x.pid;
  HostApiCall call;
  call.start = x.ts;
  call.end = x.end;
  call.correlation_id = corr >= 0 ? static_cast<uint64_t>(corr) : 0;
  call.thread = x.tid_ok ? static_cast<uint32_t>(static_cast<uint64_t>(x.tid)) : 0;
  call.name = intern(x.name);
  call.kind = classify_api(x.name);
  emit_api(call, FlowKey{x.pid, x.tid, x.ts}, corr < 0 && x.pid_ok && x.tid_ok);
}

void Importer::map_range(CatKind kind, const XEvent& x) {
  HostRange r;
  int64_t number = -1;
  if (profiler_step_number(x.name, &number)) {
    r.kind = RangeKind::kStep;
    r.number = number;
  } else if (is_data_range(x.name)) {
    r.kind = RangeKind::kData;
  } else if (kind == CatKind::kUserAnnotation) {
    r.kind = RangeKind::kUser;
  } else {
    return;  // ordinary operators are not ranges gpuacct uses
  }
  r.start = x.ts;
  r.end = x.end;
  r.thread = x.tid_ok ? static_cast<uint32_t>(static_cast<uint64_t>(x.tid)) : 0;
  r.name = intern(x.name);
  sink_.on_range(r);
}

// A cuda_sync row with a stream, to KinetoImportOptions::on_cuda_sync (the caller checked it
// is set).  HTA's GPU rows are the events with a stream: Context / Event Sync (stream -1) are
// not.
void Importer::emit_cuda_sync(int64_t ts, int64_t end, std::string_view name, int64_t pid,
                              bool pid_ok) {
  int64_t stream = -1, device = -1, corr = -1;
  if (!num_i64(ev_.stream, &stream) || stream < 0 || stream > 0xFFFFFFFFll) return;
  if (!num_i64(ev_.device, &device) && !(ev_.device.type == ValueType::kNone && pid_ok)) {
    skip_event();
    return;
  }
  if (ev_.device.type == ValueType::kNone) device = pid;
  if (device < 0 || device > 0xFFFF) {
    skip_event();
    return;
  }
  GpuOp row;
  row.start = ts;
  row.end = end;
  row.correlation_id =
      num_i64(ev_.correlation, &corr) && corr > 0 ? static_cast<uint64_t>(corr) : 0;
  row.stream = static_cast<uint32_t>(stream);
  row.device = static_cast<uint16_t>(device);
  row.name = intern(name);
  opts_.on_cuda_sync(row);
}

// A record_param_comms CPU op, to KinetoImportOptions::collectives (the caller checked it is
// set): the collective args of the NCCL kernel with its External id.
void Importer::param_comms() {
  int64_t ts = 0, end = 0;
  if (ev_.ts.type != ValueType::kNumber || ev_.dur.type != ValueType::kNumber ||
      !parse_span_ns(ev_.ts.text, ev_.dur.text, &ts, &end))
    return;  // not an event the accounting uses: no counter
  opts_.collectives->on_param_comms(ts, ev_.comm);
}

// A gpu_user_annotation ProfilerStep#N, to KinetoImportOptions::on_gpu_step_annotation (the
// caller checked it is set) when it is one of HTA's CPU rows: no stream (or -1), a ts and a
// dur (HTA drops rows without a dur).  Anything else of the kind is left out silently, as
// before: annotations are not events of the model.
void Importer::emit_gpu_step_annotation() {
  int64_t number = 0, stream = -1, ts = 0, end = 0;
  if (ev_.name.type != ValueType::kString || !profiler_step_number(ev_.name.text, &number)) return;
  if (ev_.stream.type != ValueType::kNone && (!num_i64(ev_.stream, &stream) || stream != -1))
    return;
  if (ev_.ts.type != ValueType::kNumber || ev_.dur.type != ValueType::kNumber ||
      !parse_span_ns(ev_.ts.text, ev_.dur.text, &ts, &end))
    return;
  opts_.on_gpu_step_annotation(ts);
}

void Importer::handle_event() {
  ++event_index_;
  std::string_view ph = ev_.ph.type == ValueType::kString ? ev_.ph.text : std::string_view();
  CatKind kind = CatKind::kIgnored;
  if (ev_.cat.type == ValueType::kString) {
    kind = classify_cat(ev_.cat.text);
  } else if (ev_.cat.type != ValueType::kNone) {
    skip_event();  // a cat that is not a string
    return;
  }
  if (kind == CatKind::kUnknown) {
    stats_.add(Stat::importer_unknown_categories);
    return;
  }
  if (kind == CatKind::kOtherAccelerator) {
    stats_.add(Stat::importer_unknown_categories);  // not handled either, and named below
    count_other_accelerator(ev_.cat.text);
    return;
  }
  if (kind == CatKind::kGpuUserAnnotation) {
    if (opts_.on_gpu_step_annotation && ph == "X") emit_gpu_step_annotation();
    return;  // nothing else of it is used, and nothing of it is an error
  }
  if (ev_.ph.type == ValueType::kNone) {
    // Events without a phase are meaningless in Chrome traces; count the ones we would use.
    if (kind != CatKind::kIgnored) skip_event();
    return;
  }
  if (ev_.ph.type != ValueType::kString) {
    skip_event();
    return;
  }
  if (kind == CatKind::kFlow) {
    if (ph == "s" || ph == "f" || ph == "t") handle_flow();
    return;
  }
  if (ph != "X" || kind == CatKind::kIgnored) return;
  if (kind == CatKind::kCudaSync && !opts_.on_cuda_sync) return;
  map_x_event(kind);
}

}  // namespace gpuacct::kineto_import
