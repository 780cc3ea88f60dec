#include "inject/runtime.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "cupti_hooks/collector.h"
#include "inject/clock.h"
#include "inject/config.h"
#include "inject/log.h"
#include "inject/output/collection.h"
#include "inject/pipeline/pipeline.h"
#include "inject/python/python_hook.h"
#include "inject/recording/recorder.h"
#include "inject/recording/sampling.h"
#include "inject/recording/watermark.h"

namespace gpuacct::inject {
namespace {

constexpr int kHandledSignals[] = {SIGTERM, SIGINT};
struct sigaction g_old_actions[2];
std::atomic<bool> g_handlers_installed{false};
std::atomic<int> g_wake_fd{-1};
std::atomic<int> g_watchdog_fd{-1};
std::atomic<int64_t> g_init_pid{0};
// A SIGTERM / SIGINT whose default action we deferred until the report is written (0: none).
std::atomic<int> g_pending_signal{0};
constexpr int kSignalReportTimeoutMs = 10'000;
constexpr int kExitJoinTimeoutMs = 10'000;

// Waits until `fd` is readable or `timeout_ms` passes; true when readable.
bool wait_readable(int fd, int timeout_ms) {
  if (fd < 0) return false;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  for (;;) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    pollfd p{fd, POLLIN, 0};
    const int r = poll(&p, 1, static_cast<int>(std::max<int64_t>(0, left.count())));
    if (r > 0) return true;
    if (r == 0 || errno != EINTR) return false;
  }
}

// After the report for a deferred SIGTERM / SIGINT: give the signal its default action back and
// deliver it, so the process ends the way it would have without gpuacct.
void terminate_with_pending_signal() {
  const int sig = g_pending_signal.load(std::memory_order_acquire);
  if (sig == 0) return;
  const size_t idx = sig == SIGTERM ? 0 : 1;
  sigaction(sig, &g_old_actions[idx], nullptr);
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, sig);
  pthread_sigmask(SIG_UNBLOCK, &set, nullptr);  // our threads block it
  raise(sig);
}

const char* getenv_lookup(const char* name) {
  return std::getenv(name);
}

void wake(char what) {
  const int fd = g_wake_fd.load(std::memory_order_acquire);
  if (fd >= 0) {
    ssize_t r = write(fd, &what, 1);
    (void)r;  // a full pipe already holds a wake-up
  }
}

void on_exit_trampoline() {
  try {
    Runtime::get().on_exit();
  } catch (...) {
  }
}
void on_fork_child_trampoline() {
  try {
    Runtime::get().on_fork_child();
  } catch (...) {
  }
}
void buffer_ready_hook() {
  wake('B');
}  // parse now: the pool is bounded
void ring_filling_hook() {
  wake('R');
}  // drain now: a thread's ring is filling with API calls

// A device's first launch (hardware counters on): start sampling it now, not at the next tick
// after its first records arrive (CUPTI may hold them until the end of a short run).
void device_launched_hook(uint32_t) {
  wake('U');
}

}  // namespace

struct Runtime::Impl {
  std::mutex start_mu;
  std::atomic<int> state{0};  // 0 idle, 1 running, 2 finished / disabled
  Config cfg;
  std::thread worker;
  int wake_pipe[2] = {-1, -1};
  int done_pipe[2] = {-1, -1};
  int exit_pipe[2] = {-1, -1};  // one byte when the worker has left its loop (bounded join)
  int watchdog_pipe[2] = {-1, -1};
  std::thread watchdog;
  std::atomic<bool> worker_exited{false};
  std::atomic<bool> stop{false};
  std::atomic<bool> cupti_attached{false};
  std::mutex final_mu;
  bool finalized = false;
  GpuCollectionState gpu;  // set by attach_cupti

  // Worker-owned (or the exit thread's, once the worker is joined).
  std::unique_ptr<Pipeline> pipeline;

  void worker_main();
  void watchdog_main();
  void tick(FlushWatermark& watermark);
  void finalize();
};

Runtime::Runtime() : impl_(new Impl()) {}

Runtime& Runtime::get() {
  static Runtime* r = new Runtime();  // never destroyed: used from atexit and signal paths
  return *r;
}

