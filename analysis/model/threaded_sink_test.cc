// ThreadedSink: the target sees every event, in order, on another thread; a failure in the
// target comes back at finish(); names interned while the worker reads them are safe.
#include "analysis/model/threaded_sink.h"

#include <cstring>
#include <new>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "analysis/model/name_table.h"

namespace gpuacct {
namespace {

// Logs each call as its kind and bytes, so two logs are equal only if every call was.
class CallLog final : public EventSink {
 public:
  void on_gpu_op(const GpuOp& e) override { add('g', &e, sizeof e); }
  void on_api_call(const HostApiCall& e) override { add('a', &e, sizeof e); }
  void on_range(const HostRange& e) override { add('r', &e, sizeof e); }
  void on_marker(const Marker& e) override { add('m', &e, sizeof e); }
  void on_watermark(TimeNs w) override { add('w', &w, sizeof w); }
  void on_counter_sample(const CounterSample& e) override { add('c', &e, sizeof e); }
  std::vector<std::string> calls;
  std::thread::id thread;

 private:
  void add(char kind, const void* bytes, size_t size) {
    thread = std::this_thread::get_id();
    calls.emplace_back(1, kind);
    calls.back().append(static_cast<const char*>(bytes), size);
  }
};

// Random events of every kind, each field drawn, so a swapped or truncated record shows.
void feed(EventSink& sink, size_t count, uint64_t seed) {
  std::mt19937_64 rng(seed);
  for (size_t i = 0; i < count; ++i) {
    const auto t = static_cast<TimeNs>(rng() >> 2);
    switch (rng() % 6) {
      case 0: {
        GpuOp op;
        op.start = t;
        op.end = t + 5;
        op.correlation_id = rng();
        op.bytes = rng();
        op.stream = static_cast<uint32_t>(rng());
        op.name = static_cast<NameId>(rng());
        op.device = static_cast<uint16_t>(rng());
        sink.on_gpu_op(op);
        break;
      }
      case 1: {
        HostApiCall call;
        call.start = t;
        call.correlation_id = rng();
        call.thread = static_cast<uint32_t>(rng());
        sink.on_api_call(call);
        break;
      }
      case 2: {
        HostRange range;
        range.start = t;
        range.number = static_cast<int64_t>(rng() >> 1);
        sink.on_range(range);
        break;
      }
      case 3: {
        Marker marker;
        marker.ts = t;
        marker.value = static_cast<double>(rng() % 1000) / 7;
        sink.on_marker(marker);
        break;
      }
      case 4:
        sink.on_watermark(t);
        break;
      default: {
        CounterSample sample;
        sample.start = t;
        for (double& p : sample.pct) p = static_cast<double>(rng() % 10000) / 100;
        sample.device = static_cast<uint16_t>(rng());
        sink.on_counter_sample(sample);
        break;
      }
    }
  }
}

TEST(ThreadedSink, DeliversEveryEventInOrderOnAnotherThread) {
  // Sizes around the batch size and several batches past the queue's bound (the reader
  // waits for the worker there).
  const size_t b = ThreadedSink::kBatchEvents;
  for (size_t count : {size_t{0}, size_t{1}, b - 1, b, b + 1,
                       b * (ThreadedSink::kBatchesInFlight + 3) + 17}) {
    CallLog direct;
    feed(direct, count, count + 1);
    CallLog through;
    {
      ThreadedSink sink(through);
      feed(sink, count, count + 1);
      sink.finish();
      sink.finish();  // idempotent
    }
    ASSERT_EQ(through.calls.size(), count);
    EXPECT_TRUE(through.calls == direct.calls) << count << " events";
    if (count > 0) {
      EXPECT_NE(through.thread, std::this_thread::get_id());
    }
  }
}

TEST(ThreadedSink, DestructorDeliversWhatFinishWouldHave) {
  CallLog through;
  {
    ThreadedSink sink(through);
    feed(sink, 1000, 7);
  }
  EXPECT_EQ(through.calls.size(), 1000u);
}

// Throws at its n-th event, as an allocation failing in the accountant would.
class FailsAt final : public EventSink {
 public:
  explicit FailsAt(size_t n) : n_(n) {}
  void on_gpu_op(const GpuOp&) override { count(); }
  void on_api_call(const HostApiCall&) override { count(); }
  void on_range(const HostRange&) override { count(); }
  void on_marker(const Marker&) override { count(); }
  size_t seen = 0;

