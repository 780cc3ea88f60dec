#include "analysis/model/threaded_sink.h"

#include <system_error>
#include <type_traits>
#include <utility>

namespace gpuacct {

ThreadedSink::ThreadedSink(EventSink& target, Delivery delivery) : target_(target) {
  filling_.reserve(kBatchEvents);
  synchronous_ = delivery == Delivery::kCallersThread;
  if (synchronous_) return;
  try {
    worker_ = std::thread([this] { run(); });
  } catch (const std::system_error&) {
    synchronous_ = true;  // no thread: the caller's thread delivers (contract in the header)
  }
}

ThreadedSink::~ThreadedSink() {
  // A destructor must not throw: a failure not collected by finish() is dropped here (the
  // caller that wants it calls finish(); analysis/input/input.cc does).
  try {
    finish();
  } catch (...) {
  }
}

void ThreadedSink::hand_off() {
  if (synchronous_) {
    deliver_here(filling_);
    filling_.clear();  // keeps its capacity
    return;
  }
  Batch next;
  {
    std::unique_lock<std::mutex> lock(mu_);
    // Bounded: the reader waits while the worker is kBatchesInFlight batches behind, so memory
    // stays a few batches whatever the input's size.
    cv_.wait(lock, [this] { return full_.size() < kBatchesInFlight || closing_; });
    full_.push_back(std::move(filling_));
    if (!free_.empty()) {
      next = std::move(free_.back());
      free_.pop_back();
    }
  }
  cv_.notify_all();
  next.clear();
  next.reserve(kBatchEvents);
  filling_ = std::move(next);
}

void ThreadedSink::finish() {
  if (finished_) return;
  finished_ = true;
  if (synchronous_) {
    deliver_here(filling_);
    filling_.clear();
    if (failure_) std::rethrow_exception(std::exchange(failure_, nullptr));
    return;
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!filling_.empty()) full_.push_back(std::move(filling_));
    closing_ = true;
  }
  cv_.notify_all();
  worker_.join();
  filling_.clear();
  if (failure_) std::rethrow_exception(std::exchange(failure_, nullptr));
}

void ThreadedSink::run() {
  bool failed = false;
  for (;;) {
    Batch batch;
    {
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait(lock, [this] { return !full_.empty() || closing_; });
      if (full_.empty()) return;  // closing, and everything is delivered
      batch = std::move(full_.front());
      full_.pop_front();
    }
    cv_.notify_all();  // the reader may be waiting for room
    if (!failed) {
      try {
        deliver(batch);
      } catch (...) {
        failure_ = std::current_exception();
        failed = true;  // keep draining, so the reader never waits on a full queue forever
      }
    }
    std::lock_guard<std::mutex> lock(mu_);
    if (free_.size() < kBatchesInFlight) free_.push_back(std::move(batch));
  }
}

void ThreadedSink::deliver_here(const Batch& batch) {
  if (failure_) return;  // set only here in this mode, cleared only by finish()
  try {
    deliver(batch);
  } catch (...) {
    failure_ = std::current_exception();
  }
}

namespace {

// The event a record holds, copied out (the record's bytes need not be aligned for it).
template <typename Event>
Event event_of(const unsigned char* bytes) {
  static_assert(std::is_trivially_copyable_v<Event> && sizeof(Event) <= 64);
  Event event;
  std::memcpy(&event, bytes, sizeof event);
  return event;
}

}  // namespace

void ThreadedSink::deliver(const Batch& batch) {
  for (const Record& r : batch) {
    switch (r.kind) {
      case Kind::kGpuOp: target_.on_gpu_op(event_of<GpuOp>(r.bytes)); break;
      case Kind::kApiCall: target_.on_api_call(event_of<HostApiCall>(r.bytes)); break;
      case Kind::kRange: target_.on_range(event_of<HostRange>(r.bytes)); break;
      case Kind::kMarker: target_.on_marker(event_of<Marker>(r.bytes)); break;
      case Kind::kWatermark: target_.on_watermark(event_of<TimeNs>(r.bytes)); break;
      case Kind::kCounterSample:
        target_.on_counter_sample(event_of<CounterSample>(r.bytes));
        break;
    }
  }
}

}  // namespace gpuacct
