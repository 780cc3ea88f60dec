#include "inject/runtime.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <limits>
#include <memory>
#include <mutex>
#include <thread>
#include <unordered_map>
#include <vector>

#include "analysis/accounting/step_accountant.h"
#include "analysis/accounting/step_detection.h"
#include "analysis/accounting/step_detector.h"
#include "analysis/import/recording.h"
#include "analysis/model/file_io.h"
#include "analysis/model/name_table.h"
#include "analysis/model/run_metadata.h"
#include "analysis/report/report.h"
#include "cupti_hooks/activity_parser.h"
#include "cupti_hooks/collector.h"
#include "cupti_hooks/device_info.h"
#include "inject/clock.h"
#include "inject/config.h"
#include "inject/host_events.h"
#include "inject/log.h"
#include "inject/native_stacks.h"
#include "inject/python_hook.h"
#include "inject/recorder.h"
#include "inject/step_stream.h"

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
constexpr size_t kWatermarkTicks = 5;

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

void mkdir_p(const std::string& dir) {
  std::string path;
  for (size_t i = 0; i < dir.size(); ++i) {
    path += dir[i];
    if ((dir[i] == '/' && i > 0) || i + 1 == dir.size()) mkdir(path.c_str(), 0777);
  }
}

std::string read_cmdline() {
  std::FILE* f = std::fopen("/proc/self/cmdline", "rb");
  if (f == nullptr) return "";
  std::string out;
  char buf[4096];
  size_t n = std::fread(buf, 1, sizeof buf, f);
  std::fclose(f);
  for (size_t i = 0; i < n; ++i) out += buf[i] == '\0' ? ' ' : buf[i];
  while (!out.empty() && out.back() == ' ') out.pop_back();
  return out;
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

  // Collection state (set by attach_cupti).
  std::string gpu_state = "not_initialized";
  std::string gpu_message =
      "the CUDA driver never initialised the library (no CUDA in this "
      "process, or it started before the library was loaded)";

  // Worker-owned (or the exit thread's, once the worker is joined).
  std::unique_ptr<NameTable> names;
  std::unique_ptr<StepAccountant> acc;
  std::unique_ptr<cupti::ActivityParser> parser;
  std::unique_ptr<HostEventProcessor> host;
  std::unique_ptr<StepDetector> detector;
  SiteTable sites;
  EventBatch batch;
  std::vector<TimedRecord> records;
  std::vector<ThreadState*> threads;
  std::unordered_map<ThreadState*, uint64_t> dropped_seen;
  std::deque<int64_t> now_history;
  std::unique_ptr<DetectorFeeder> feeder;  // joins ops to their launch calls for the detector
  bool auto_steps = true;
  bool auto_stood_down = false;
  bool have_boundary = false;
  Marker last_boundary;
  int64_t auto_steps_emitted = 0;
  StepStream stream;
  bool output_dir_made = false;
  std::string base;
  RecordingWriter recording;
  bool recording_ok = false;
  size_t aliases_known = 0;
  // Name, SMs and compute capability per device, read from the driver while it is alive (at
  // exit it may already be torn down).
  std::vector<DeviceInfo> device_info;

  void worker_main();
  void watchdog_main();
  void tick(bool final);
  void parse_buffers();
  void drop_incomplete_ops();
  void drain_rings();
  void feed_detector();
  void write_row(const StepRow& row);
  template <typename Write>
  void record(Write write);
  void finish_recording(const RunMetadata& meta);
  void finalize();
  nlohmann::json collection_json();
  RunMetadata metadata();
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
  g_hot.ring_capacity = static_cast<size_t>(m.cfg.ring_records);
  g_hot.stacks = m.cfg.stacks;
  g_hot.pause_threshold_ns = m.cfg.host_pause_us * 1000;
  m.auto_steps = m.cfg.auto_steps;

  m.names = std::make_unique<NameTable>();
  m.acc = std::make_unique<StepAccountant>(m.cfg.accounting());
  m.acc->set_row_sink([&m](const StepRow& row) { m.write_row(row); });
  m.parser = std::make_unique<cupti::ActivityParser>(*m.names);
  m.host = std::make_unique<HostEventProcessor>(*m.names, NamePatterns(m.cfg.step_patterns),
                                                NamePatterns(m.cfg.data_patterns));
  m.detector = std::make_unique<StepDetector>();
  m.feeder = std::make_unique<DetectorFeeder>(*m.detector);
  m.base = m.cfg.output_base();
  const nlohmann::json header = {{"schema", "gpuacct.steps/1"},
                                 {"source", "injected"},
                                 {"hostname", m.cfg.host},
                                 {"pid", m.cfg.pid},
                                 {"rank", m.cfg.rank}};
  m.stream.configure(m.base + ".steps.jsonl", header.dump(), &m.acc->mutable_stats());

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
  if (m.cfg.python) schedule_python_auto_import();
  return true;
}

