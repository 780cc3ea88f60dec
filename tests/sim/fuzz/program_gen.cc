// Random programs from a seed (program.h).  Every choice comes from one SplitMix64 stream, in
// a fixed order, so a seed and a set of dimensions give the same program on every machine.
#include <algorithm>
#include <stdexcept>

#include "program.h"

namespace sim_fuzz {
namespace {

constexpr uint64_t kUs = 1000;
constexpr uint64_t kMs = 1000 * kUs;

class Rng {
 public:
  // The seed is mixed first: consecutive seeds would otherwise be one stream shifted by a step.
  explicit Rng(uint64_t seed) : s_(mix(seed ^ 0x632BE59BD9B4E019ull)) {}
  uint64_t next() { return mix(s_ += 0x9E3779B97F4A7C15ull); }  // SplitMix64
  uint64_t in(uint64_t lo, uint64_t hi) { return lo + next() % (hi - lo + 1); }  // [lo, hi]
  int in(int lo, int hi) {
    return lo + static_cast<int>(next() % static_cast<uint64_t>(hi - lo + 1));
  }
  bool chance(int percent) { return next() % 100 < static_cast<uint64_t>(percent); }
  template <typename T>
  const T& pick(const std::vector<T>& v) {
    return v[next() % v.size()];
  }

 private:
  static uint64_t mix(uint64_t z) {
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }
  uint64_t s_;
};

const std::vector<std::string> kDims = {
    // on by default (tests/e2e/differential.py says which)
    "threads", "thread_churn", "driver_api", "nested", "nested_ids", "graphs", "copies",
    "memsets", "syncs", "collectives", "marks_capi", "marks_nvtx", "marks_none", "data_ranges",
    "user_ranges", "devices", "late_device", "empty_first_steps", "marks_capi_mark",
    "thresholds", "warmup", "no_gpu", "graph_lag",
    "delivery", "cupti_clock", "buffer_pressure", "record_loss", "live_ticks", "spill",
    "empty_steps", "threshold_edges", "measured_offset", "stacks_off",
    // the defects of issue 14 (items 1-4), each a switch
    "byte_names", "thread_id_refused", "early_marks", "long_lag",
    // what real CUPTI may do that the fake did not (docs/injection.md, "What CUPTI may do")
    "held_buffers",
    // graph launches node by node (GPUACCT_GRAPH_NODES=1) instead of one GRAPH_TRACE span: in
    // half the programs with graphs, or (off by default) in all of them
    "graph_nodes", "graph_nodes_all",
    // the traced calls timed by CUPTI's API records (GPUACCT_CUPTI_API=records, the design
    // before issue 28) instead of their callbacks, in half the programs
    "api_records", "api_records_all"};

struct Gen {
  Rng rng;
  const std::set<std::string>& dims;
  Program p;
  std::vector<bool> alive;  // workers that can act now (index 1..)

  bool on(const char* d) const { return dims.count(d) != 0; }

  std::string ascii_name() {
    static const char kAlpha[] =
        "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_";
    std::string s = rng.pick(std::vector<std::string>{"gemm_", "elementwise_", "reduce_", "k"});
    const int n = rng.in(1, 30);
    for (int i = 0; i < n; ++i) s += kAlpha[rng.next() % (sizeof(kAlpha) - 1)];
    return s;
  }
  // Arbitrary bytes (no NUL): Latin-1, broken and valid UTF-8, control characters, quotes.
  std::string byte_name() {
    std::string s;
    const int n = rng.in(1, 80);
    for (int i = 0; i < n; ++i) s += static_cast<char>(rng.in(1, 255));
    if (rng.chance(30)) s += "sc\xe9narios";
    return s;
  }
  std::string kernel_name() {
    return on("byte_names") && rng.chance(30) ? byte_name() : ascii_name();
  }

