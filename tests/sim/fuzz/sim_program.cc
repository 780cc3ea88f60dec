// sim_program: one random program on the simulated device (README.md, "Differential fuzzer").
//
//   sim_program --seed=N [--dims=a,b,...] --describe      the environment to run it under (JSON)
//   sim_program --seed=N [--dims=a,b,...] --truth=PATH    runs it, writes its truth log (and
//                                                         the log as plain lines, PATH.log)
//   sim_program --oracle=PATH.log --steps=RANGES --truth=OUT   the expected rows of other
//                                                         step ranges (detected steps)
//
// The actions run one at a time (a turnstile hands the turn to the thread of the next action),
// so the virtual clock makes every time exact.  The program predicts each call's and each op's
// times from the engine model (sim_cuda.h) and checks the prediction against the clock after
// every action: a wrong prediction is a sim or model bug (exit 3), never a silent bad truth.
#include <gpuacct/gpuacct_dynamic.h>
#include <nvtx3/nvToolsExt.h>

#include <algorithm>
#include <cinttypes>
#include <condition_variable>
#include <cstdio>
#include <cstring>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "program.h"
#include "sim_cuda.h"

namespace sim_fuzz {
namespace {

class Runner {
 public:
  explicit Runner(const Program& p) : p_(p) {}

  // Runs every action; false when a prediction failed (errors() says which).
  bool run() {
    threads_.resize(static_cast<size_t>(p_.workers) + 1);
    act(0);
    for (auto& t : threads_)
      if (t && t->joinable()) t->join();
    return errors_.empty();
  }
  const ProgramLog& log() const { return log_; }

  const std::vector<std::string>& errors() const { return errors_; }

 private:
  // The loop of thread `me`: wait for an action of mine, run it, pass the turn on.
  void act(int me) {
    std::unique_lock<std::mutex> lock(mu_);
    for (;;) {
      cv_.wait(lock, [&] { return turn_ >= p_.actions.size() || p_.actions[turn_].thread == me; });
      if (turn_ >= p_.actions.size()) return;
      const Action& a = p_.actions[turn_];
      const bool leave = a.kind == ActKind::kExit;
      if (!leave) run_action(a);
      ++turn_;
      cv_.notify_all();
      if (leave) return;
    }
  }

  const gpuacct_dyn_api* api() {
    if (api_ == nullptr) api_ = gpuacct_dyn();  // under the turnstile: one thread at a time
    return api_;
  }

  void expect_now(uint64_t want, const Action& a) {
    const uint64_t now = simNow();
    if (now == want) return;
    char buf[160];
    std::snprintf(buf, sizeof buf, "action %zu (kind %d): clock %" PRIu64 ", predicted %" PRIu64,
                  turn_, static_cast<int>(a.kind), now, want);
    errors_.emplace_back(buf);
  }

  void call(int thread, CallKind kind, uint64_t start, uint64_t end, bool outer = true) {
    log_.calls.push_back(Call{thread, kind, start, end, outer});
  }

  // An op on stream `s` submitted at `submit`: starts when the stream is free and the launch
  // latency has passed.
  Op& op(int cls, int stream, uint64_t submit, uint64_t launch_time, uint64_t ns, int thread) {
    uint64_t& free = free_at_[static_cast<size_t>(stream)];
    Op o;
    o.cls = cls;
    o.start = std::max(free, submit + p_.latency);
    o.end = o.start + ns;
    o.launch_time = launch_time;
    o.submitted = submit;
    o.thread = thread;
    o.stream = stream;
    o.device = p_.stream_device[static_cast<size_t>(stream)];
    free = o.end;
    log_.ops.push_back(o);
    return log_.ops.back();
  }

  void init() {
    if (simInit(p_.devices) != SIM_OK) throw std::runtime_error("simInit failed");
    simSetLaunchCost(p_.launch_cost);
    simSetLaunchLatency(p_.latency);
    for (int d = 0; d < p_.devices; ++d) streams_.push_back(simDefaultStream(d));
    for (int i = p_.devices; i < p_.streams; ++i) {
      const uint64_t t = simNow();
      streams_.push_back(simStreamCreate(p_.stream_device[static_cast<size_t>(i)]));
      call(0, CallKind::kOther, t, simNow());
    }
    free_at_.assign(streams_.size(), 0);
    for (const auto& nodes : p_.graphs) {
      simGraph_t g = simGraphCreate();
      for (const auto& [name, ns] : nodes) simGraphAddKernel(g, name.c_str(), ns);
      graphs_.push_back(g);
    }
    api();
  }

