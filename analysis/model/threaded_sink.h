// An EventSink that hands events to another sink on its own thread, in order.
//
// Reading a trace is two jobs of about the same size: the importer's walk over the bytes and
// the accounting of the events it produces (the accountant, step detection, the timeline).  On
// one thread they add up; with this sink between them they overlap (docs/kineto_import.md,
// "Accounting on its own thread").  The caller's thread fills a batch of fixed-size records;
// full batches go through a short bounded queue (a mutex and a condition variable per batch,
// never per event) to the worker, which calls `target` in exactly the order the events came.
// The output cannot depend on the thread: `target` sees the same calls in the same order.
//
// Contract:
//   - Between construction and finish(), only the worker touches `target`, and the caller
//     must not touch it (nor anything `target` writes) itself.  What the two threads share
//     must be safe for that: NameTable::text() of names already interned is
//     (analysis/model/name_table.h); Stats are not, so the importer counts into its own.
//   - finish() delivers every event pushed so far, then stops the worker; after it returns the
//     caller may use `target` again.  The destructor calls it.
//   - An exception thrown by `target` (only std::bad_alloc in practice: analysis/ does not
//     throw) stops delivery; finish() rethrows it on the caller's thread, where it would have
//     surfaced without this sink.  Events pushed after it are dropped, as they would have been.
//   - No thread to be had (std::thread fails: a pids or thread limit, many inputs read at once)
//     is no error: the batches are then delivered on the caller's thread, with the same calls,
//     order and failure semantics (analysis/import/prefetch_source.cc does the same).
#pragma once

#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <deque>
#include <exception>
#include <mutex>
#include <thread>
#include <vector>

#include "analysis/model/event_sink.h"

namespace gpuacct {

class ThreadedSink final : public EventSink {
 public:
  // Events per batch and batches in flight: ~600 KB per batch, so the queue holds a few MB at
  // most whatever the trace's size, and the handoff costs are spread over thousands of events.
  static constexpr size_t kBatchEvents = 8192;
  static constexpr size_t kBatchesInFlight = 4;

  // kCallersThread: no worker; each full batch is delivered on the caller's thread (what a
  // failed thread start falls back to; tests use it to check that fallback).
  enum class Delivery : uint8_t { kOwnThread, kCallersThread };
  explicit ThreadedSink(EventSink& target, Delivery delivery = Delivery::kOwnThread);
  ~ThreadedSink() override;
  ThreadedSink(const ThreadedSink&) = delete;
  ThreadedSink& operator=(const ThreadedSink&) = delete;

  void on_gpu_op(const GpuOp& op) override { push(Kind::kGpuOp, &op, sizeof op); }
  void on_api_call(const HostApiCall& call) override { push(Kind::kApiCall, &call, sizeof call); }
  void on_range(const HostRange& range) override { push(Kind::kRange, &range, sizeof range); }
  void on_marker(const Marker& marker) override { push(Kind::kMarker, &marker, sizeof marker); }
  void on_watermark(TimeNs watermark) override {
    push(Kind::kWatermark, &watermark, sizeof watermark);
  }
  void on_counter_sample(const CounterSample& sample) override {
    push(Kind::kCounterSample, &sample, sizeof sample);
  }

  // See the contract above.  Idempotent.
  void finish();
  // False when the batches are delivered on the caller's thread (no thread could be started).
  bool on_own_thread() const { return !synchronous_; }

 private:
  enum class Kind : uint8_t { kGpuOp, kApiCall, kRange, kMarker, kWatermark, kCounterSample };
  // One event as the caller's thread wrote it.  Every event type is trivially copyable
  // (events.h asserts it) and at most 64 bytes: the record is a copy of its bytes.
  struct Record {
    alignas(8) unsigned char bytes[64];
    Kind kind;
  };
  static_assert(sizeof(Record) == 72, "one small fixed-size record per event");
  using Batch = std::vector<Record>;

  void push(Kind kind, const void* event, size_t size) {
    Record record;
    std::memcpy(record.bytes, event, size);
    record.kind = kind;
    filling_.push_back(record);  // reserved: never reallocates
    if (filling_.size() == kBatchEvents) hand_off();
  }
  void hand_off();
  void run();
  void deliver(const Batch& batch);
  // The caller's-thread delivery: a failure is kept for finish(), later events dropped.
  void deliver_here(const Batch& batch);

  EventSink& target_;
  Batch filling_;  // the caller's thread only

  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Batch> full_;   // guarded by mu_: waiting for the worker
  std::vector<Batch> free_;  // guarded by mu_: delivered, kept for reuse
  bool closing_ = false;     // guarded by mu_
  std::exception_ptr failure_;  // the worker's before it exits (read after join), or deliver_here's
  bool finished_ = false;
  bool synchronous_ = false;  // no worker: batches delivered by hand_off()/finish()
  std::thread worker_;
};

}  // namespace gpuacct