  // A GPU duration: mostly short kernels, some long ones.
  uint64_t gpu_ns() {
    if (on("long_lag") && rng.chance(3)) return rng.in(uint64_t{500} * kMs, uint64_t{1500} * kMs);
    return rng.chance(60) ? rng.in(uint64_t{1} * kUs, uint64_t{60} * kUs)
                          : rng.in(uint64_t{60} * kUs, uint64_t{2} * kMs);
  }
  // Host work: around the thresholds (launch latency, host pause) on purpose: +-1 ns, and
  // less a launch cost (a pause that ends with a call).
  uint64_t host_ns() {
    if (on("threshold_edges") && rng.chance(30)) {
      const uint64_t edge =
          rng.chance(50) ? p.thresholds.host_pause_ns : p.thresholds.launch_latency_ns;
      const uint64_t base = edge + rng.in(uint64_t{0}, uint64_t{2});
      const uint64_t less = 1 + (rng.chance(50) ? p.launch_cost : 0);
      return base > less ? base - less : base;
    }
    // long_lag: seconds of host work, so the host runs ahead of GPU records held back
    if (on("long_lag") && rng.chance(5)) return rng.in(uint64_t{500} * kMs, uint64_t{2500} * kMs);
    return rng.chance(50) ? rng.in(uint64_t{1} * kUs, uint64_t{90} * kUs)
                          : rng.in(uint64_t{110} * kUs, uint64_t{3} * kMs);
  }

  int actor() {
    std::vector<int> live{0};
    for (int w = 1; w <= p.workers; ++w)
      if (alive[static_cast<size_t>(w)]) live.push_back(w);
    return rng.pick(live);
  }

  Action body_action(int thread) {
    Action a;
    a.thread = thread;
    a.stream = rng.in(0, p.streams - 1);
    std::vector<ActKind> kinds{ActKind::kKernel, ActKind::kKernel, ActKind::kKernel,
                               ActKind::kHostWork};
    if (on("driver_api")) kinds.push_back(ActKind::kCuKernel);
    if (on("nested")) kinds.push_back(ActKind::kNested);
    if (on("graphs") && !p.graphs.empty()) kinds.push_back(ActKind::kGraph);
    if (on("collectives")) kinds.push_back(ActKind::kAllReduce);
    if (on("copies")) {
      kinds.push_back(ActKind::kCopyAsync);
      kinds.push_back(ActKind::kCopySync);
    }
    if (on("memsets")) kinds.push_back(ActKind::kMemset);
    if (on("data_ranges") && p.marks != Marks::kNone) kinds.push_back(ActKind::kData);
    if (on("user_ranges")) kinds.push_back(ActKind::kUserRange);
    if (on("syncs")) {
      kinds.push_back(ActKind::kSyncStream);
      kinds.push_back(ActKind::kSyncDevice);
    }
    a.kind = rng.pick(kinds);
    switch (a.kind) {
      case ActKind::kKernel:
      case ActKind::kCuKernel:
      case ActKind::kAllReduce:
      case ActKind::kMemset:
        a.ns = gpu_ns();
        a.name = kernel_name();
        break;
      case ActKind::kNested:
        a.ns = gpu_ns();
        a.name = kernel_name();
        a.pre = rng.in(uint64_t{0}, uint64_t{10} * kUs);
        a.tail = rng.chance(50) ? rng.in(uint64_t{0}, uint64_t{20} * kUs)
                                : rng.in(uint64_t{20} * kUs, uint64_t{400} * kUs);
        break;
      case ActKind::kGraph:
        a.arg = rng.in(0, static_cast<int>(p.graphs.size()) - 1);
        break;
      case ActKind::kCopyAsync:
      case ActKind::kCopySync:
        a.arg = rng.in(1, p.devices > 1 ? 4 : 3);
        a.pageable = rng.chance(50);
        a.ns = gpu_ns();
        break;
      case ActKind::kHostWork:
        a.ns = host_ns();
        break;
      case ActKind::kSyncDevice:
        a.arg = p.devices > 1 ? rng.in(-1, p.devices - 1) : 0;
        break;
      case ActKind::kUserRange:
        a.ns = host_ns();
        a.arg = rng.in(0, 1);  // 0: C API, 1: NVTX
        a.name = on("byte_names") && rng.chance(50) ? "user_" + byte_name() : "user_" + ascii_name();
        break;
      case ActKind::kData:
        a.ns = rng.chance(20) ? host_ns() : rng.in(uint64_t{50} * kUs, uint64_t{4} * kMs);
        a.name = p.data_marks == DataMarks::kNvtx ? "dataloader"
                 : on("byte_names") && rng.chance(50) ? byte_name()
                                                      : "dataloader";
        break;
      default:
        break;
    }
    return a;
  }

