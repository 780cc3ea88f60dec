// The profiler-plugin entry points driven as NCCL drives them (init with a mask, startEvent for
// collectives and p2p, stopEvent, finalize), with descriptors built here, linked in (the
// library's own tables; the dlopen and forwarding tests are nccl_plugin_dlopen_test.cc).
#include "inject/nccl/nccl_profiler.h"

#include <gtest/gtest.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cstring>
#include <vector>

#include "inject/clock.h"
#include "inject/nccl/nccl_profiler_abi.h"
#include "inject/recording/recorder.h"

extern "C" const gpuacct::nccl_abi::ProfilerV5 ncclProfiler_v5;
extern "C" const gpuacct::nccl_abi::ProfilerV4 ncclProfiler_v4;
extern "C" const gpuacct::nccl_abi::ProfilerV3 ncclProfiler_v3;
extern "C" const gpuacct::nccl_abi::ProfilerV1 ncclProfiler_v1;

namespace gpuacct::inject {
namespace {

namespace abi = gpuacct::nccl_abi;

// The plugin records only while the library records; these tests stand in for a started
// runtime without starting one (no worker thread drains the queues behind their back).
class NcclProfilerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    saved_mode_ = g_mode.load();
    g_mode.store(kModeRecording);
    std::vector<PluginRecord> stale;
    drain_nccl_records(stale);
  }
  void TearDown() override { g_mode.store(saved_mode_); }
  std::vector<PluginRecord> drain() {
    std::vector<PluginRecord> out;
    drain_nccl_records(out);
    return out;
  }
  int saved_mode_ = kModeIdle;
};

abi::DescrV5 coll_v5(uint64_t seq, const char* func, size_t count, const char* datatype) {
  abi::DescrV5 d;
  std::memset(&d, 0, sizeof d);
  d.type = abi::kColl;
  d.rank = 2;
  d.coll.v4.seq = seq;
  d.coll.v4.func = func;
  d.coll.v4.count = count;
  d.coll.v4.datatype = datatype;
  d.coll.v4.root = 0;
  d.coll.v4.algo = "RING";
  d.coll.v4.proto = "Simple";
  return d;
}

TEST_F(NcclProfilerTest, V5CollectiveBecomesOneRecordWithTheCommunicatorFromInit) {
  void* ctx = nullptr;
  int mask = -1;
  ASSERT_EQ(ncclProfiler_v5.init(&ctx, 0x1234abcdull, &mask, "dp", 2, 16, 5, nullptr),
            abi::kSuccess);
  ASSERT_NE(ctx, nullptr);
  // Operations and their plan's Group; no proxy, no kernel channels.
  EXPECT_EQ(mask, static_cast<int>(abi::kGroup | abi::kColl | abi::kP2p));

  const int64_t before = now_ns();
  abi::DescrV5 d = coll_v5(41, "AllReduce", 1 << 20, "ncclBfloat16");
  void* handle = reinterpret_cast<void*>(0x1);
  EXPECT_EQ(ncclProfiler_v5.start_event(ctx, &handle, &d), abi::kSuccess);
  EXPECT_EQ(ncclProfiler_v5.stop_event(handle), abi::kSuccess);  // the enqueue ended
  const int64_t after = now_ns();

  abi::DescrV5 p;
  std::memset(&p, 0, sizeof p);
  p.type = abi::kP2p;
  p.p2p.v4.func = "Send";
  p.p2p.v4.count = 100;
  p.p2p.v4.datatype = "ncclFloat32";
  p.p2p.v4.peer = 7;
  void* ph = nullptr;
  for (int i = 0; i < 2; ++i) ncclProfiler_v5.start_event(ctx, &ph, &p);
  p.p2p.v4.func = "Recv";
  ncclProfiler_v5.start_event(ctx, &ph, &p);

  const std::vector<PluginRecord> got = drain();
  ASSERT_EQ(got.size(), 4u);
  const CollectiveRecord& r = got[0].record;
  EXPECT_EQ(r.source, CollectiveSource::kNcclPlugin);
  EXPECT_EQ(r.comm_hash, 0x1234abcdull);
  EXPECT_EQ(r.seq, 41u);
  EXPECT_EQ(r.type, CollectiveType::kAllReduce);
  EXPECT_EQ(r.bytes, uint64_t{2} << 20);  // bf16
  EXPECT_EQ(r.rank, 5);                   // init's rank, not the descriptor's
  EXPECT_EQ(r.nranks, 16);
  EXPECT_STREQ(r.datatype.text, "Bfloat16");
  EXPECT_STREQ(r.algo.text, "RING");
  EXPECT_STREQ(r.proto.text, "Simple");
  EXPECT_GE(r.host_enqueue, before);
  EXPECT_LE(r.host_enqueue, after);
  EXPECT_EQ(r.gpu_start, 0);  // GPU times come from the matched kernel, later
  EXPECT_EQ(got[0].thread, static_cast<uint32_t>(syscall(SYS_gettid)));
  // p2p: per (peer, direction) sequence numbers, the peer kept beside the record.
  EXPECT_EQ(got[1].record.type, CollectiveType::kSendRecv);
  EXPECT_EQ(got[1].peer, 7);
  EXPECT_EQ(got[1].record.seq, 1u);
  EXPECT_EQ(got[2].record.seq, 2u);
  EXPECT_EQ(got[3].record.seq, 1u);  // the first receive from 7
  EXPECT_EQ(got[1].record.bytes, 400u);
  EXPECT_EQ(ncclProfiler_v5.finalize(ctx), abi::kSuccess);
}

