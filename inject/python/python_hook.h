// CPython: when the library is loaded into a running interpreter (injected by the CUDA driver
// during `import torch; torch.cuda...`, LD_PRELOADed, or loaded by NCCL), it schedules its
// Python instrumentation (gpuacct._auto) on the interpreter's main thread with
// Py_AddPendingCall.  The library carries that package inside itself (cmake/EmbedFiles.cmake,
// inject/python/python_bootstrap.py): an installed gpuacct package wins, else the embedded copy is
// served, so the README's one-liner instruments a loop with nothing installed and no
// PYTHONPATH.  Whatever happens is recorded (python_status: the report's collection section)
// and a failure inside a CPython process is said in one line.  GPUACCT_PYTHON=0 switches it
// off.  No exception crosses the interpreter: the bootstrap catches everything.
#pragma once

#include <string>
#include <string_view>

namespace gpuacct::inject {

// Safe to call from any thread, any number of times (schedules at most once).  Does nothing
// when the process is not a running CPython (yet: a later call may schedule it).
void schedule_python_auto_import();
// GPUACCT_PYTHON=0: nothing is scheduled, and python_status() says why.
void python_switched_off();

// What became of the instrumentation, for the report: "not a CPython process", "not
// scheduled" (the interpreter never ran while the library could schedule), "pending" (never
// reached the interpreter's main loop), "off: ...", "installed: ...", "embedded: ...",
// "failed: ...", updated by the package (gpuacct_python_status) as it instruments torch.
std::string python_status();
// The package's own account of what it instrumented (the C API's gpuacct_python_status):
// replaces the detail after the origin ("embedded: <text>").
void set_python_status(std::string_view text);

// The embedded archive (generated: <build>/inject/python_package.cc): python_bootstrap.py
// first, then the gpuacct package, "<path>\n<size>\n<bytes>" each.
std::string_view embedded_python_package();

}  // namespace gpuacct::inject