  Action main_action(ActKind k, int arg = 0, uint64_t ns = 0) {
    Action a;
    a.kind = k;
    a.arg = arg;
    a.ns = ns;
    return a;
  }

  void choose_settings() {
    std::vector<Marks> marks;
    if (on("marks_capi")) marks.push_back(Marks::kCapi);
    if (on("marks_nvtx")) marks.push_back(Marks::kNvtx);
    if (on("marks_capi_mark")) marks.push_back(Marks::kCapiMark);
    if (on("marks_none")) marks.push_back(Marks::kNone);
    if (marks.empty()) marks.push_back(Marks::kCapi);
    // Detected steps are not planted (their truth is not checked): fewer of them.
    p.marks = rng.pick(marks);
    if (p.marks == Marks::kNone && marks.size() > 1 && rng.chance(60)) p.marks = marks[0];
    p.data_marks = rng.chance(50) ? DataMarks::kCapi : DataMarks::kNvtx;
    if (p.marks == Marks::kNvtx && rng.chance(70)) p.data_marks = DataMarks::kNvtx;
    p.workers = on("threads") ? rng.in(0, 7) : 0;
    p.devices = on("devices") && rng.chance(40) ? 2 : 1;
    p.streams = rng.in(p.devices, 4);
    // (No draw with one device: a seed keeps its program when the dimension is off.)
    for (int s = 0; s < p.streams; ++s)
      p.stream_device.push_back(s < p.devices || p.devices == 1 ? s % p.devices
                                                                : rng.in(0, p.devices - 1));
    p.launch_cost = rng.in(uint64_t{1} * kUs, uint64_t{20} * kUs);
    p.latency = rng.in(uint64_t{1} * kUs, uint64_t{40} * kUs);
    if (on("nested_ids")) {
      p.nested_ids = rng.pick(
          std::vector<NestedIds>{NestedIds::kShared, NestedIds::kRuntime, NestedIds::kDriver});
    }
    if (on("graphs")) {
      const int n = rng.in(0, 2);
      for (int g = 0; g < n; ++g) {
        std::vector<std::pair<std::string, uint64_t>> nodes;
        const int k = rng.in(1, 5);
        for (int i = 0; i < k; ++i) nodes.emplace_back(kernel_name(), gpu_ns());
        p.graphs.push_back(nodes);
      }
    }
    p.preload = on("early_marks") && p.marks != Marks::kNone && rng.chance(30);
  }