bool start_lazily() {
  try {
    return Runtime::get().ensure_started();
  } catch (...) {
    return false;
  }
}

bool Runtime::ensure_started() {
  Impl& m = *impl_;
  const int s = m.state.load(std::memory_order_acquire);
  if (s != 0) return s == 1;
  std::lock_guard<std::mutex> lock(m.start_mu);
  if (m.state.load() != 0) return m.state.load() == 1;

  std::vector<std::string> warnings;
  m.cfg = parse_config(getenv_lookup, &warnings);
  for (const auto& w : warnings) log_line(w);
  g_init_pid.store(m.cfg.pid);
  g_hot.api_calls = cupti::api_from_callbacks(m.cfg.cupti_plan);
  g_hot.ring_capacity = static_cast<size_t>(m.cfg.ring_records);
  // A record per CUDA call: the default ring holds what a thread writes in a tick only at a
  // few thousand calls a step, so it grows (GPUACCT_RING_RECORDS set by the user wins).
  if (g_hot.api_calls && !m.cfg.ring_records_set) {
    g_hot.ring_capacity = std::max<size_t>(g_hot.ring_capacity, kApiCallRingRecords);
  }
  g_hot.wake_worker = &ring_filling_hook;
  g_hot.stacks = m.cfg.stacks;
  g_hot.pause_threshold_ns = m.cfg.host_pause_us * 1000;
  configure_sampling(m.cfg.enable ? m.cfg.sample_every : 1);  // GPUACCT_ENABLE=0: nothing to switch

  m.pipeline = std::make_unique<Pipeline>(m.cfg);

  if (pipe2(m.wake_pipe, O_CLOEXEC | O_NONBLOCK) != 0 || pipe2(m.done_pipe, O_CLOEXEC) != 0 ||
      pipe2(m.exit_pipe, O_CLOEXEC) != 0 || pipe2(m.watchdog_pipe, O_CLOEXEC) != 0) {
    log_line(std::string("cannot create a pipe (") + std::strerror(errno) + "); gpuacct is off");
    m.state.store(2);
    g_mode.store(kModeStopped);
    return false;
  }
  g_wake_fd.store(m.wake_pipe[1], std::memory_order_release);

  // Our threads never take the program's signals (SIGTERM, SIGINT, SIGALRM, ...): block them
  // all while the threads are created; they inherit the mask.
  sigset_t block, old;
  sigfillset(&block);
  pthread_sigmask(SIG_BLOCK, &block, &old);
  try {
    m.worker = std::thread([&m] { m.worker_main(); });
  } catch (...) {
    pthread_sigmask(SIG_SETMASK, &old, nullptr);
    log_line("cannot start the worker thread; gpuacct is off");
    m.state.store(2);
    g_mode.store(kModeStopped);
    return false;
  }
  try {
    m.watchdog = std::thread([&m] { m.watchdog_main(); });
    m.watchdog.detach();  // blocks on a pipe for the life of the process
    g_watchdog_fd.store(m.watchdog_pipe[1], std::memory_order_release);
  } catch (...) {
    // Without it a SIGTERM / SIGINT keeps its immediate default action (no report).
  }
  pthread_sigmask(SIG_SETMASK, &old, nullptr);

  std::atexit(on_exit_trampoline);
  pthread_atfork(nullptr, nullptr, on_fork_child_trampoline);

  // SIGTERM / SIGINT: write the report, then let the signal do what it did before.  Handlers
  // set to SIG_IGN stay ignored; a program's own handlers are chained (and keep the final say:
  // the report is then written at exit).
  for (size_t i = 0; i < 2; ++i) {
    struct sigaction cur {};
    if (sigaction(kHandledSignals[i], nullptr, &cur) != 0) continue;
    if (cur.sa_handler == SIG_IGN && (cur.sa_flags & SA_SIGINFO) == 0) continue;
    g_old_actions[i] = cur;
    struct sigaction sa {};
    sa.sa_sigaction = &Runtime::signal_handler;
    sa.sa_mask = cur.sa_mask;  // a chained handler runs with the mask it asked for
    sa.sa_flags = SA_SIGINFO | SA_RESTART | (cur.sa_flags & SA_ONSTACK);
    sigaction(kHandledSignals[i], &sa, nullptr);
  }
  g_handlers_installed.store(true);

  m.state.store(1, std::memory_order_release);
  g_mode.store(kModeRecording, std::memory_order_release);
  if (m.cfg.python) {
    schedule_python_auto_import();
  } else {
    python_switched_off();
  }
  return true;
}