  void push_data(const Action& a) {
    if (p_.data_marks == DataMarks::kCapi) {
      api()->data_push(a.name.c_str());
    } else {
      nvtxRangePushA(a.name.c_str());
    }
  }
  void pop_data() {
    if (p_.data_marks == DataMarks::kCapi) {
      api()->data_pop();
    } else {
      nvtxRangePop();
    }
  }

  void run_action(const Action& a);
  void run_gpu_action(const Action& a, uint64_t t);

  const Program& p_;
  std::mutex mu_;
  std::condition_variable cv_;
  size_t turn_ = 0;
  std::vector<std::unique_ptr<std::thread>> threads_;
  const gpuacct_dyn_api* api_ = nullptr;
  std::vector<simStream_t> streams_;
  std::vector<simGraph_t> graphs_;
  std::vector<uint64_t> free_at_;
  ProgramLog log_;
  std::vector<std::string> errors_;
};

void Runner::run_action(const Action& a) {
  const uint64_t t = simNow();
  switch (a.kind) {
    case ActKind::kInit:
      init();
      return;
    case ActKind::kSpawn:
      threads_[static_cast<size_t>(a.arg)] =
          std::make_unique<std::thread>([this, w = a.arg] { act(w); });
      return;
    case ActKind::kRealSleep:
      std::this_thread::sleep_for(std::chrono::microseconds(a.ns));
      return;
    case ActKind::kHostWork:
      simHostWork(a.ns);
      expect_now(t + a.ns, a);
      return;
    case ActKind::kData:
      push_data(a);
      simHostWork(a.ns);
      pop_data();
      log_.data.push_back(Range{a.thread, t, t + a.ns});
      expect_now(t + a.ns, a);
      return;
    case ActKind::kUserRange:
      if (a.arg == 0) {
        api()->range_push(a.name.c_str());
      } else {
        nvtxRangePushA(a.name.c_str());
      }
      simHostWork(a.ns);
      if (a.arg == 0) {
        api()->range_pop();
      } else {
        nvtxRangePop();
      }
      expect_now(t + a.ns, a);
      return;
    case ActKind::kStepBegin:
      // A mark also ends the step before it (whose StepEnd only marked the end of its work).
      if (p_.marks == Marks::kCapiMark && !log_.steps.empty()) log_.steps.back().end = t;
      log_.steps.push_back(StepLog{0, t, t});
      if (p_.marks == Marks::kCapi) api()->step_begin(a.arg);
      if (p_.marks == Marks::kCapiMark) api()->step_mark(a.arg);
      if (p_.marks == Marks::kNvtx) nvtxRangePushA("train_step");
      return;
    case ActKind::kStepEnd:
      // With marks, the last step ends at the main thread's last CUDA call: the synchronize
      // right before this action.
      log_.steps.back().end = t;
      if (p_.marks == Marks::kCapi) api()->step_end();
      if (p_.marks == Marks::kNvtx) nvtxRangePop();
      return;
    default:
      run_gpu_action(a, t);
  }
}

void Runner::run_gpu_action(const Action& a, uint64_t t) {
  const uint64_t L = p_.launch_cost;
  const int s = a.stream;
  simStream_t st = streams_[static_cast<size_t>(s)];
  switch (a.kind) {
    case ActKind::kKernel:
    case ActKind::kCuKernel:
    case ActKind::kAllReduce: {
      if (a.kind == ActKind::kKernel) simLaunchKernel(st, a.name.c_str(), a.ns);
      if (a.kind == ActKind::kCuKernel) simCuLaunchKernel(st, a.name.c_str(), a.ns);
      if (a.kind == ActKind::kAllReduce) simNcclAllReduce(st, a.ns);
      call(a.thread, CallKind::kLaunch, t, t + L);
      op(a.kind == ActKind::kAllReduce ? kComm : kCompute, s, t, t, a.ns, a.thread);
      expect_now(t + L, a);
      return;
    }
    case ActKind::kNested: {
      simLaunchKernelNested(st, a.name.c_str(), a.ns, a.pre, a.tail);
      const uint64_t drv = t + a.pre;
      call(a.thread, CallKind::kLaunch, t, drv + L + a.tail);
      call(a.thread, CallKind::kLaunch, drv, drv + L, /*outer=*/false);
      op(kCompute, s, drv, p_.nested_ids == NestedIds::kDriver ? drv : t, a.ns, a.thread);
      expect_now(drv + L + a.tail, a);
      return;
    }
    case ActKind::kGraph: {
      simGraphLaunch(st, graphs_[static_cast<size_t>(a.arg)]);
      call(a.thread, CallKind::kLaunch, t, t + L);
      for (const auto& node : p_.graphs[static_cast<size_t>(a.arg)])
        op(kCompute, s, t, t, node.second, a.thread);
      expect_now(t + L, a);
      return;
    }
    case ActKind::kCopyAsync:
    case ActKind::kCopySync: {
      const auto kind = static_cast<simMemcpyKind>(a.arg);
      const bool sync = a.kind == ActKind::kCopySync;
      if (sync) {
        simMemcpy(st, kind, 1 << 20, a.ns);
      } else {
        simMemcpyAsync(st, kind, 1 << 20, a.ns, a.pageable ? 1 : 0);
      }
      const Op& o = op(kind == SIM_MEMCPY_H2D ? kCopyInput : kCopyOther, s, t, t, a.ns, a.thread);
      const bool blocks =
          sync || (a.pageable && (kind == SIM_MEMCPY_H2D || kind == SIM_MEMCPY_D2H));
      const uint64_t end = blocks ? std::max(t + L, o.end) : t + L;
      call(a.thread, CallKind::kCopy, t, end);
      expect_now(end, a);
      return;
    }
    case ActKind::kMemset:
      simMemsetAsync(st, 1 << 20, a.ns);
      call(a.thread, CallKind::kCopy, t, t + L);
      op(kCopyOther, s, t, t, a.ns, a.thread);
      expect_now(t + L, a);
      return;
    case ActKind::kSyncStream: {
      simStreamSynchronize(st);
      const uint64_t end = std::max(t, free_at_[static_cast<size_t>(s)]);
      call(a.thread, CallKind::kSync, t, end);
      expect_now(end, a);
      return;
    }
    case ActKind::kSyncDevice: {
      simDeviceSynchronize(a.arg);  // -1: one call per device, in device order
      uint64_t end = t;
      for (int d = 0; d < p_.devices; ++d) {
        if (a.arg >= 0 && d != a.arg) continue;
        const uint64_t begin = end;
        for (size_t i = 0; i < free_at_.size(); ++i)
          if (p_.stream_device[i] == d) end = std::max(end, free_at_[i]);
        call(a.thread, CallKind::kSync, begin, end);
      }
      expect_now(end, a);
      return;
    }
    default:
      return;
  }
}

// ---- output ---------------------------------------------------------------------------------

std::string hex(const std::string& s) {
  static const char kHex[] = "0123456789abcdef";
  std::string out;
  for (char ch : s) {
    const auto c = static_cast<unsigned char>(ch);
    out += kHex[c >> 4];
    out += kHex[c & 15];
  }
  return out;
}

const char* marks_name(Marks m) {
  return m == Marks::kCapi       ? "capi"
         : m == Marks::kCapiMark ? "capi_mark"
         : m == Marks::kNvtx     ? "nvtx"
                                 : "none";
}

void describe(const Program& p, std::FILE* f) {
  std::fprintf(f, "{\"seed\": %" PRIu64 ", \"marks\": \"%s\", \"preload\": %s, \"exact\": %s, ",
               p.seed, marks_name(p.marks), p.preload ? "true" : "false",
               p.exact ? "true" : "false");
  std::fprintf(f, "\"loss_allowed\": %s, \"argv_bytes\": %s, \"no_gpu\": %s, ",
               p.loss_allowed ? "true" : "false", p.argv_bytes ? "true" : "false",
               p.no_gpu ? "true" : "false");
  std::fprintf(f, "\"steps\": %d, \"devices\": %d, \"workers\": %d, \"actions\": %zu, ",
               p.num_steps, p.devices, p.workers, p.actions.size());
  std::fprintf(f, "\"env\": {");
  for (size_t i = 0; i < p.env.size(); ++i)
    std::fprintf(f, "%s\"%s\": \"%s\"", i ? ", " : "", p.env[i].first.c_str(),
                 p.env[i].second.c_str());
  std::fprintf(f, "}}\n");
}

// `"steps": [...]`: one entry per expected row.
void write_rows(std::FILE* f, const ProgramLog& log, const std::vector<ExpectedRow>& rows) {
  std::fprintf(f, ",\n\"steps\": [\n");
  for (size_t k = 0; k < rows.size(); ++k) {
    const ExpectedRow& r = rows[k];
    std::fprintf(f,
                 "  {\"index\": %zu, \"device\": %d, \"host_begin_ns\": %" PRIu64
                 ", \"host_end_ns\": %" PRIu64 ", \"window_begin_ns\": %" PRIu64
                 ", \"window_end_ns\": %" PRIu64 ", \"launches\": %" PRIu64
                 ", \"expected_ns\": {",
                 r.step, r.device, log.steps[r.step].begin, log.steps[r.step].end,
                 r.window_begin, r.window_end, r.launches);
    for (int c = 0; c < kNumCats; ++c)
      std::fprintf(f, "%s\"%s\": %" PRIu64, c ? ", " : "", kCatKeys[c], r.cat[c]);
    std::fprintf(f, "}}%s\n", k + 1 < rows.size() ? "," : "");
  }
  std::fprintf(f, "]");
}

// The log as plain lines, for --oracle (the expected rows of other step ranges, e.g. the
// steps the library detected).
bool write_plain_log(const ProgramLog& log, const Thresholds& t, const std::string& path) {
  std::FILE* f = std::fopen(path.c_str(), "w");
  if (f == nullptr) return false;
  std::fprintf(f, "thresholds %" PRIu64 " %" PRIu64 "\n", t.launch_latency_ns, t.host_pause_ns);
  for (const Call& c : log.calls)
    std::fprintf(f, "call %d %d %" PRIu64 " %" PRIu64 " %d\n", c.thread, static_cast<int>(c.kind),
                 c.start, c.end, c.outer ? 1 : 0);
  for (const Op& o : log.ops)
    std::fprintf(f, "op %d %" PRIu64 " %" PRIu64 " %" PRIu64 " %" PRIu64 " %d %d %d\n", o.cls,
                 o.start, o.end, o.launch_time, o.submitted, o.thread, o.stream, o.device);
  for (const Range& r : log.data)
    std::fprintf(f, "data %d %" PRIu64 " %" PRIu64 "\n", r.thread, r.start, r.end);
  return std::fclose(f) == 0;
}

bool read_plain_log(const char* path, ProgramLog* log, Thresholds* t) {
  std::FILE* f = std::fopen(path, "r");
  if (f == nullptr) return false;
  char kind[16];
  bool ok = true;
  while (ok && std::fscanf(f, "%15s", kind) == 1) {
    if (std::strcmp(kind, "thresholds") == 0) {
      ok = std::fscanf(f, "%" SCNu64 " %" SCNu64, &t->launch_latency_ns, &t->host_pause_ns) == 2;
    } else if (std::strcmp(kind, "call") == 0) {
      Call c;
      int k = 0, outer = 0;
      ok = std::fscanf(f, "%d %d %" SCNu64 " %" SCNu64 " %d", &c.thread, &k, &c.start, &c.end,
                       &outer) == 5;
      c.kind = static_cast<CallKind>(k);
      c.outer = outer != 0;
      log->calls.push_back(c);
    } else if (std::strcmp(kind, "op") == 0) {
      Op o;
      ok = std::fscanf(f, "%d %" SCNu64 " %" SCNu64 " %" SCNu64 " %" SCNu64 " %d %d %d", &o.cls,
                       &o.start, &o.end, &o.launch_time, &o.submitted, &o.thread, &o.stream,
                       &o.device) == 8;
      log->ops.push_back(o);
    } else if (std::strcmp(kind, "data") == 0) {
      Range r;
      ok = std::fscanf(f, "%d %" SCNu64 " %" SCNu64, &r.thread, &r.start, &r.end) == 3;
      log->data.push_back(r);
    } else {
      ok = false;
    }
  }
  std::fclose(f);
  return ok;
}

// --oracle=LOG --steps=FILE --truth=OUT: the expected rows of the step ranges in FILE (lines
// "begin end", main thread) for the logged program.  Exit 0, or 2 on bad input.
int oracle_main(const char* log_path, const char* steps_path, const char* out) {
  ProgramLog log;
  Thresholds t;
  std::FILE* sf = std::fopen(steps_path, "r");
  if (!read_plain_log(log_path, &log, &t) || sf == nullptr) {
    std::fprintf(stderr, "sim_program: cannot read %s or %s\n", log_path, steps_path);
    if (sf != nullptr) std::fclose(sf);
    return 2;
  }
  StepLog st;
  while (std::fscanf(sf, "%" SCNu64 " %" SCNu64, &st.begin, &st.end) == 2) log.steps.push_back(st);
  std::fclose(sf);
  std::FILE* f = std::fopen(out, "w");
  if (f == nullptr) return 2;
  std::fprintf(f, "{\"schema\": \"gpuacct-fuzz-truth/1\"");
  write_rows(f, log, expected_rows(log, t));
  std::fprintf(f, "}\n");
  return std::fclose(f) == 0 ? 0 : 2;
}

bool write_truth(const Program& p, const ProgramLog& log, const std::vector<ExpectedRow>& rows,
                 const char* path) {
  std::FILE* f = std::fopen(path, "w");
  if (f == nullptr) return false;
  std::fprintf(f, "{\"schema\": \"gpuacct-fuzz-truth/1\", \"program\": ");
  describe(p, f);
  std::fprintf(f, ", \"launch_cost_ns\": %" PRIu64 ", \"launch_latency_ns\": %" PRIu64,
               p.launch_cost, p.latency);
  write_rows(f, log, rows);
  // What it did: the actions, then the log the truth was computed from.
  std::fprintf(f, ",\n\"actions\": [\n");

  for (size_t i = 0; i < p.actions.size(); ++i) {
    const Action& a = p.actions[i];
    std::fprintf(f,
                 "  {\"kind\": %d, \"thread\": %d, \"stream\": %d, \"arg\": %d, \"pageable\": %d,"
                 " \"ns\": %" PRIu64 ", \"pre\": %" PRIu64 ", \"tail\": %" PRIu64
                 ", \"name_hex\": \"%s\"}%s\n",
                 static_cast<int>(a.kind), a.thread, a.stream, a.arg, a.pageable ? 1 : 0, a.ns,
                 a.pre, a.tail, hex(a.name).c_str(), i + 1 < p.actions.size() ? "," : "");
  }
  std::fprintf(f, "],\n\"calls\": [");
  for (size_t i = 0; i < log.calls.size(); ++i) {
    const Call& c = log.calls[i];
    std::fprintf(f, "%s[%d, %d, %" PRIu64 ", %" PRIu64 ", %d]", i ? ", " : "", c.thread,
                 static_cast<int>(c.kind), c.start, c.end, c.outer ? 1 : 0);
  }
  std::fprintf(f, "],\n\"ops\": [");
  for (size_t i = 0; i < log.ops.size(); ++i) {
    const Op& o = log.ops[i];
    std::fprintf(f, "%s[%d, %" PRIu64 ", %" PRIu64 ", %" PRIu64 ", %" PRIu64 ", %d, %d, %d]",
                 i ? ", " : "", o.cls, o.start, o.end, o.launch_time, o.submitted, o.thread,
                 o.stream, o.device);
  }
  std::fprintf(f, "],\n\"data\": [");
  for (size_t i = 0; i < log.data.size(); ++i) {
    const Range& r = log.data[i];
    std::fprintf(f, "%s[%d, %" PRIu64 ", %" PRIu64 "]", i ? ", " : "", r.thread, r.start, r.end);
  }
  std::fprintf(f, "]}\n");
  return std::fclose(f) == 0;
}

// The step the last mark opened ends at its thread's last CUDA call (the last that begins after
// the mark); with none, or one that ends at the mark (a synchronize with nothing to wait for),
// there is no step (docs/accounting.md §1: incomplete_trailing_step).
void end_last_mark(ProgramLog* log) {
  if (log->steps.empty()) return;
  StepLog& last = log->steps.back();
  uint64_t end = last.begin;
  for (const Call& c : log->calls) {
    if (c.thread == last.thread && c.kind != CallKind::kOther && c.start >= last.begin)
      end = std::max(end, c.end);
  }
  if (end > last.begin) {
    last.end = end;
  } else {
    log->steps.pop_back();
  }
}

[[noreturn]] void usage() {
  std::fprintf(stderr,
               "usage: sim_program --seed=N [--dims=a,b,...|all] (--describe | --truth=PATH) "
               "[--tag=BYTES]\n"
               "       sim_program --oracle=TRUTH.log --steps=RANGES --truth=OUT\n");
  std::exit(2);
}

}  // namespace
}  // namespace sim_fuzz