  void choose_env() {
    auto env = [&](const char* k, std::string v) { p.env.emplace_back(k, std::move(v)); };
    std::string faults;
    auto fault = [&](const std::string& f) { faults += (faults.empty() ? "" : ",") + f; };
    env("GPUACCT_SIM_SEED", std::to_string(p.seed));
    if (on("delivery")) {
      env("GPUACCT_SIM_DELAY_PCT", std::to_string(rng.pick(std::vector<int>{0, 5, 20, 50})));
      env("GPUACCT_SIM_SHUFFLE", rng.chance(50) ? "1" : "0");
    }
    env("GPUACCT_SIM_NESTED_IDS", p.nested_ids == NestedIds::kShared    ? "shared"
                                  : p.nested_ids == NestedIds::kRuntime ? "runtime"
                                                                        : "driver");
    if (on("cupti_clock")) {
      env("GPUACCT_SIM_CUPTI_CLOCK",
          rng.pick(std::vector<std::string>{"host", "monotonic", "offset:5000000000000",
                                            "offset:-86400000000000"}));
      if (on("measured_offset") && rng.chance(25)) {
        fault("error:cuptiActivityRegisterTimestampCallback");
        p.exact = false;
      }
    }
    if (on("thread_id_refused") && rng.chance(50)) fault("error:cuptiSetThreadIdType");
    if (on("buffer_pressure") && rng.chance(30)) {
      p.loss_allowed = true;
      env("GPUACCT_BUFFER_MB", "1");
      env("GPUACCT_BUFFER_COUNT", std::to_string(rng.in(2, 3)));
      env("GPUACCT_RING_RECORDS", rng.chance(50) ? "256" : "8192");
    }
    if (on("record_loss") && rng.chance(10)) {
      p.loss_allowed = true;
      fault(rng.pick(std::vector<std::string>{"drop=3", "drop_every=7", "buffer_refused=1"}));
    }
    if (on("live_ticks")) env("GPUACCT_FLUSH_MS", std::to_string(rng.pick(std::vector<int>{1, 3, 10, 100})));
    if (on("stacks_off") && rng.chance(20)) env("GPUACCT_STACKS", "0");
    if (on("thresholds") && rng.chance(40)) {  // the oracle takes the same values
      const uint64_t lat_us = rng.pick(std::vector<uint64_t>{0, 5, 30, 100});
      const uint64_t pause_us = rng.pick(std::vector<uint64_t>{0, 20, 100, 500});
      p.thresholds.launch_latency_ns = lat_us * kUs;
      p.thresholds.host_pause_ns = pause_us * kUs;
      env("GPUACCT_LAUNCH_LATENCY_US", std::to_string(lat_us));
      env("GPUACCT_HOST_PAUSE_US", std::to_string(pause_us));
    }
    if (on("warmup") && rng.chance(40))
      env("GPUACCT_WARMUP_STEPS", std::to_string(rng.in(0, 3)));
    // GPU records held back until the clock is this far past their end (the fake CUPTI's
    // delivery lag, issue 14 item 4; a sim without the knob ignores it).
    // (Graphs and a lag only under graph_lag, which waited for a fix of late graph kernels;
    // the gate keeps older seeds' programs.  The draws are made either way.)
    if (on("long_lag") && rng.chance(50)) {
      const uint64_t lag = rng.in(uint64_t{1} * 1000 * kMs, uint64_t{3500} * kMs);
      if (p.graphs.empty() || on("graph_lag"))
        env("GPUACCT_SIM_GPU_DELIVERY_LAG_NS", std::to_string(lag));
    }
    p.argv_bytes = on("byte_names") && rng.chance(50);
    // No GPU collection: CUPTI missing, or GPUACCT_ENABLE=0 (which leaves NVTX alone: C API
    // marks only).  The library sees host ranges only.
    if (on("no_gpu") && rng.chance(10)) {
      p.no_gpu = true;
      const bool capi = p.marks == Marks::kCapi || p.marks == Marks::kCapiMark;
      if (capi && p.data_marks == DataMarks::kCapi && rng.chance(50)) {
        env("GPUACCT_ENABLE", "0");
      } else {
        env("GPUACCT_CUPTI_LIBRARY", "/nonexistent/libcupti.so");
      }
    }
    // Per-thread buffers handed back only once every record in them is complete (real CUPTI's
    // flush rule): a queued kernel holds back its thread's records, API records too.  The
    // records of a 4 MiB buffer (~16000), or fewer.
    if (on("held_buffers") && rng.chance(50))
      env("GPUACCT_SIM_HOLD_BUFFERS", rng.chance(50) ? "16000" : "1000");
    // Graph launches traced node by node, a kernel record each (before issue 28's default of
    // one GRAPH_TRACE span per launch); drawn only in programs with graphs.
    // graph_nodes_all draws nothing, so a seed keeps its program (the regression seeds of
    // late graph kernels replay node by node with it).
    if (!p.graphs.empty() && (on("graph_nodes_all") || (on("graph_nodes") && rng.chance(50))))
      env("GPUACCT_GRAPH_NODES", "1");
    // Drawn from its own stream of the seed, so a seed keeps the rest of its program.
    // api_records_all draws nothing: the regression seeds replay with records, as found.
    if (on("api_records_all") ||
        (on("api_records") && (Rng(p.seed ^ 0xA11CA11BACC5ull).next() & 1) != 0))
      env("GPUACCT_CUPTI_API", "records");
    if (!faults.empty()) env("GPUACCT_SIM_FAULTS", faults);
  }