void Runtime::attach_cupti() {
  if (!ensure_started()) return;
  Impl& m = *impl_;
  if (m.cupti_attached.exchange(true)) return;
  std::string line;
  if (!m.cfg.enable) {
    m.gpu_state = "disabled";
    m.gpu_message = "GPUACCT_ENABLE=0";
    log_line("GPUACCT_ENABLE=0; GPU activity off, host ranges only");
    return;
  }
  auto& col = cupti::Collector::instance();
  const Status loaded = col.load(m.cfg.cupti_library);
  if (!loaded.ok()) {
    m.gpu_state = "no_cupti";
    m.gpu_message = "CUPTI not found (" + loaded.message() + ")";
    log_line(m.gpu_message + "; GPU activity off, host ranges only");
    return;
  }
  // CUPTI (and the CUDA runtime) may register exit handlers of their own when they load.  Exit
  // handlers run last-registered-first: registering ours again now makes the final flush run
  // while CUPTI is still intact.  on_exit is idempotent.
  std::atexit(on_exit_trampoline);
  cupti::CollectorOptions opt;
  opt.library = m.cfg.cupti_library;
  opt.buffer_bytes = static_cast<size_t>(m.cfg.buffer_mb) << 20;
  opt.buffer_count = m.cfg.buffer_count;
  opt.flush_period_ms = static_cast<uint32_t>(m.cfg.flush_ms);
  opt.api_callbacks = m.cfg.stacks;
  opt.host_clock = &host_clock_for_cupti;
  opt.hooks.api_enter = &hook_api_enter;
  opt.hooks.api_exit = &hook_api_exit;
  opt.hooks.buffer_ready = &buffer_ready_hook;
  opt.hooks.warn = &log_line;
  const Status started = col.start(opt);
  m.gpu_state = cupti::to_string(col.state());
  if (started.ok()) {
    m.gpu_message = "CUPTI API version " + std::to_string(col.version());
    return;
  }
  m.gpu_message = started.message();
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
      char buf[64];
      for (;;) {
        const ssize_t n = read(wake_pipe[0], buf, sizeof buf);
        if (n <= 0) break;
        woken = true;
        for (ssize_t i = 0; i < n; ++i) {
          signalled = signalled || buf[i] == 'S';
          only_buffers = only_buffers && buf[i] == 'B';
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
      if (woken && only_buffers && Clock::now() < next_tick) {
        // CUPTI handed back a full buffer: parse it now so the bounded pool recycles, without
        // flushing (which would hand back the next one at once) or moving the watermark.
        parse_buffers();
        continue;
      }
      tick(false);
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

void Runtime::Impl::drain_rings() {
  Registry::get().snapshot(threads);
  records.clear();
  auto* parser_ptr = parser.get();
  const bool need_alias = !cupti::Collector::instance().thread_ids_are_system();
  for (ThreadState* t : threads) {
    const bool orphan = t->orphaned.load(std::memory_order_acquire);
    t->ring.drain([&](const HostRecord& r, uint64_t index, HostRing& ring) {
      if (r.type == HostRecType::kStackFrames) return;
      TimedRecord tr;
      tr.rec = r;
      tr.tid = t->tid;
      if (r.type == HostRecType::kStack) {
        const int n = std::min<int>(static_cast<int>(r.aux), kMaxFrames);
        for (int k = 0; k < n; ++k) {
          const HostRecord& c = ring.slot(index + 1 + static_cast<uint64_t>(k / kFramesPerSlot));
          tr.frames[k] = c.frames[k % kFramesPerSlot];
        }
        tr.nframes = n;
      }
      records.push_back(tr);
    });
    const uint64_t d = t->ring.dropped();
    uint64_t& seen = dropped_seen[t];
    if (d > seen) {
      acc->mutable_stats().add(Stat::host_records_dropped, static_cast<int64_t>(d - seen));
      seen = d;
    }
    if (need_alias && parser_ptr != nullptr) parser_ptr->set_thread_alias(t->pthread_low, t->tid);
    if (orphan) {
      t->ring.drain([](const HostRecord&, uint64_t, HostRing&) {});
      Registry::get().recycle(t);
    }
  }
  host->process(records, batch, &sites);
}

void Runtime::Impl::feed_detector() {
  // Calls first, so each op of the batch finds its launch call's host time.
  for (const HostApiCall& c : batch.api_calls) feeder->add_api_call(c);
  for (const GpuOp& op : batch.gpu_ops) feeder->add_gpu_op(op);
}

void Runtime::Impl::parse_buffers() {
  cupti::Collector::instance().consume(*parser, batch, acc->mutable_stats());
  if (batch.gpu_ops.size() + batch.api_calls.size() < (1u << 16)) return;  // keep it for tick
  drop_incomplete_ops();
  if (auto_steps && !auto_stood_down && !detector->gave_up()) feed_detector();
  record([&] { return recording.write_batch(batch); });
  acc->add(batch);
  batch.clear();
}

void Runtime::Impl::drop_incomplete_ops() {
  // A forced flush hands out unfinished work with zero timestamps: not usable.
  auto bad = std::remove_if(batch.gpu_ops.begin(), batch.gpu_ops.end(),
                            [](const GpuOp& op) { return op.start <= 0 || op.end <= 0; });
  const auto n_bad = std::distance(bad, batch.gpu_ops.end());
  if (n_bad > 0) {
    acc->mutable_stats().add(Stat::invalid_events_skipped, n_bad);
    batch.gpu_ops.erase(bad, batch.gpu_ops.end());
  }
}

void Runtime::Impl::tick(bool final) {
  auto& col = cupti::Collector::instance();
  const int64_t now = now_ns();
  now_history.push_back(now);
  while (now_history.size() > kWatermarkTicks + 1) now_history.pop_front();
  if (!final) {
    col.flush(false);
  }
  Stats& stats = acc->mutable_stats();
  col.consume(*parser, batch, stats);
  drain_rings();
  for (size_t i = device_info.size(); i < parser->totals().devices.size(); ++i) {
    device_info.push_back(cupti::describe_device(parser->totals().devices[i]));
  }

  drop_incomplete_ops();

  const bool use_detector = auto_steps && !auto_stood_down && !detector->gave_up();
  if (use_detector && host->explicit_steps()) {
    auto_stood_down = true;  // an explicit step source appeared: it wins from here on
  }
  if (auto_steps && !auto_stood_down && !detector->gave_up()) feed_detector();

  if (!batch.empty()) record([&] { return recording.write_batch(batch); });
  acc->add(batch);
  batch.clear();

  // Watermark: records complete at time t are delivered within a few flushes of t (CUPTI holds
  // some back), so promise only the clock value seen kWatermarkTicks ticks earlier (every tick
  // flushes), and at most now - 2 flush periods (ticks can come faster, on gpuacct_flush()).
  // Until that many ticks have been seen nothing is promised.
  int64_t w = std::numeric_limits<int64_t>::min();
  if (now_history.size() > kWatermarkTicks) {
    w = std::min(now_history.front(), now - 2 * int64_t{cfg.flush_ms} * 1'000'000);
  }
  if (final) w = std::numeric_limits<int64_t>::max();

  if (auto_steps && !auto_stood_down && !detector->gave_up()) {
    for (const Marker& mk : detector->poll(w, final)) {
      if (have_boundary) {
        HostRange r;
        r.start = last_boundary.ts;
        r.end = mk.ts;
        r.number = last_boundary.number;
        r.thread = mk.thread;
        r.name = names->intern("step (detected)");
        r.kind = RangeKind::kStep;
        acc->add_range(r);
        ++auto_steps_emitted;
        record([&] {
          EventBatch b;
          b.ranges.push_back(r);
          return recording.write_batch(b);
        });
      }
      last_boundary = mk;
      have_boundary = true;
    }
  }
  if (!final && w != std::numeric_limits<int64_t>::min()) {
    acc->advance_watermark(w);
    record([&] { return recording.write_watermark(w); });
  }
}

void Runtime::Impl::write_row(const StepRow& row) {
  if (!output_dir_made) mkdir_p(cfg.output_dir);
  output_dir_made = true;
  stream.write_row(step_row_to_json(row).dump(), row.step_index);
}

// Every recording write goes through here: the first one opens the file (with GPUACCT_RECORD=1),
// then names (events refer to them), then `write`.  The first failure abandons the recording --
// one with a hole would mislead -- says so once, and counts it; nothing appears under the final
// name.
template <typename Write>
void Runtime::Impl::record(Write write) {
  Status st;
  if (cfg.record) {  // one attempt
    cfg.record = false;
    mkdir_p(cfg.output_dir);
    recording_ok = true;
    st = recording.open(base + ".gpuacct");
  }
  if (!recording_ok) return;
  if (st.ok()) st = recording.write_new_names(*names);
  if (st.ok()) st = write();
  if (st.ok()) return;
  recording_ok = false;
  recording.abandon();
  acc->mutable_stats().add(Stat::recordings_abandoned);
  log_line(st.message() + "; the recording is abandoned (no " + base + ".gpuacct is written)");
}

void Runtime::Impl::finish_recording(const RunMetadata& meta) {
  // The writer's own counters go into the file; the failures of this run's other outputs
  // (the stream) are not facts about the recording.
  Stats stats = acc->stats();
  stats.set(Stat::stream_rows_lost, 0);
  record([&] { return recording.write_metadata(meta); });
  record([&] { return recording.write_stats(stats); });
  record([&] { return recording.close(); });
}

RunMetadata Runtime::Impl::metadata() {
  RunMetadata meta;
  meta.source = "injected";
  meta.hostname = cfg.host;
  meta.pid = cfg.pid;
  meta.rank = cfg.rank;
  meta.world_size = cfg.world_size;
  meta.command = read_cmdline();
  meta.gpuacct_version = GPUACCT_VERSION_STRING;
  meta.devices = device_info;
  // Devices first seen in the final drain (a run shorter than one flush period).
  for (size_t i = meta.devices.size(); i < parser->totals().devices.size(); ++i) {
    meta.devices.push_back(cupti::describe_device(parser->totals().devices[i]));
  }
  std::sort(meta.devices.begin(), meta.devices.end(),
            [](const DeviceInfo& a, const DeviceInfo& b) { return a.id < b.id; });
  return meta;
}

nlohmann::json Runtime::Impl::collection_json() {
  const auto& col = cupti::Collector::instance();
  const auto& t = parser->totals();
  nlohmann::json c = {
      {"gpu", gpu_state},
      {"detail", gpu_message},
      {"cupti_version", col.version()},
      {"step_source", host->explicit_steps() ? host->step_source()
                                             : (auto_steps_emitted > 0 ? "detected" : "none")},
      {"buffers",
       {{"count", cfg.buffer_count},
        {"bytes_each", static_cast<int64_t>(cfg.buffer_mb) << 20},
        {"allocated", col.buffers_allocated()}}},
      {"records",
       {{"kernels", t.kernels},
        {"memcpys", t.memcpys},
        {"memsets", t.memsets},
        {"api_calls", t.api_calls}}},
  };
  if (col.clock_source() != cupti::ClockSource::kNone) {
    c["clock"] = {{"source", cupti::to_string(col.clock_source())},
                  {"offset_ns", col.clock_offset_ns()},
                  {"offset_uncertainty_ns", col.clock_offset_uncertainty_ns()}};
  }
  if (auto_steps && !host->explicit_steps()) {
    c["step_detection"] = {{"locked", detector->locked()},
                           {"period_ops", detector->period_tokens()},
                           {"step_end", names->text(detector->step_end_name())},
                           {"steps", auto_steps_emitted}};
  }
  const char* sync_names[] = {"unknown", "event_synchronize", "stream_wait_event",
                              "stream_synchronize", "context_synchronize"};
  nlohmann::json sync = nlohmann::json::object();
  for (size_t i = 0; i < t.sync.count.size(); ++i) {
    if (t.sync.count[i] == 0) continue;
    sync[sync_names[i]] = {{"count", t.sync.count[i]},
                           {"total_ms", static_cast<double>(t.sync.ns[i]) / 1e6}};
  }
  c["synchronization"] = sync;
  c["native_sites"] = sites.to_json(5);
  if (gpu_state != "active" && gpu_state != "stopped") {
    c["note"] = "no GPU activity: " + gpu_message;
  } else if (t.kernels + t.memcpys + t.memsets == 0) {
    c["note"] = "no GPU activity was recorded";
  }
  return c;
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
      col.consume(*parser, batch, acc->mutable_stats());
      col.stop();
      gpu_state = "active";
    }
    tick(true);
    host->finish(acc->mutable_stats());
    acc->finish();

    const RunMetadata meta = metadata();
    finish_recording(meta);  // before the report, which counts a recording that failed
    nlohmann::json extra = nlohmann::json::object();
    extra["collection"] = collection_json();
    const nlohmann::json report = build_report(*acc, meta, *names, extra);
    mkdir_p(cfg.output_dir);
    const std::string path = base + ".json";
    const Status written = write_file_atomic(path, report.dump(2) + "\n");
    const nlohmann::json trailer = {{"summary", report.value("summary", nlohmann::json())},
                                    {"verdict", report.value("verdict", nlohmann::json())}};
    stream.write_trailer(trailer.dump());
    stream.close();
    if (!cfg.quiet) {
      auto text = render_terminal_summary(report, false);
      if (text.ok()) log_block(text.value());
      if (report.contains("collection") && report["collection"].contains("note")) {
        log_line(report["collection"]["note"].get<std::string>());
      }
    }
    if (!written.ok()) {
      log_line("no report: " + written.message());
    } else if (!cfg.quiet) {
      log_line("report written to " + path);
    }
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
