#include "analysis/model/events.h"

namespace gpuacct {

const char* to_string(GpuOpKind kind) {
  switch (kind) {
    case GpuOpKind::kKernel:
      return "kernel";
    case GpuOpKind::kMemcpy:
      return "memcpy";
    case GpuOpKind::kMemset:
      return "memset";
  }
  return "kernel";
}

const char* to_string(CopyDir dir) {
  switch (dir) {
    case CopyDir::kNone:
      return "none";
    case CopyDir::kH2D:
      return "h2d";
    case CopyDir::kD2H:
      return "d2h";
    case CopyDir::kD2D:
      return "d2d";
    case CopyDir::kP2P:
      return "p2p";
    case CopyDir::kH2H:
      return "h2h";
  }
  return "none";
}

const char* to_string(CollectiveType type) {
  switch (type) {
    case CollectiveType::kNone:
      return "none";
    case CollectiveType::kAllReduce:
      return "AllReduce";
    case CollectiveType::kAllGather:
      return "AllGather";
    case CollectiveType::kReduceScatter:
      return "ReduceScatter";
    case CollectiveType::kBroadcast:
      return "Broadcast";
    case CollectiveType::kReduce:
      return "Reduce";
    case CollectiveType::kSendRecv:
      return "SendRecv";
    case CollectiveType::kAllToAll:
      return "AllToAll";
    case CollectiveType::kOther:
      return "Other";
  }
  return "none";
}

const char* to_string(HostApiKind kind) {
  switch (kind) {
    case HostApiKind::kLaunch:
      return "launch";
    case HostApiKind::kCopy:
      return "copy";
    case HostApiKind::kSync:
      return "sync";
    case HostApiKind::kOther:
      return "other";
  }
  return "other";
}

const char* to_string(RangeKind kind) {
  switch (kind) {
    case RangeKind::kStep:
      return "step";
    case RangeKind::kData:
      return "data";
    case RangeKind::kUser:
      return "user";
  }
  return "user";
}

const char* to_string(CounterMetric metric) {
  switch (metric) {
    case CounterMetric::kSmActive:
      return "sm_active";
    case CounterMetric::kTensorActive:
      return "tensor_active";
    case CounterMetric::kDram:
      return "dram";
    case CounterMetric::kComputeSol:
      return "compute_sol";
    case CounterMetric::kMemorySol:
      return "memory_sol";
  }
  return "sm_active";
}

}  // namespace gpuacct