  void steps() {
    const int n = p.marks == Marks::kNone ? rng.in(6, 10) : rng.in(2, 8);
    alive.assign(static_cast<size_t>(p.workers) + 1, false);
    // Workers that start at once; with churn some start later and some end early.
    std::vector<int> start_step(static_cast<size_t>(p.workers) + 1, 0);
    std::vector<int> exit_step(static_cast<size_t>(p.workers) + 1, n);
    for (int w = 1; w <= p.workers; ++w) {
      if (on("thread_churn") && rng.chance(40)) start_step[static_cast<size_t>(w)] = rng.in(1, n);
      if (on("thread_churn") && rng.chance(40)) exit_step[static_cast<size_t>(w)] = rng.in(0, n - 1);
      exit_step[static_cast<size_t>(w)] =
          std::max(exit_step[static_cast<size_t>(w)], start_step[static_cast<size_t>(w)]);
    }
    if (!p.preload) p.actions.push_back(main_action(ActKind::kInit));
    std::vector<Action> body;  // marks=none repeats one body, so detection has a loop to find
    for (int k = 0; k < n; ++k) {
      for (int w = 1; w <= p.workers; ++w) {
        if (start_step[static_cast<size_t>(w)] == k) {
          p.actions.push_back(main_action(ActKind::kSpawn, w));
          alive[static_cast<size_t>(w)] = true;
        }
      }
      if (on("live_ticks") && rng.chance(30))
        p.actions.push_back(main_action(ActKind::kRealSleep, 0, rng.in(uint64_t{100}, uint64_t{3000})));
      if (rng.chance(40)) p.actions.push_back(main_action(ActKind::kHostWork, 0, host_ns()));
      p.actions.push_back(main_action(ActKind::kStepBegin, k));
      if (p.preload && k == 0) {  // the first step opens before cuInit
        Action d = body_action(0);
        d.kind = ActKind::kData;
        d.ns = rng.in(uint64_t{10} * kUs, uint64_t{3} * kMs);
        d.name = "dataloader";
        if (on("data_ranges")) p.actions.push_back(d);
        p.actions.push_back(main_action(ActKind::kInit));
      }
      // A first step without GPU work only under empty_first_steps (an open defect: such steps
      // get host-only rows when finalised before the first op arrives).  The draw is made
      // either way, so a seed keeps the rest of its program.
      const bool empty = on("empty_steps") && rng.chance(10) && (k > 0 || on("empty_first_steps"));
      if (p.marks != Marks::kNone || k == 0) {
        body.clear();
        const int m = empty ? rng.in(0, 2) : rng.in(1, 12);
        for (int i = 0; i < m; ++i) {
          Action a = body_action(actor());
          if (empty && a.kind != ActKind::kData) a.kind = ActKind::kHostWork, a.ns = host_ns();
          body.push_back(a);
        }
        if (!empty) {  // at least one GPU op
          Action a = body_action(0);
          a.kind = ActKind::kKernel;
          a.ns = gpu_ns();
          a.name = kernel_name();
          body.push_back(a);
        }
        // Every device runs an op in the first step, unless late_device: a device whose first
        // op comes in a later step (rows that depend on delivery timing, docs/testing.md).
        if (k == 0 && p.devices > 1 && !on("late_device")) {
          for (int d = 0; d < p.devices; ++d) {
            Action a = body_action(0);
            a.kind = ActKind::kKernel;
            a.stream = d;  // the device's default stream
            a.ns = gpu_ns();
            a.name = kernel_name();
            body.push_back(a);
          }
        }
      }
      for (const Action& a : body) {
        if (a.thread == 0 || alive[static_cast<size_t>(a.thread)]) p.actions.push_back(a);
      }
      if (!(on("spill") && rng.chance(20)) || k == n - 1 || p.marks == Marks::kNone)
        p.actions.push_back(main_action(ActKind::kSyncDevice, -1));
      p.actions.push_back(main_action(ActKind::kStepEnd, k));
      for (int w = 1; w <= p.workers; ++w) {
        if (exit_step[static_cast<size_t>(w)] == k && alive[static_cast<size_t>(w)]) {
          Action a = main_action(ActKind::kExit);
          a.thread = w;
          p.actions.push_back(a);
          alive[static_cast<size_t>(w)] = false;
        }
      }
    }
    p.num_steps = n;
  }
};

}  // namespace

const std::vector<std::string>& known_dims() { return kDims; }

Program generate(uint64_t seed, const std::set<std::string>& dims) {
  for (const std::string& d : dims) {
    if (std::find(kDims.begin(), kDims.end(), d) == kDims.end())
      throw std::invalid_argument("unknown dimension '" + d + "'");
  }
  Gen g{Rng(seed), dims, Program{}, {}};
  g.p.seed = seed;
  g.p.dims = dims;
  g.choose_settings();
  g.choose_env();
  g.steps();
  return g.p;
}

}  // namespace sim_fuzz
