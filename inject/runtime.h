// The injected library's lifecycle: loading the configuration, attaching CUPTI, the worker
// thread (wakes on a completed buffer, gpuacct_flush(), a signal, and every GPUACCT_FLUSH_MS;
// flushes CUPTI and hands the pipeline its watermark, inject/recording/watermark.h) and the
// watchdog, SIGTERM / SIGINT, fork and exit.  Everything between a collected event and an output
// file is the Pipeline's (inject/pipeline/pipeline.h).  One instance, created on first use, never
// freed.
//
// Errors: nothing here throws across a C boundary or stops the program; a failure switches
// the library off or a part of it (one line through log_line, inject/log.h).  The signal
// handler and the watchdog use only async-signal-safe calls (a raw write(2) for their line).
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
