#include "analysis/model/collective.h"

namespace gpuacct {

const char* to_string(CollectiveSource source) {
  switch (source) {
    case CollectiveSource::kNcclPlugin:
      return "nccl_plugin";
    case CollectiveSource::kKernelOrder:
      return "kernel_order";
    case CollectiveSource::kKineto:
      return "kineto";
    case CollectiveSource::kNone:
      break;
  }
  return "none";
}

}  // namespace gpuacct
