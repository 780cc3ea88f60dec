#include "analysis/import/kineto_collectives.h"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cstring>
#include <limits>
#include <map>
#include <tuple>
#include <utility>

#include "analysis/model/nccl_names.h"
#include "analysis/model/stable_hash.h"

namespace gpuacct {

namespace {

using json_scan::Value;
using json_scan::ValueType;

// An integer arg: a JSON number, or a string of digits (writers differ); -1 if neither.
int64_t integer_of(const Value& v) {
  int64_t out = -1;
  if ((v.type == ValueType::kNumber || v.type == ValueType::kString) &&
      json_scan::parse_integer(v.text, &out))
    return out;
  return -1;
}

std::string text_of(const Value& v) {
  return v.type == ValueType::kString ? std::string(v.text) : std::string();
}

void set_short_name(std::string_view text, ShortName* out) {
  const size_t n = std::min(text.size(), sizeof(out->text) - 1);
  std::memcpy(out->text, text.data(), n);
  out->text[n] = '\0';
}

// The position of `rank` in a ranks list as Kineto writes it ("[0, 1, 2]"), or -1.
int32_t position_in(std::string_view ranks, int64_t rank) {
  if (rank < 0) return -1;
  int32_t index = 0;
  const char* p = ranks.data();
  const char* end = p + ranks.size();
  while (p < end) {
    if (*p < '0' || *p > '9') {
      ++p;
      continue;
    }
    int64_t value = 0;
    const auto result = std::from_chars(p, end, value);
    if (result.ec != std::errc()) return -1;
    if (value == rank) return index;
    ++index;
    p = result.ptr;
  }
  return -1;
}

// The message size NCCL counts for the collective: the all-gather's input, the
// reduce-scatter's output, else the larger of the two.
int64_t nelems_of(CollectiveType type, int64_t in, int64_t out) {
  if (type == CollectiveType::kAllGather && in >= 0) return in;
  if (type == CollectiveType::kReduceScatter && out >= 0) return out;
  return std::max(in, out);
}

}  // namespace

int dtype_bytes(std::string_view dtype) {
  std::string f;
  for (const char c : dtype) f.push_back(static_cast<char>(std::tolower(static_cast<unsigned char>(c))));
  for (const std::string_view prefix : {"c10::", "torch.", "at::"}) {
    if (f.compare(0, prefix.size(), prefix) == 0) f.erase(0, prefix.size());
  }
  static const std::map<std::string_view, int> kSizes = {
      {"float", 4},        {"float32", 4},      {"double", 8},       {"float64", 8},
      {"half", 2},         {"float16", 2},      {"bfloat16", 2},     {"long", 8},
      {"int64", 8},        {"int", 4},          {"int32", 4},        {"short", 2},
      {"int16", 2},        {"byte", 1},         {"uint8", 1},        {"char", 1},
      {"int8", 1},         {"bool", 1},         {"unsigned char", 1}, {"signed char", 1},
      {"complexfloat", 8}, {"complexdouble", 16}, {"complexhalf", 4}, {"uint16", 2},
      {"uint32", 4},       {"uint64", 8}};
  const auto it = kSizes.find(f);
  if (it != kSizes.end()) return it->second;
  if (f.compare(0, 6, "float8") == 0) return 1;  // float8_e4m3fn, float8_e5m2, ...
  return 0;
}

Value* KinetoCommValues::slot(std::string_view key) {
  switch (key.size()) {
    case 3:
      return key == "Seq" || key == "seq" ? &seq : nullptr;
    case 4:
      return key == "Rank" ? &rank : nullptr;
    case 5:
      return key == "dtype" ? &dtype : nullptr;
    case 8:
      if (key == "Src Rank") return &src_rank;
      return key == "Dst Rank" ? &dst_rank : nullptr;
    case 10:
      return key == "Group size" ? &group_size : nullptr;
    case 11:
      return key == "External id" ? &external_id : nullptr;
    case 13:
      return key == "In msg nelems" ? &in_nelems : nullptr;
    case 14:
      return key == "Out msg nelems" ? &out_nelems : nullptr;
    case 15:
      return key == "Collective name" ? &collective_name : nullptr;
    case 18:
      return key == "Process Group Name" ? &pg_name : nullptr;
    case 19:
      return key == "Process Group Ranks" ? &pg_ranks : nullptr;
    case 25:
      return key == "Process Group Description" ? &pg_desc : nullptr;
    default:
      return nullptr;
  }
}

KinetoCollectives::KinetoCollectives(Sink sink, KernelSink unidentified, size_t kernel_limit)
    : sink_(std::move(sink)), unidentified_sink_(std::move(unidentified)),
      kernel_limit_(kernel_limit) {}

KinetoCollectives::~KinetoCollectives() = default;

KinetoCollectives::Args KinetoCollectives::read_args(const KinetoCommValues& v) {
  Args a;
  a.collective_name = text_of(v.collective_name);
  a.any = !a.collective_name.empty();
  if (!a.any) return a;
  a.dtype = text_of(v.dtype);
  a.pg_name = v.pg_name.type == ValueType::kNumber ? std::string(v.pg_name.text) : text_of(v.pg_name);
  a.pg_desc = text_of(v.pg_desc);
  a.pg_ranks = text_of(v.pg_ranks);
  a.in_nelems = integer_of(v.in_nelems);
  a.out_nelems = integer_of(v.out_nelems);
  a.group_size = integer_of(v.group_size);
  a.rank = integer_of(v.rank);
  a.seq = integer_of(v.seq);
  a.src_rank = integer_of(v.src_rank);
  a.dst_rank = integer_of(v.dst_rank);
  return a;
}

void KinetoCollectives::on_param_comms(TimeNs start, const KinetoCommValues& values) {
  const int64_t external_id = integer_of(values.external_id);
  if (external_id < 0 || param_comms_.size() >= kernel_limit_) return;
  Args args = read_args(values);
  if (!args.any || args.collective_name == "wait") return;  // a wait launches no NCCL kernel
  param_comms_[external_id] = ParamComms{start, std::move(args)};
}

void KinetoCollectives::on_collective_kernel(const GpuOp& op, const KinetoCommValues& values) {
  if (kernels_.size() >= kernel_limit_) {
    ++dropped_;
    return;
  }
  kernels_.push_back(Kernel{op, integer_of(values.external_id), read_args(values)});
}

void KinetoCollectives::on_api_call(const HostApiCall& call) {
  if (call.kind != HostApiKind::kLaunch || call.correlation_id == 0) return;
  if (!launch_table_mode_) {
    if (launch_list_.size() < kernel_limit_) {
      launch_list_.push_back(Launch{call.correlation_id, call.start});
      return;
    }
    // As many calls as the limit: the table from here on (the list's last call of an id wins,
    // as the table's updates do).
    for (const Launch& l : launch_list_) launch_table_[l.correlation] = l.start;
    launch_list_.clear();
    launch_table_mode_ = true;
  }
  if (launch_table_.size() < kernel_limit_ || launch_table_.find(call.correlation_id)) {
    launch_table_[call.correlation_id] = call.start;
  } else {
    ++launches_dropped_;  // counted: a kernel of it would have no host enqueue time
  }
}

namespace {
constexpr TimeNs kUnseen = std::numeric_limits<TimeNs>::min();
}  // namespace

FlatMap64<TimeNs> KinetoCollectives::kernel_launch_starts() const {
  FlatMap64<TimeNs> starts;
  for (const Kernel& k : kernels_) {
    if (k.op.correlation_id == 0) continue;
    const TimeNs* t = launch_table_mode_ ? launch_table_.find(k.op.correlation_id) : nullptr;
    starts[k.op.correlation_id] = t != nullptr ? *t : kUnseen;
  }
  if (launch_table_mode_ || starts.size() == 0) return starts;
  for (const Launch& l : launch_list_) {
    if (TimeNs* t = starts.find(l.correlation)) *t = l.start;  // the last call of an id wins
  }
  return starts;
}

CollectiveRecord KinetoCollectives::record_from(const Kernel& k, const Args& args,
                                                TimeNs host_enqueue, int own_rank) const {
  CollectiveRecord r;
  r.type = classify_collective_name(args.collective_name);
  if (r.type == CollectiveType::kNone || r.type == CollectiveType::kOther) r.type = k.op.collective;
  // The process group names the communicator: its name and members agree on every rank.
  std::string group = "kineto_pg:" + args.pg_name + "|" + args.pg_ranks;
  if (args.pg_name.empty() && args.pg_ranks.empty())
    group += "|" + args.pg_desc + "|" + std::to_string(args.group_size);
  const int64_t self = args.rank;
  if (r.type == CollectiveType::kSendRecv) {
    // Point-to-point ops are numbered apart from the group's collectives, per pair when the
    // trace names the peer (each pair runs its own NCCL communicator).
    group += "|p2p";
    const int64_t peer = args.dst_rank >= 0 ? args.dst_rank : args.src_rank;
    if (self >= 0 && peer >= 0)
      group += ":" + std::to_string(std::min(self, peer)) + "-" + std::to_string(std::max(self, peer));
  }
  r.comm_hash = stable_hash64(group);
  const int64_t nelems = nelems_of(r.type, args.in_nelems, args.out_nelems);
  const int size = dtype_bytes(args.dtype);
  if (nelems > 0 && size > 0 && nelems <= std::numeric_limits<int64_t>::max() / size)
    r.bytes = static_cast<uint64_t>(nelems * size);
  set_short_name(args.dtype, &r.datatype);
  int64_t rank = self >= 0 ? self : position_in(args.pg_ranks, own_rank);
  if (rank > std::numeric_limits<int32_t>::max()) rank = -1;
  r.rank = static_cast<int32_t>(rank);
  if (args.group_size > 0 && args.group_size <= std::numeric_limits<int32_t>::max())
    r.nranks = static_cast<int32_t>(args.group_size);
  r.host_enqueue = host_enqueue;
  r.gpu_start = k.op.start;
  r.gpu_end = k.op.end;
  r.correlation_id = k.op.correlation_id;
  r.device = k.op.device;
  r.stream = k.op.stream;
  r.source = CollectiveSource::kKineto;
  return r;
}

void KinetoCollectives::finish(int own_rank) {
  const FlatMap64<TimeNs> launch_starts = kernel_launch_starts();
  auto launch_of = [&](uint64_t correlation) -> const TimeNs* {
    const TimeNs* t = launch_starts.find(correlation);
    return t != nullptr && *t != kUnseen ? t : nullptr;
  };
  std::vector<CollectiveRecord> records;
  std::vector<bool> has_seq;
  std::vector<GpuOp> unidentified;
  for (const Kernel& k : kernels_) {
    const Args* args = k.args.any ? &k.args : nullptr;
    TimeNs host_enqueue = 0;
    const auto pc = k.external_id >= 0 ? param_comms_.find(k.external_id) : param_comms_.end();
    if (pc != param_comms_.end()) {
      if (args == nullptr) args = &pc->second.args;
      host_enqueue = pc->second.start;
    }
    if (args == nullptr) {
      unidentified.push_back(k.op);
      continue;
    }
    if (host_enqueue == 0 && k.op.correlation_id != 0) {
      if (const TimeNs* launch = launch_of(k.op.correlation_id)) host_enqueue = *launch;
    }
    records.push_back(record_from(k, *args, host_enqueue, own_rank));
    has_seq.push_back(args->seq >= 0);
    if (args->seq >= 0) records.back().seq = static_cast<uint64_t>(args->seq);
  }
  // Without the trace's Seq: the position among the group's instances in enqueue order.
  std::vector<size_t> order(records.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  const auto enqueue_order = [&](size_t a, size_t b) {
    const CollectiveRecord& x = records[a];
    const CollectiveRecord& y = records[b];
    const TimeNs tx = x.host_enqueue != 0 ? x.host_enqueue : x.gpu_start;
    const TimeNs ty = y.host_enqueue != 0 ? y.host_enqueue : y.gpu_start;
    return std::tie(x.comm_hash, tx, x.gpu_start, x.stream) <
           std::tie(y.comm_hash, ty, y.gpu_start, y.stream);
  };
  std::sort(order.begin(), order.end(), enqueue_order);
  uint64_t next = 0;
  for (size_t i = 0; i < order.size(); ++i) {
    if (i == 0 || records[order[i]].comm_hash != records[order[i - 1]].comm_hash) next = 0;
    if (!has_seq[order[i]]) records[order[i]].seq = next;
    ++next;
  }
  std::sort(records.begin(), records.end(), [](const CollectiveRecord& a, const CollectiveRecord& b) {
    return std::tie(a.gpu_start, a.device, a.stream) < std::tie(b.gpu_start, b.device, b.stream);
  });
  for (const CollectiveRecord& r : records) {
    ++records_;
    if (sink_) sink_(r);
  }
  std::sort(unidentified.begin(), unidentified.end(), [](const GpuOp& a, const GpuOp& b) {
    return std::tie(a.start, a.device, a.stream) < std::tie(b.start, b.device, b.stream);
  });
  for (const GpuOp& op : unidentified) {
    ++unidentified_;
    const TimeNs* launch = op.correlation_id != 0 ? launch_of(op.correlation_id) : nullptr;
    if (unidentified_sink_) unidentified_sink_(op, launch != nullptr ? *launch : 0);
  }
  kernels_.clear();
  param_comms_.clear();
  launch_list_.clear();
  launch_table_.clear();
  launch_table_mode_ = false;
}

}  // namespace gpuacct
