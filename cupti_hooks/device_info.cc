#include "cupti_hooks/device_info.h"

#include <cuda.h>
#include <dlfcn.h>

namespace gpuacct::cupti {
namespace {

// The driver's entry points, resolved by name from the loaded libcuda.  The types come from
// cuda.h, so a signature can never drift from the driver's.  cuda.h maps cuDeviceTotalMem to
// the _v2 entry point (size_t bytes) since CUDA 3.2: the symbol looked up is that one.
template <typename Fn>
Fn resolve(void* lib, const char* symbol) {
  return reinterpret_cast<Fn>(dlsym(lib, symbol));
}

}  // namespace

DeviceInfo describe_device(int device_id) {
  DeviceInfo info;
  info.id = device_id;
  void* cuda = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
  if (cuda == nullptr) return info;
  const auto get = resolve<decltype(&::cuDeviceGet)>(cuda, "cuDeviceGet");
  const auto name = resolve<decltype(&::cuDeviceGetName)>(cuda, "cuDeviceGetName");
  const auto attr = resolve<decltype(&::cuDeviceGetAttribute)>(cuda, "cuDeviceGetAttribute");
  const auto total_mem = resolve<decltype(&::cuDeviceTotalMem)>(cuda, "cuDeviceTotalMem_v2");
  CUdevice dev = 0;
  if (get != nullptr && get(&dev, device_id) == CUDA_SUCCESS) {
    char buf[256] = {};
    if (name != nullptr && name(buf, sizeof buf - 1, dev) == CUDA_SUCCESS) info.name = buf;
    size_t bytes = 0;
    if (total_mem != nullptr && total_mem(&bytes, dev) == CUDA_SUCCESS) info.total_memory = bytes;
    if (attr != nullptr) {
      attr(&info.sm_count, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, dev);
      attr(&info.compute_major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, dev);
      attr(&info.compute_minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, dev);
    }
  }
  dlclose(cuda);  // drops the reference RTLD_NOLOAD took; the driver stays loaded
  return info;
}

}  // namespace gpuacct::cupti
