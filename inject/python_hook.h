// CPython: when the library is loaded into a running interpreter (injected by the CUDA driver
// during `import torch; torch.cuda...`, or LD_PRELOADed), schedule `import gpuacct._auto` on
// the interpreter's main thread with Py_AddPendingCall.  The import is guarded: any exception
// is cleared (the package may not be installed).  GPUACCT_PYTHON=0 switches it off.
#pragma once

namespace gpuacct::inject {

// Safe to call from any thread, any number of times (schedules at most once).  Does nothing
// when the process is not a running CPython.
void schedule_python_auto_import();

}  // namespace gpuacct::inject