void Runtime::attach_cupti() {
  if (!ensure_started()) return;
  Impl& m = *impl_;
  // A library loaded before the interpreter ran (LD_PRELOAD) could not schedule its Python
  // instrumentation at start; by cuInit the interpreter runs.  At most once either way.
  if (m.cfg.python) schedule_python_auto_import();
  if (m.cupti_attached.exchange(true)) return;
  std::string line;
  if (!m.cfg.enable) {
    m.gpu.state = "disabled";
    m.gpu.message = "GPUACCT_ENABLE=0";
    log_line("GPUACCT_ENABLE=0; GPU activity off, host ranges only");
    return;
  }
  auto& col = cupti::Collector::instance();
  const Status loaded = col.load(m.cfg.cupti_library);
  if (!loaded.ok()) {
    m.gpu.state = "no_cupti";
    m.gpu.message = "CUPTI not found (" + loaded.message() + ")";
    log_line(m.gpu.message + "; GPU activity off, host ranges only");
    return;
  }
  // CUPTI (and the CUDA runtime) may register exit handlers of their own when they load.  Exit
  // handlers run last-registered-first: registering ours again now makes the final flush run
  // while CUPTI is still intact.  on_exit is idempotent.
  std::atexit(on_exit_trampoline);
  if (m.cfg.counters) {
    // The sampler starts on a device at its first launch there (the collector's launch
    // callback wakes the worker: device_launched_hook), or at its first GPU record (the
    // pipeline offers the devices the parser has seen, each tick: inject/pipeline/pipeline.cc).
    cupti::CounterOptions counters;
    counters.interval_us = static_cast<uint32_t>(m.cfg.counters_interval_us);
    counters.decode_period_ms = static_cast<uint32_t>(m.cfg.flush_ms);
    counters.debug = m.cfg.counters_debug;
    col.configure_counters(counters);
  }
  cupti::CollectorOptions opt;
  opt.library = m.cfg.cupti_library;
  opt.buffer_bytes = static_cast<size_t>(m.cfg.buffer_mb) << 20;
  opt.buffer_count = m.cfg.buffer_count;
  opt.flush_period_ms = static_cast<uint32_t>(m.cfg.flush_ms);
  opt.api_callbacks = m.cfg.stacks;
  opt.plan = m.cfg.cupti_plan;
  if (opt.plan.experiment) {
    const bool exact =
        (opt.plan.kinds & (cupti::kKindKernel | cupti::kKindCopy | cupti::kKindMemset)) ==
            (cupti::kKindKernel | cupti::kKindCopy | cupti::kKindMemset) &&
        opt.plan.api_records;
    log_line(std::string("GPUACCT_CUPTI_* settings: kinds=") +
             cupti::kinds_to_string(opt.plan.kinds) +
             " api_records=" + (opt.plan.api_records ? "1" : "0") +
             " callbacks=" + cupti::to_string(opt.plan.callbacks) +
             " timestamps=" + cupti::to_string(opt.plan.timestamps) +
             " sample_switch=" + cupti::to_string(opt.plan.sample_switch) +
             "; a run for measuring overhead (docs/overhead.md)" +
             (exact ? "" : ", its walls are not to be trusted"));
  }
  opt.host_clock = &host_clock_for_cupti;
  opt.hooks.api_enter = &hook_api_enter;
  opt.hooks.api_exit = &hook_api_exit;
  opt.hooks.buffer_ready = &buffer_ready_hook;
  if (m.cfg.counters) opt.hooks.device_launched = &device_launched_hook;
  opt.hooks.warn = &log_line;
  const Status started = col.start(opt);
  m.gpu.state = cupti::to_string(col.state());
  if (started.ok()) {
    m.gpu.message = "CUPTI API version " + std::to_string(col.version());
    return;
  }
  m.gpu.message = started.message();
  log_line(started.message() + "; GPU activity off, host ranges only");
}