// NCCL's hierarchy: each kernel plan's Group event gets a handle of ours, and its operations
// name it (v5: coll.parentGroup / p2p.parentGroup; v4 and older: their parent): their records
// carry the same group id, another plan's another one; an operation without a group has 0.
TEST_F(NcclProfilerTest, SharedKernel_OperationsCarryTheirPlansGroup) {
  void* ctx = nullptr;
  int mask = 0;
  ASSERT_EQ(ncclProfiler_v5.init(&ctx, 0x77ull, &mask, "dp", 1, 1, 0, nullptr), abi::kSuccess);
  abi::DescrV5 g;
  std::memset(&g, 0, sizeof g);
  g.type = abi::kGroup;
  void* plan1 = nullptr;
  void* plan2 = nullptr;
  ncclProfiler_v5.start_event(ctx, &plan1, &g);
  ASSERT_NE(plan1, nullptr);
  abi::DescrV5 p;
  std::memset(&p, 0, sizeof p);
  p.type = abi::kP2p;
  p.p2p.v4.func = "Send";
  p.p2p.v4.count = 4;
  p.p2p.v4.datatype = "ncclFloat32";
  p.p2p.v4.peer = 0;
  p.p2p.parent_group = plan1;
  void* h = nullptr;
  ncclProfiler_v5.start_event(ctx, &h, &p);
  p.p2p.v4.func = "Recv";
  ncclProfiler_v5.start_event(ctx, &h, &p);
  ncclProfiler_v5.stop_event(plan1);
  ncclProfiler_v5.start_event(ctx, &plan2, &g);
  abi::DescrV5 c = coll_v5(1, "AllGather", 8, "ncclFloat32");
  c.coll.parent_group = plan2;
  ncclProfiler_v5.start_event(ctx, &h, &c);
  ncclProfiler_v5.stop_event(plan2);
  c.coll.parent_group = nullptr;
  ncclProfiler_v5.start_event(ctx, &h, &c);
  const std::vector<PluginRecord> got = drain();
  ASSERT_EQ(got.size(), 4u);
  EXPECT_NE(got[0].group, 0u);
  EXPECT_EQ(got[1].group, got[0].group);
  EXPECT_NE(got[2].group, 0u);
  EXPECT_NE(got[2].group, got[0].group);
  EXPECT_EQ(got[3].group, 0u);
  EXPECT_EQ(ncclProfiler_v5.finalize(ctx), abi::kSuccess);

  // v4: the group is the descriptor's parent.
  ASSERT_EQ(ncclProfiler_v4.init(&ctx, &mask, "dp", 0x78ull, 1, 1, 0, nullptr), abi::kSuccess);
  abi::DescrV4 g4;
  std::memset(&g4, 0, sizeof g4);
  g4.type = abi::kGroup;
  void* plan4 = nullptr;
  ncclProfiler_v4.start_event(ctx, &plan4, &g4);
  abi::DescrV4 c4;
  std::memset(&c4, 0, sizeof c4);
  c4.type = abi::kColl;
  c4.parent = plan4;
  c4.coll.func = "AllReduce";
  c4.coll.datatype = "ncclFloat32";
  c4.coll.count = 1;
  ncclProfiler_v4.start_event(ctx, &h, &c4);
  ncclProfiler_v4.start_event(ctx, &h, &c4);
  ncclProfiler_v4.stop_event(plan4);
  const std::vector<PluginRecord> got4 = drain();
  ASSERT_EQ(got4.size(), 2u);
  EXPECT_NE(got4[0].group, 0u);
  EXPECT_EQ(got4[1].group, got4[0].group);
  EXPECT_EQ(ncclProfiler_v4.finalize(ctx), abi::kSuccess);
}