 private:
  void count() {
    if (++seen == n_) throw std::bad_alloc();
  }
  size_t n_;
};

TEST(ThreadedSink, TargetFailureComesBackAtFinishWithoutAHang) {
  FailsAt target(100);
  ThreadedSink sink(target);
  // Far more batches than the queue holds: the reader must not wait forever on a worker that
  // stopped delivering.
  for (size_t i = 0; i < ThreadedSink::kBatchEvents * (ThreadedSink::kBatchesInFlight + 4); ++i) {
    HostApiCall call;
    call.start = static_cast<TimeNs>(i);
    sink.on_api_call(call);
  }
  EXPECT_THROW(sink.finish(), std::bad_alloc);
  EXPECT_EQ(target.seen, 100u);  // nothing after the failure
  EXPECT_NO_THROW(sink.finish());
}

// No thread to be had (std::thread fails: a pids limit, many inputs at once): the caller's
// thread delivers, with the same calls in the same order and the failure still at finish().
TEST(ThreadedSink, WithoutAThreadTheCallersThreadDeliversTheSame) {
  const size_t count = ThreadedSink::kBatchEvents * 3 + 5;
  CallLog direct;
  feed(direct, count, 11);
  CallLog through;
  {
    ThreadedSink sink(through, ThreadedSink::Delivery::kCallersThread);
    EXPECT_FALSE(sink.on_own_thread());
    feed(sink, count, 11);
    sink.finish();
  }
  EXPECT_TRUE(through.calls == direct.calls);
  EXPECT_EQ(through.thread, std::this_thread::get_id());

  FailsAt target(100);
  ThreadedSink failing(target, ThreadedSink::Delivery::kCallersThread);
  for (size_t i = 0; i < ThreadedSink::kBatchEvents * 3; ++i) {
    HostApiCall call;
    call.start = static_cast<TimeNs>(i);
    EXPECT_NO_THROW(failing.on_api_call(call));  // the failure waits for finish()
  }
  EXPECT_THROW(failing.finish(), std::bad_alloc);
  EXPECT_EQ(target.seen, 100u);  // nothing after the failure
  EXPECT_NO_THROW(failing.finish());
}

// The reader's contract with NameTable: the worker reads the text of ids interned on the
// reader's thread while the reader goes on interning (segments of the table are allocated
// meanwhile: 200 k names cross 12 segment boundaries).
class ChecksNames final : public EventSink {
 public:
  explicit ChecksNames(const NameTable& names) : names_(names) {}
  void on_gpu_op(const GpuOp& op) override {
    if (names_.text(op.name) != "kernel_" + std::to_string(op.correlation_id)) ++wrong;
    ++seen;
  }
  void on_api_call(const HostApiCall&) override {}
  void on_range(const HostRange&) override {}
  void on_marker(const Marker&) override {}
  size_t seen = 0;
  size_t wrong = 0;

 private:
  const NameTable& names_;
};

TEST(ThreadedSink, WorkerReadsNamesTheReaderInternsMeanwhile) {
  NameTable names;
  ChecksNames target(names);
  ThreadedSink sink(target);
  const uint64_t count = 200'000;
  for (uint64_t i = 0; i < count; ++i) {
    GpuOp op;
    op.correlation_id = i;
    op.name = names.intern("kernel_" + std::to_string(i));
    sink.on_gpu_op(op);
  }
  sink.finish();
  EXPECT_EQ(target.seen, count);
  EXPECT_EQ(target.wrong, 0u);
  EXPECT_EQ(names.size(), count + 1);  // and ""
  EXPECT_EQ(names.text(static_cast<NameId>(count + 1)), "<unknown>");
}

TEST(NameTable, IdsAreDenseAndTextsStableAcrossSegments) {
  NameTable names;
  std::vector<std::string_view> views;
  for (int i = 0; i < 5000; ++i) {
    const NameId id = names.intern("n" + std::to_string(i));
    ASSERT_EQ(id, static_cast<NameId>(i + 1));
    views.push_back(names.text(id));
  }
  for (int i = 0; i < 5000; ++i) {
    // A text never moves: views taken early still read right after the table grew.
    EXPECT_EQ(views[static_cast<size_t>(i)], "n" + std::to_string(i));
    EXPECT_EQ(names.intern("n" + std::to_string(i)), static_cast<NameId>(i + 1));
  }
  EXPECT_EQ(names.text(0), "");
}

}  // namespace
}  // namespace gpuacct