int main(int argc, char** argv) {
  using namespace sim_fuzz;  // NOLINT(build/namespaces)
  uint64_t seed = 0;
  bool have_seed = false, describe_only = false;
  std::set<std::string> dims;
  const char* truth = nullptr;
  const char* oracle_log = nullptr;
  const char* oracle_steps = nullptr;
  for (int i = 1; i < argc; ++i) {
    const char* a = argv[i];
    if (std::strncmp(a, "--seed=", 7) == 0) {
      seed = std::strtoull(a + 7, nullptr, 10);
      have_seed = true;
    } else if (std::strncmp(a, "--dims=", 7) == 0) {
      std::string list = a + 7;
      if (list == "all") {
        dims.insert(known_dims().begin(), known_dims().end());
        continue;
      }
      for (size_t pos = 0; pos <= list.size();) {
        const size_t comma = std::min(list.find(',', pos), list.size());
        if (comma > pos) dims.insert(list.substr(pos, comma - pos));
        pos = comma + 1;
      }
    } else if (std::strcmp(a, "--describe") == 0) {
      describe_only = true;
    } else if (std::strncmp(a, "--truth=", 8) == 0) {
      truth = a + 8;
    } else if (std::strncmp(a, "--oracle=", 9) == 0) {
      oracle_log = a + 9;
    } else if (std::strncmp(a, "--steps=", 8) == 0) {
      oracle_steps = a + 8;
    } else if (std::strncmp(a, "--tag=", 6) == 0) {
      // ignored: arbitrary bytes on the command line (the report carries the command line)
    } else {
      usage();
    }
  }
  if (oracle_log != nullptr && oracle_steps != nullptr && truth != nullptr)
    return oracle_main(oracle_log, oracle_steps, truth);
  if (!have_seed || (!describe_only && truth == nullptr)) usage();
  Program p;
  try {
    p = generate(seed, dims);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "sim_program: %s\n", e.what());
    return 2;
  }
  if (describe_only) {
    describe(p, stdout);
    return 0;
  }
  Runner r(p);
  const bool ok = r.run();
  if (p.marks == Marks::kCapi || p.marks == Marks::kCapiMark) gpuacct_dyn()->flush();
  // Without GPU collection the library knows the host ranges only: no call, no op.
  ProgramLog seen = r.log();
  if (p.no_gpu) seen.calls.clear(), seen.ops.clear();
  if (p.marks == Marks::kCapiMark) end_last_mark(&seen);
  const std::vector<ExpectedRow> rows = expected_rows(seen, p.thresholds);
  const bool written = write_truth(p, seen, rows, truth) &&
                       write_plain_log(seen, p.thresholds, std::string(truth) + ".log");
  simShutdown();
  for (const std::string& e : r.errors()) std::fprintf(stderr, "sim_program: %s\n", e.c_str());
  if (!written) {
    std::fprintf(stderr, "sim_program: cannot write %s\n", truth);
    return 2;
  }
  return ok ? 0 : 3;
}