TEST_F(NcclProfilerTest, V3TakesTheCommunicatorFromEachDescriptor) {
  void* ctx = nullptr;
  int mask = 0;
  ASSERT_EQ(ncclProfiler_v3.init(&ctx, &mask), abi::kSuccess);
  EXPECT_EQ(mask, static_cast<int>(abi::kGroup | abi::kColl | abi::kP2p));
  abi::DescrV3 d;
  std::memset(&d, 0, sizeof d);
  d.type = static_cast<uint8_t>(abi::kColl);
  d.rank = 3;
  d.coll.comm_name = "tp";
  d.coll.comm_hash = 0xfeedull;
  d.coll.seq = 9;
  d.coll.func = "ReduceScatter";
  d.coll.count = 10;
  d.coll.datatype = "ncclFloat16";
  d.coll.algo = "RING";
  d.coll.proto = "LL128";
  void* h = nullptr;
  ncclProfiler_v3.start_event(ctx, &h, &d);
  ncclProfiler_v3.stop_event(h);
  ncclProfiler_v3.finalize(ctx);
  const std::vector<PluginRecord> got = drain();
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0].record.comm_hash, 0xfeedull);
  EXPECT_EQ(got[0].record.rank, 3);
  EXPECT_EQ(got[0].record.nranks, 0);  // v3 does not say
  EXPECT_EQ(got[0].record.type, CollectiveType::kReduceScatter);
  EXPECT_EQ(got[0].record.bytes, 20u);
  EXPECT_STREQ(got[0].record.proto.text, "LL128");
}

TEST_F(NcclProfilerTest, V1EnumCodesAreNamed) {
  void* ctx = nullptr;
  int mask = 0;
  ncclProfiler_v1.init(&ctx, &mask);
  abi::DescrV1 d;
  std::memset(&d, 0, sizeof d);
  d.type = static_cast<uint8_t>(abi::kColl);
  d.coll.comm_hash = 5;
  d.coll.seq = 1;
  d.coll.func = 4;       // AllReduce
  d.coll.datatype = 7;   // float32
  d.coll.algo = 1;       // RING
  d.coll.proto = 2;      // SIMPLE
  d.coll.count = 3;
  void* h = nullptr;
  ncclProfiler_v1.start_event(ctx, &h, &d);
  d.coll.func = 200;  // unknown code: still a record, of unknown type
  d.coll.datatype = 99;
  ncclProfiler_v1.start_event(ctx, &h, &d);
  ncclProfiler_v1.finalize(ctx);
  const std::vector<PluginRecord> got = drain();
  ASSERT_EQ(got.size(), 2u);
  EXPECT_EQ(got[0].record.type, CollectiveType::kAllReduce);
  EXPECT_EQ(got[0].record.bytes, 12u);
  EXPECT_STREQ(got[0].record.algo.text, "RING");
  EXPECT_STREQ(got[0].record.datatype.text, "Float32");
  EXPECT_EQ(got[1].record.type, CollectiveType::kOther);
  EXPECT_EQ(got[1].record.bytes, 0u);  // unknown size
}

TEST_F(NcclProfilerTest, NullsUnknownTypesAndForeignHandlesAreIgnored) {
  int mask = 0;
  EXPECT_EQ(ncclProfiler_v5.init(nullptr, 1, &mask, nullptr, 0, 0, 0, nullptr), abi::kSuccess);
  void* ctx = nullptr;
  EXPECT_EQ(ncclProfiler_v5.init(&ctx, 1, nullptr, nullptr, 0, 0, 0, nullptr), abi::kSuccess);
  ASSERT_EQ(ncclProfiler_v5.init(&ctx, 1, &mask, nullptr, 1, 2, 0, nullptr), abi::kSuccess);
  void* h = reinterpret_cast<void*>(0x5);
  EXPECT_EQ(ncclProfiler_v5.start_event(ctx, &h, nullptr), abi::kSuccess);
  EXPECT_EQ(h, nullptr);
  EXPECT_EQ(ncclProfiler_v5.start_event(nullptr, &h, nullptr), abi::kSuccess);
  abi::DescrV5 d = coll_v5(1, nullptr, 1, nullptr);  // no names at all
  EXPECT_EQ(ncclProfiler_v5.start_event(ctx, nullptr, &d), abi::kSuccess);
  d.type = uint64_t{1} << 40;  // a type from a future version
  EXPECT_EQ(ncclProfiler_v5.start_event(ctx, &h, &d), abi::kSuccess);
  d.type = abi::kProxyStep;  // not asked for
  EXPECT_EQ(ncclProfiler_v5.start_event(ctx, &h, &d), abi::kSuccess);
  // A foreign object, zeroed and as large as our handles: the plugin reads its magic word to
  // tell it is not ours (an int here was read past its end: AddressSanitizer).
  alignas(16) unsigned char local[256] = {};
  EXPECT_EQ(ncclProfiler_v5.stop_event(&local), abi::kSuccess);
  EXPECT_EQ(ncclProfiler_v5.stop_event(nullptr), abi::kSuccess);
  abi::StateArgsV5 args{};
  EXPECT_EQ(ncclProfiler_v5.record_event_state(&local, abi::kKernelChStopState, &args),
            abi::kSuccess);
  EXPECT_EQ(ncclProfiler_v5.record_event_state(nullptr, 0, nullptr), abi::kSuccess);
  EXPECT_EQ(ncclProfiler_v5.finalize(&local), abi::kSuccess);  // not a context of ours
  EXPECT_EQ(ncclProfiler_v5.finalize(nullptr), abi::kSuccess);
  EXPECT_EQ(ncclProfiler_v5.finalize(ctx), abi::kSuccess);
  EXPECT_TRUE(drain().empty());  // the nameless collective had no handle pointer: not recorded
}

