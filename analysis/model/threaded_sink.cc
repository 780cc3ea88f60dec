#include "analysis/model/threaded_sink.h"

#include <utility>

namespace gpuacct {

ThreadedSink::ThreadedSink(EventSink& target) : target_(target) {
  filling_.reserve(kBatchEvents);
  worker_ = std::thread([this] { run(); });
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

void ThreadedSink::deliver(const Batch& batch) {
  for (const Record& r : batch) {
    switch (r.kind) {
      case Kind::kGpuOp: {
        GpuOp op;
        std::memcpy(&op, r.bytes, sizeof op);
        target_.on_gpu_op(op);
        break;
      }
      case Kind::kApiCall: {
        HostApiCall call;
        std::memcpy(&call, r.bytes, sizeof call);
        target_.on_api_call(call);
        break;
      }
      case Kind::kRange: {
        HostRange range;
        std::memcpy(&range, r.bytes, sizeof range);
        target_.on_range(range);
        break;
      }
      case Kind::kMarker: {
        Marker marker;
        std::memcpy(&marker, r.bytes, sizeof marker);
        target_.on_marker(marker);
        break;
      }
      case Kind::kWatermark: {
        TimeNs watermark;
        std::memcpy(&watermark, r.bytes, sizeof watermark);
        target_.on_watermark(watermark);
        break;
      }
      case Kind::kCounterSample: {
        CounterSample sample;
        std::memcpy(&sample, r.bytes, sizeof sample);
        target_.on_counter_sample(sample);
        break;
      }
    }
  }
}

}  // namespace gpuacct
