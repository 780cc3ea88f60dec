// The injected library's process-wide state: configuration, the worker thread that drains the
// host rings and CUPTI buffers into the StepAccountant, the streamed JSONL rows, and the report
// written at exit (atexit, SIGTERM/SIGINT).  One instance, created on first use, never freed.
#pragma once

#include <signal.h>

#include <string>

namespace gpuacct::inject {

class Runtime {
 public:
  static Runtime& get();

  // Config + worker + exit handlers.  Idempotent; false when the runtime cannot record (after
  // exit, in a fork child, or when it failed to start).
  bool ensure_started();
  // InitializeInjection: starts the runtime and attaches CUPTI (idempotent).
  void attach_cupti();
  bool gpu_active() const;
  // Non-blocking: wakes the worker to flush and stream finished steps.
  void request_flush();

  // Exit paths.
  void on_exit();
  void on_fork_child();
  static void signal_handler(int sig, siginfo_t* info, void* ucontext);

 private:
  Runtime();
  struct Impl;
  Impl* impl_;
};

}  // namespace gpuacct::inject
