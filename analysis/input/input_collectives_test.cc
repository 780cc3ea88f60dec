// The collectives of an input through the front door (InputOptions / AccountingObservers
// on_collective): a real trace with collective args, real traces without (kernel order), a
// recording, and a crafted trace in the newer libkineto style (args on the kernels).
#include <algorithm>
#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

#include "analysis/import/kineto_collectives.h"
#include "analysis/input/input.h"
#include "analysis/model/stable_hash.h"

namespace gpuacct {
namespace {

// Counts the NCCL kernels the importer hands the accountant: what every record stands for.
class CountCollectiveOps final : public EventSink {
 public:
  void on_gpu_op(const GpuOp& op) override {
    if (op.is_communication()) ops.push_back(op);
  }
  void on_api_call(const HostApiCall&) override {}
  void on_range(const HostRange&) override {}
  void on_marker(const Marker&) override {}
  std::vector<GpuOp> ops;
};

struct Accounted {
  InputContents contents;
  std::vector<CollectiveRecord> records;
  std::vector<StepRow> rows;
  std::vector<GpuOp> nccl_ops;
};

Accounted account(const Input& input) {
  Accounted out;
  NameTable names;
  CountCollectiveOps count;
  AccountingObservers observers;
  observers.events = &count;
  observers.on_row = [&](const StepRow& r) { out.rows.push_back(r); };
  observers.on_collective = [&](const CollectiveRecord& r) { out.records.push_back(r); };
  auto accounted = account_input(input, AccountingConfig{}, names, {}, observers);
  EXPECT_TRUE(accounted.ok()) << accounted.status().message();
  if (accounted.ok()) out.contents = std::move(accounted->contents);
  out.nccl_ops = count.ops;
  return out;
}

Accounted account_file(const std::string& name) {
  auto input = Input::open(std::string(GPUACCT_TEST_DATA_DIR) + "/" + name);
  EXPECT_TRUE(input.ok()) << input.status().message();
  return input.ok() ? account(*input) : Accounted{};
}

// The step whose host range holds `t` (rule 1 of collective_steps.h), from the rows.
int64_t step_by_host(const std::vector<StepRow>& rows, TimeNs t) {
  for (const StepRow& r : rows)
    if (r.host_begin <= t && t < r.host_end) return r.step_index;
  return -1;
}

// HTA's nccl_data trace: every NCCL kernel's record_param_comms op (same External id) names
// the collective, its size and its process group "0" of ranks [0, 1].
TEST(InputCollectives, TraceArgsGiveOneRecordPerNcclKernel) {
  const Accounted a = account_file("kineto/nccl_data.json.gz");
  ASSERT_FALSE(a.nccl_ops.empty());
  EXPECT_EQ(a.contents.collective_identity, CollectiveSource::kKineto);
  EXPECT_EQ(a.contents.collective_identity_note, "");
  EXPECT_EQ(a.contents.collectives, static_cast<int64_t>(a.nccl_ops.size()));
  ASSERT_EQ(a.records.size(), a.nccl_ops.size());
  std::vector<CollectiveRecord> records = a.records;
  std::sort(records.begin(), records.end(),
            [](const auto& x, const auto& y) { return x.gpu_start < y.gpu_start; });
  std::set<TimeNs> kernel_starts;
  for (const GpuOp& op : a.nccl_ops) kernel_starts.insert(op.start);
  std::map<int64_t, int> per_step;
  for (size_t i = 0; i < records.size(); ++i) {
    const CollectiveRecord& r = records[i];
    SCOPED_TRACE("record " + std::to_string(i));
    EXPECT_EQ(r.source, CollectiveSource::kKineto);
    EXPECT_EQ(r.comm_hash, stable_hash64("kineto_pg:0|[0, 1]"));
    EXPECT_EQ(r.seq, i);  // no "Seq" in this trace: the group's enqueue order
    EXPECT_TRUE(r.type == CollectiveType::kAllReduce || r.type == CollectiveType::kBroadcast);
    EXPECT_EQ(r.rank, 0);  // rank 0's position in [0, 1]
    EXPECT_EQ(r.nranks, 2);
    EXPECT_TRUE(kernel_starts.count(r.gpu_start));
    EXPECT_GT(r.gpu_end, r.gpu_start);
    EXPECT_GT(r.host_enqueue, 0);
    EXPECT_LT(r.host_enqueue, r.gpu_start);  // the CPU op enqueued it before it ran
    EXPECT_GT(r.bytes, 0u);
    const std::string dtype(r.datatype.text);
    EXPECT_TRUE(dtype == "Float" || dtype == "Long") << dtype;
    EXPECT_EQ(r.bytes % (dtype == "Float" ? 4 : 8), 0u);
    EXPECT_EQ(r.step_index, step_by_host(a.rows, r.host_enqueue));
    ++per_step[r.step_index];
  }
  // Each of the three ProfilerSteps enqueues the same collectives.
  ASSERT_EQ(per_step.size(), 3u);
  EXPECT_FALSE(per_step.count(-1));
  for (const auto& [step, n] : per_step) EXPECT_EQ(n, per_step.begin()->second);
  EXPECT_EQ(a.contents.collective_steps.assigned, static_cast<int64_t>(records.size()));
  EXPECT_EQ(a.contents.collective_steps.over_limit, 0);
}

// Two ranks of one job, traces without collective args: kernel order names the same instances
// on both.
TEST(InputCollectives, SampledRanksAgreeByKernelOrder) {
  std::map<std::pair<uint64_t, uint64_t>, CollectiveType> seen[2];
  for (int rank = 0; rank < 2; ++rank) {
    const Accounted a = account_file("kineto/sampled_rank-" + std::to_string(rank) + ".json.gz");
    ASSERT_FALSE(a.nccl_ops.empty());
    EXPECT_EQ(a.contents.collective_identity, CollectiveSource::kKernelOrder);
    EXPECT_NE(a.contents.collective_identity_note.find("no collective args"), std::string::npos);
    ASSERT_EQ(a.records.size(), a.nccl_ops.size());
    for (const CollectiveRecord& r : a.records) {
      EXPECT_EQ(r.source, CollectiveSource::kKernelOrder);
      EXPECT_GT(r.host_enqueue, 0);  // its launch call is in the trace
      EXPECT_TRUE(seen[rank].emplace(std::make_pair(r.comm_hash, r.seq), r.type).second);
      const int64_t by_host = step_by_host(a.rows, r.host_enqueue);
      EXPECT_GE(by_host, 0);  // both ranks launched every NCCL kernel inside a ProfilerStep
      EXPECT_EQ(r.step_index, by_host);
    }
  }
  EXPECT_EQ(seen[0], seen[1]);
}

TEST(InputCollectives, RecordingNumbersItsNcclKernelsByKernelOrder) {
  const Accounted a = account_file("recordings/comm_bound4_v1.gpuacct");
  ASSERT_FALSE(a.nccl_ops.empty());
  EXPECT_EQ(a.contents.collective_identity, CollectiveSource::kKernelOrder);
  ASSERT_EQ(a.records.size(), a.nccl_ops.size());
  std::set<std::pair<uint64_t, uint64_t>> ids;
  for (const CollectiveRecord& r : a.records) {
    EXPECT_TRUE(ids.emplace(r.comm_hash, r.seq).second);
    EXPECT_EQ(r.source, CollectiveSource::kKernelOrder);
  }
  EXPECT_GT(a.contents.collective_steps.assigned, 0);
}

// Without on_collective nothing is identified and nothing changes.
TEST(InputCollectives, NotAskedNotIdentified) {
  NameTable names;
  auto input = Input::open(std::string(GPUACCT_TEST_DATA_DIR) + "/kineto/nccl_data.json.gz");
  ASSERT_TRUE(input.ok());
  auto accounted = account_input(*input, AccountingConfig{}, names);
  ASSERT_TRUE(accounted.ok());
  EXPECT_EQ(accounted->contents.collectives, 0);
  EXPECT_EQ(accounted->contents.collective_identity, CollectiveSource::kNone);
}

std::string event(const std::string& cat, const std::string& name, int tid, double ts, double dur,
                  const std::string& args) {
  return R"({"ph":"X","cat":")" + cat + R"(","name":")" + name + R"(","pid":1,"tid":)" +
         std::to_string(tid) + R"(,"ts":)" + std::to_string(ts) + R"(,"dur":)" +
         std::to_string(dur) + R"(,"args":{)" + args + "}}";
}

// Newer libkineto: the kernels carry the collective args themselves, "Seq" and "Rank"
// included, p2p ops their peer.
TEST(InputCollectives, KernelArgsWithSeqAndPeers) {
  std::vector<std::string> ev;
  ev.push_back(event("user_annotation", "ProfilerStep#1", 1, 0, 1000, ""));
  const std::string group = R"("Process Group Name":"3","Process Group Ranks":"[0, 2, 4, 6]",)"
                            R"("Group size":4,"Rank":1,)";
  const auto kernel = [&](double ts, int stream, int corr, const std::string& args) {
    ev.push_back(event("cuda_runtime", "cudaLaunchKernel", 1, ts - 50, 5,
                       R"("correlation":)" + std::to_string(corr)));
    ev.push_back(event("kernel", "ncclDevKernel_AllReduce_Sum_bf16_RING_LL", 100 + stream, ts, 20,
                       R"("device":0,"stream":)" + std::to_string(stream) +
                           R"(,"correlation":)" + std::to_string(corr) +
                           (args.empty() ? "" : "," + args)));
  };
  kernel(100, 7, 1,
         group + R"("Collective name":"allreduce","In msg nelems":1000,"Out msg nelems":1000,)"
                 R"("dtype":"BFloat16","Seq":41)");
  kernel(200, 7, 2,
         group + R"("Collective name":"allreduce","In msg nelems":10,"Out msg nelems":10,)"
                 R"("dtype":"BFloat16","Seq":42)");
  kernel(300, 9, 3,
         group + R"("Collective name":"send","In msg nelems":8,"Out msg nelems":8,)"
                 R"("dtype":"Float","Dst Rank":3,"Seq":5)");
  kernel(400, 11, 4, "");  // no args: kernel order
  ev.push_back(event("cpu_op", "record_param_comms", 1, 500, 5,
                     R"("External id":9,"Collective name":"wait","dtype":"Byte")"));
  std::string trace = "{\"traceEvents\":[\n";
  for (size_t i = 0; i < ev.size(); ++i) trace += (i ? ",\n" : "") + ev[i];
  trace += "\n]}";
  const Accounted a = account(Input::from_buffer(trace, "crafted.json"));
  ASSERT_EQ(a.records.size(), 4u);
  EXPECT_EQ(a.contents.collective_identity, CollectiveSource::kKineto);
  EXPECT_EQ(a.contents.collective_identity_note.rfind("1 collective kernels without", 0), 0u)
      << a.contents.collective_identity_note;
  std::map<TimeNs, CollectiveRecord> by_start;
  for (const auto& r : a.records) by_start[r.gpu_start] = r;
  const CollectiveRecord& first = by_start.at(100'000);
  const CollectiveRecord& second = by_start.at(200'000);
  const CollectiveRecord& send = by_start.at(300'000);
  const CollectiveRecord& plain = by_start.at(400'000);
  EXPECT_EQ(first.seq, 41u);
  EXPECT_EQ(second.seq, 42u);
  EXPECT_EQ(first.comm_hash, second.comm_hash);
  EXPECT_EQ(first.bytes, 2000u);  // 1000 × bf16
  EXPECT_EQ(first.rank, 1);
  EXPECT_EQ(first.nranks, 4);
  EXPECT_EQ(first.host_enqueue, 50'000);  // its launch call
  EXPECT_EQ(first.step_index, 0);
  EXPECT_EQ(send.type, CollectiveType::kSendRecv);
  EXPECT_EQ(send.seq, 5u);
  EXPECT_NE(send.comm_hash, first.comm_hash);  // p2p: a channel of the pair (1, 3)
  EXPECT_EQ(send.comm_hash, stable_hash64("kineto_pg:3|[0, 2, 4, 6]|p2p:1-3"));
  EXPECT_EQ(send.bytes, 32u);
  EXPECT_EQ(plain.source, CollectiveSource::kKernelOrder);
  EXPECT_EQ(plain.seq, 0u);
}

TEST(InputCollectives, DtypeSizesAsPyTorchNamesThem) {
  EXPECT_EQ(dtype_bytes("Float"), 4);
  EXPECT_EQ(dtype_bytes("BFloat16"), 2);
  EXPECT_EQ(dtype_bytes("c10::BFloat16"), 2);
  EXPECT_EQ(dtype_bytes("torch.float16"), 2);
  EXPECT_EQ(dtype_bytes("Long"), 8);
  EXPECT_EQ(dtype_bytes("Byte"), 1);
  EXPECT_EQ(dtype_bytes("Float8_e4m3fn"), 1);
  EXPECT_EQ(dtype_bytes("ComplexDouble"), 16);
  EXPECT_EQ(dtype_bytes("Quaternion"), 0);  // unknown: no byte count
  EXPECT_EQ(dtype_bytes(""), 0);
}

}  // namespace
}  // namespace gpuacct

namespace gpuacct {
namespace {

// A launch call with correlation id `id` at `start`, and an all-reduce kernel of id `id`
// without collective args (at 1000 ns x id), into `c`.
void launch(KinetoCollectives& c, uint64_t id, TimeNs start) {
  HostApiCall call;
  call.kind = HostApiKind::kLaunch;
  call.correlation_id = id;
  call.start = start;
  c.on_api_call(call);
}
void allreduce_kernel(KinetoCollectives& c, uint64_t id) {
  GpuOp op;
  op.collective = CollectiveType::kAllReduce;
  op.correlation_id = id;
  op.start = static_cast<TimeNs>(1000 * id);
  op.end = op.start + 10;
  c.on_collective_kernel(op, KinetoCommValues{});
}

// Past KinetoCollectives' limit, kernels and launch calls are counted, never dropped silently
// (Stat::trace_collectives_over_limit through InputCollectives::over_limit).
TEST(KinetoCollectivesLimit, KernelsAndLaunchesPastTheLimitAreCounted) {
  KinetoCollectives c([](const CollectiveRecord&) {}, [](const GpuOp&, TimeNs) {},
                      /*kernel_limit=*/2);
  for (uint64_t id = 1; id <= 3; ++id) launch(c, id, static_cast<TimeNs>(100 * id));
  launch(c, 2, 250);  // an id already held is updated, not counted
  EXPECT_EQ(c.launches_dropped(), 1);
  for (uint64_t id = 1; id <= 3; ++id) allreduce_kernel(c, id);
  EXPECT_EQ(c.dropped(), 1);
}

// A kernel without collective args gets the start of the last launch call with its id: from
// the list of calls below the limit, and from the table past it (ids held before the limit
// are updated; a new one past it has none).
TEST(KinetoCollectivesLimit, LaunchStartIsTheLastCallOfTheIdBelowAndPastTheLimit) {
  for (const size_t limit : {size_t{100}, size_t{3}}) {
    std::map<uint64_t, TimeNs> got;
    KinetoCollectives c([](const CollectiveRecord&) {},
                        [&](const GpuOp& op, TimeNs launch) { got[op.correlation_id] = launch; },
                        limit);
    const std::pair<uint64_t, TimeNs> calls[] = {{1, 100}, {2, 200}, {1, 150}, {4, 400}, {2, 250}};
    for (const auto& [id, start] : calls) launch(c, id, start);
    for (uint64_t id = 1; id <= 3; ++id) allreduce_kernel(c, id);  // id 3 was never launched
    c.finish(-1);
    EXPECT_EQ(got.at(1), 150) << limit;
    EXPECT_EQ(got.at(2), 250) << limit;
    EXPECT_EQ(got.at(3), 0) << limit;
    // Past a limit of 3: the list held 1, 2, 1; id 4 was a new id with 2 held (< 3): kept.
    EXPECT_EQ(c.launches_dropped(), 0) << limit;
  }
}

}  // namespace
}  // namespace gpuacct
