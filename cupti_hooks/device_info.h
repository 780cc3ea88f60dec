// What the CUDA driver says about a device: name, SM count, compute capability, memory.
// CUDA-free interface (no CUDA types): inject/ calls it with CUPTI's device ids.
#pragma once

#include "analysis/model/run_metadata.h"

namespace gpuacct::cupti {

// Reads `device_id` from the CUDA driver already loaded in this process (the driver is what
// loaded the library).  Never loads it (dlopen RTLD_NOLOAD) and never fails: any field the
// driver cannot give (no driver, an unknown id, a missing entry point) stays empty / 0.  Call
// it while the driver is alive (at exit it may already be torn down).  The driver API's
// device ordinal equals CUPTI's deviceId for visible devices.
DeviceInfo describe_device(int device_id);

}  // namespace gpuacct::cupti
