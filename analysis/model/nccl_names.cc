#include "analysis/model/nccl_names.h"

#include <array>
#include <cctype>
#include <string>

namespace gpuacct {
namespace {

bool starts_with(std::string_view s, std::string_view p) {
  return s.substr(0, p.size()) == p;
}

// Lower-cases and drops '_', so "AllReduce", "all_reduce" and "allreduce" compare equal.
std::string fold(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (char c : s) {
    if (c == '_' || c == ' ' || c == '-') continue;
    out.push_back(static_cast<char>(std::tolower(static_cast<unsigned char>(c))));
  }
  return out;
}

struct Entry {
  std::string_view folded;
  CollectiveType type;
};

// Longest prefixes first where one is a prefix of another (reducescatter before reduce).
constexpr std::array<Entry, 14> kTable = {{
    {"allreduce", CollectiveType::kAllReduce},
    {"allgather", CollectiveType::kAllGather},
    {"reducescatter", CollectiveType::kReduceScatter},
    {"broadcast", CollectiveType::kBroadcast},
    {"bcast", CollectiveType::kBroadcast},
    {"reduce", CollectiveType::kReduce},
    {"sendrecv", CollectiveType::kSendRecv},
    {"send", CollectiveType::kSendRecv},
    {"recv", CollectiveType::kSendRecv},
    {"alltoall", CollectiveType::kAllToAll},
    {"alltoallv", CollectiveType::kAllToAll},
    {"gather", CollectiveType::kOther},
    {"scatter", CollectiveType::kOther},
    {"barrier", CollectiveType::kOther},
}};

CollectiveType match_folded_prefix(std::string_view folded) {
  for (const auto& e : kTable) {
    if (starts_with(folded, e.folded)) return e.type;
  }
  return CollectiveType::kOther;
}

// The first source name of an Itanium-mangled symbol ("_Z22ncclDevKernel_SendRecv24ncclDev..."
// -> "ncclDevKernel_SendRecv"; "_ZN4nccl..." -> "nccl"), or `name` itself when it is not one.
// CUPTI's kernel records carry the mangled symbol (CUpti_ActivityKernel10::name, cupti_activity.h;
// the H200 run of 2026-12-04 showed
// "_Z22ncclDevKernel_SendRecv24ncclDevKernelArgsStorageILm4096EE").
std::string_view first_source_name(std::string_view name) {
  if (!starts_with(name, "_Z")) return name;
  std::string_view rest = name.substr(2);
  if (starts_with(rest, "L")) rest.remove_prefix(1);  // internal linkage
  if (starts_with(rest, "N")) {                       // nested name: its first component
    rest.remove_prefix(1);
    while (!rest.empty() && (rest.front() == 'r' || rest.front() == 'V' || rest.front() == 'K'))
      rest.remove_prefix(1);
  }
  size_t digits = 0;
  size_t length = 0;
  while (digits < rest.size() && rest[digits] >= '0' && rest[digits] <= '9' && digits < 6) {
    length = length * 10 + static_cast<size_t>(rest[digits] - '0');
    ++digits;
  }
  if (digits == 0 || length == 0 || digits + length > rest.size()) return name;
  return rest.substr(digits, length);
}

}  // namespace

CollectiveType classify_collective(std::string_view name) {
  name = first_source_name(name);
  // Demangled names may start with a return type: "void ncclKernel_...(...)".
  if (starts_with(name, "void ")) name.remove_prefix(5);
  while (!name.empty() && name.front() == ' ') name.remove_prefix(1);

  static constexpr std::string_view kPrefixes[] = {"ncclSymkDevKernel_", "ncclDevKernel_",
                                                   "ncclKernel_"};
  std::string_view rest;
  bool found = false;
  for (std::string_view p : kPrefixes) {
    if (starts_with(name, p)) {
      rest = name.substr(p.size());
      found = true;
      break;
    }
  }
  if (!found) {
    // Other NCCL device functions ("ncclDevFunc_...", "nccl::...") still are communication.
    if (starts_with(name, "nccl")) return CollectiveType::kOther;
    return CollectiveType::kNone;
  }
  // The collective is the first '_'-separated component; stop at '(' or '<' too.
  size_t end = rest.find_first_of("_(< ");
  std::string_view coll = rest.substr(0, end);
  if (coll.empty()) return CollectiveType::kOther;
  const std::string f = fold(coll);
  if (f == "generic") return CollectiveType::kOther;
  // Exact component match (so "Reduce" is not read as a prefix of "ReduceScatter").
  for (const auto& e : kTable) {
    if (f == e.folded) return e.type;
  }
  return CollectiveType::kOther;
}

CollectiveType classify_collective_name(std::string_view collective_name) {
  std::string f = fold(collective_name);
  if (f.empty()) return CollectiveType::kNone;
  // PyTorch adds decorations: "_allgather_base", "allgather_into_tensor_coalesced",
  // "reduce_scatter_tensor", "all_to_all_single", "_reduce_scatter_base".
  if (starts_with(f, "allgather")) return CollectiveType::kAllGather;
  if (starts_with(f, "reducescatter")) return CollectiveType::kReduceScatter;
  if (starts_with(f, "allreduce")) return CollectiveType::kAllReduce;
  if (starts_with(f, "alltoall")) return CollectiveType::kAllToAll;
  if (starts_with(f, "broadcast") || starts_with(f, "bcast")) return CollectiveType::kBroadcast;
  if (starts_with(f, "sendrecv") || f == "send" || f == "recv" || starts_with(f, "send") ||
      starts_with(f, "recv") || starts_with(f, "p2p"))
    return CollectiveType::kSendRecv;
  if (starts_with(f, "reduce")) return CollectiveType::kReduce;
  return match_folded_prefix(f);
}

}  // namespace gpuacct