TEST_F(NcclProfilerTest, AFullQueueDropsAndCounts) {
  void* ctx = nullptr;
  int mask = 0;
  ncclProfiler_v4.init(&ctx, &mask, "x", 77, 1, 2, 0, nullptr);
  abi::DescrV4 d;
  std::memset(&d, 0, sizeof d);
  d.type = static_cast<uint8_t>(abi::kColl);
  d.coll.func = "AllGather";
  d.coll.datatype = "ncclInt8";
  d.coll.count = 1;
  const uint64_t dropped_before = nccl_plugin_counters().events_dropped;
  constexpr int kEvents = 5000;  // more than one thread's queue holds (4096)
  void* h = nullptr;
  for (int i = 0; i < kEvents; ++i) {
    d.coll.seq = static_cast<uint64_t>(i);
    ncclProfiler_v4.start_event(ctx, &h, &d);
  }
  const std::vector<PluginRecord> got = drain();
  const uint64_t dropped = nccl_plugin_counters().events_dropped - dropped_before;
  EXPECT_EQ(got.size() + dropped, static_cast<size_t>(kEvents));
  EXPECT_GT(dropped, 0u);
  EXPECT_EQ(got.front().record.seq, 0u);  // the oldest are kept, the newest dropped
  EXPECT_EQ(got.back().record.seq, got.size() - 1);
  EXPECT_EQ(nccl_plugin_counters().version, 4);
  ncclProfiler_v4.finalize(ctx);
}

TEST_F(NcclProfilerTest, NothingIsRecordedOnceTheLibraryStopped) {
  void* ctx = nullptr;
  int mask = 0;
  ncclProfiler_v5.init(&ctx, 1, &mask, nullptr, 1, 1, 0, nullptr);
  g_mode.store(kModeStopped);
  abi::DescrV5 d = coll_v5(1, "AllReduce", 1, "ncclFloat32");
  void* h = nullptr;
  ncclProfiler_v5.start_event(ctx, &h, &d);
  ncclProfiler_v5.finalize(ctx);
  EXPECT_TRUE(drain().empty());
}

TEST(NcclProfilerEnv, PointsNcclAtUsAndKeepsAnotherPluginForForwarding) {
  unsetenv(kNcclNextPluginEnv);
  unsetenv("NCCL_PROFILER_PLUGIN");
  prepare_nccl_profiler_env("/opt/gpuacct/libgpuacct.so");
  EXPECT_STREQ(getenv("NCCL_PROFILER_PLUGIN"), "/opt/gpuacct/libgpuacct.so");
  EXPECT_EQ(getenv(kNcclNextPluginEnv), nullptr);
  // Already us: unchanged.
  prepare_nccl_profiler_env("/opt/gpuacct/libgpuacct.so");
  EXPECT_EQ(getenv(kNcclNextPluginEnv), nullptr);
  // Another plugin: we take its place and keep it.
  setenv("NCCL_PROFILER_PLUGIN", "inspector", 1);
  prepare_nccl_profiler_env("/opt/gpuacct/libgpuacct.so");
  EXPECT_STREQ(getenv("NCCL_PROFILER_PLUGIN"), "/opt/gpuacct/libgpuacct.so");
  EXPECT_STREQ(getenv(kNcclNextPluginEnv), "inspector");
  // "none": the user switched NCCL's profiler off; left alone.
  setenv("NCCL_PROFILER_PLUGIN", "none", 1);
  prepare_nccl_profiler_env("/opt/gpuacct/libgpuacct.so");
  EXPECT_STREQ(getenv("NCCL_PROFILER_PLUGIN"), "none");
  // A relative path for ourselves (never from dladdr of a loaded file): nothing done.
  unsetenv("NCCL_PROFILER_PLUGIN");
  prepare_nccl_profiler_env("libgpuacct.so");
  EXPECT_EQ(getenv("NCCL_PROFILER_PLUGIN"), nullptr);
  unsetenv(kNcclNextPluginEnv);
}

}  // namespace
}  // namespace gpuacct::inject