bool Runtime::gpu_active() const {
  return cupti::Collector::instance().state() == cupti::CollectorState::kActive;
}

void Runtime::request_flush() {
  if (impl_->state.load(std::memory_order_acquire) == 1) wake('F');
}

// ---- worker ---------------------------------------------------------------------------------

void Runtime::Impl::worker_main() {
  try {
    using Clock = std::chrono::steady_clock;
    const auto period = std::chrono::milliseconds(cfg.flush_ms);
    FlushWatermark watermark(int64_t{cfg.flush_ms} * 1'000'000);
    auto next_tick = Clock::now() + period;
    for (;;) {
      // The tick is due every flush period whatever wakes the worker in between: completed
      // buffers can arrive back to back for as long as the job runs, and they must not starve
      // the ring drain, the watermark and the step stream.
      const auto left =
          std::chrono::duration_cast<std::chrono::milliseconds>(next_tick - Clock::now());
      pollfd p{wake_pipe[0], POLLIN, 0};
      poll(&p, 1, static_cast<int>(std::max<int64_t>(0, left.count())));
      bool signalled = false;
      bool only_buffers = true;
      bool woken = false;
      bool device_launched = false;
      char buf[64];
      for (;;) {
        const ssize_t n = read(wake_pipe[0], buf, sizeof buf);
        if (n <= 0) break;
        woken = true;
        for (ssize_t i = 0; i < n; ++i) {
          signalled = signalled || buf[i] == 'S';
          device_launched = device_launched || buf[i] == 'U';
          only_buffers = only_buffers && (buf[i] == 'B' || buf[i] == 'U' || buf[i] == 'R');
        }
      }
      if (signalled) {
        finalize();
        const char done = 'D';
        ssize_t r = write(done_pipe[1], &done, 1);
        (void)r;
        break;
      }
      if (stop.load(std::memory_order_acquire)) break;
      if (device_launched) pipeline->start_counters();
      if (woken && only_buffers && Clock::now() < next_tick) {
        // CUPTI handed back a full buffer, or a thread's ring is filling: parse and drain now so
        // the bounded pool recycles and the ring does not drop, without flushing (which would
        // hand back the next buffer at once) or moving the watermark.
        pipeline->ingest();
        continue;
      }
      tick(watermark);
      next_tick = Clock::now() + period;
    }
  } catch (...) {
    // Never let an exception end the process: stop collecting, keep what was streamed.
    g_mode.store(kModeStopped);
  }
  worker_exited.store(true, std::memory_order_release);
  const char gone = 'X';
  ssize_t r = write(exit_pipe[1], &gone, 1);
  (void)r;
}

void Runtime::Impl::watchdog_main() {
  // Sleeps until a deferred SIGTERM / SIGINT.  Then the process must end with that signal once
  // the worker has written the report, or after kSignalReportTimeoutMs if the worker is stuck.
  for (;;) {
    char c = 0;
    const ssize_t n = read(watchdog_pipe[0], &c, 1);
    if (n == 1) break;
    if (n < 0 && errno == EINTR) continue;
    return;
  }
  if (!wait_readable(done_pipe[0], kSignalReportTimeoutMs)) {
    const char msg[] = "gpuacct: the report was not written within 10 s of the signal\n";
    ssize_t r = write(STDERR_FILENO, msg, sizeof msg - 1);
    (void)r;
  }
  terminate_with_pending_signal();
}

// One tick: the watermark is read before the flush (what CUPTI delivers from this flush on
// completed after the clock value seen kTicksBehind ticks ago), then the pipeline takes
// everything in.
void Runtime::Impl::tick(FlushWatermark& watermark) {
  const int64_t w = watermark.on_tick(now_ns());
  auto& collector = cupti::Collector::instance();
  collector.flush(false);
  // What the buffers CUPTI still holds after this flush hold back (inject/recording/watermark.h).
  pipeline->tick(FlushWatermark::held_by_buffers(w, collector.oldest_lent_ns()));
}

void Runtime::Impl::finalize() {
  std::lock_guard<std::mutex> lock(final_mu);
  if (finalized) return;
  finalized = true;
  try {
    g_mode.store(kModeStopped, std::memory_order_release);
    auto& col = cupti::Collector::instance();
    if (col.state() == cupti::CollectorState::kActive) {
      // Return every completed buffer to the pool first: the final forced flush needs free
      // buffers, or CUPTI drops what it still holds.
      pipeline->ingest();
      col.stop();
      gpu.state = "active";
    }
    pipeline->finish(gpu);
  } catch (...) {
    log_line("internal error while writing the report");
  }
}

// ---- exit paths -----------------------------------------------------------------------------

void Runtime::on_exit() {
  Impl& m = *impl_;
  if (m.state.load() != 1) return;
  if (static_cast<int64_t>(getpid()) != g_init_pid.load()) return;  // a fork child
  m.stop.store(true, std::memory_order_release);
  wake('Q');
  if (m.worker.joinable() && m.worker.get_id() != std::this_thread::get_id()) {
    // Bounded: a worker stuck in CUPTI must not hold the process at exit.
    if (!wait_readable(m.exit_pipe[0], kExitJoinTimeoutMs) &&
        !m.worker_exited.load(std::memory_order_acquire)) {
      m.worker.detach();
      m.state.store(2);
      g_mode.store(kModeStopped, std::memory_order_release);
      log_line(
          "the worker did not stop within 10 s at exit; no report written (the step stream "
          "holds the steps finished so far)");
      return;
    }
    m.worker.join();
  }
  m.finalize();
  m.state.store(2);
  terminate_with_pending_signal();  // exit() raced a deferred SIGTERM / SIGINT: end with it
}

void Runtime::on_fork_child() {
  // The child has no worker thread and no CUPTI threads: it must never flush or write the
  // parent's state.  Everything stays off in it.
  g_mode.store(kModeStopped, std::memory_order_relaxed);
  impl_->state.store(2, std::memory_order_relaxed);
  // The pipes are shared with the parent: a wake-up from the child would reach its worker.
  g_wake_fd.store(-1, std::memory_order_relaxed);
  g_watchdog_fd.store(-1, std::memory_order_relaxed);
  g_pending_signal.store(0, std::memory_order_relaxed);
  cupti::Collector::instance().disable_in_child();
}

void Runtime::signal_handler(int sig, siginfo_t* info, void* ucontext) {
  // Async-signal-safe only: atomics, write(), sigaction(), raise().  The report is written by
  // the worker while this thread goes on (it may hold a lock the report needs: malloc's, stdio's,
  // CUPTI's); the watchdog then ends the process with this signal.
  const int saved_errno = errno;
  const size_t idx = sig == SIGTERM ? 0 : 1;
  const struct sigaction old = g_old_actions[idx];
  const bool default_action = (old.sa_flags & SA_SIGINFO) == 0 && old.sa_handler == SIG_DFL;
  const bool ours = static_cast<int64_t>(getpid()) == g_init_pid.load(std::memory_order_relaxed);
  if (ours && default_action) {
    Impl& m = *get().impl_;
    const int watchdog_fd = g_watchdog_fd.load(std::memory_order_acquire);
    if (watchdog_fd >= 0 && m.state.load(std::memory_order_acquire) == 1 &&
        !m.worker_exited.load(std::memory_order_acquire) &&
        g_pending_signal.exchange(sig, std::memory_order_acq_rel) == 0) {
      wake('S');
      const char c = 'S';
      ssize_t r = write(watchdog_fd, &c, 1);
      (void)r;
      errno = saved_errno;
      return;
    }
    // A second signal while the report is written, or no worker: the default action now.
  }
  if (default_action) {
    sigaction(sig, &old, nullptr);
    raise(sig);  // delivered with the default action once this handler returns
    errno = saved_errno;
    return;
  }
  if ((old.sa_flags & SA_SIGINFO) != 0) {
    if (old.sa_sigaction != nullptr) old.sa_sigaction(sig, info, ucontext);
  } else if (old.sa_handler != SIG_IGN && old.sa_handler != SIG_DFL && old.sa_handler != nullptr) {
    old.sa_handler(sig);
  }
  errno = saved_errno;
}

}  // namespace gpuacct::inject
