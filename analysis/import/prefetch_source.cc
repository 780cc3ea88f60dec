#include "analysis/import/prefetch_source.h"

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstring>
#include <mutex>
#include <system_error>
#include <thread>
#include <vector>

namespace gpuacct {
namespace {

// 4 x 1 MiB in flight: enough to ride out scheduling jitter between the two threads, small
// next to the importer's own buffer.
constexpr size_t kBlockBytes = size_t{1} << 20;
constexpr size_t kBlocks = 4;

struct Block {
  std::vector<char> bytes;
  size_t len = 0;
  bool last = false;  // the inner source ended (or failed) with this block
  Status status;      // its error, returned after the block's bytes
};

class PrefetchSource final : public ByteSource {
 public:
  explicit PrefetchSource(std::unique_ptr<ByteSource> inner) : inner_(std::move(inner)) {
    blocks_.resize(kBlocks);
    for (Block& b : blocks_) b.bytes.resize(kBlockBytes);
    try {
      worker_ = std::thread([this] { produce(); });
    } catch (const std::system_error&) {
      synchronous_ = true;  // no thread: read on the caller's thread (contract above)
    }
  }
  ~PrefetchSource() override {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stop_ = true;
    }
    cv_.notify_all();
    if (worker_.joinable()) worker_.join();
  }

  Status read(char* dst, size_t n, size_t* got) override {
    if (synchronous_) return inner_->read(dst, n, got);
    *got = 0;
    if (finished_) return final_status_;  // the end, or the inner source's error, again
    if (n == 0) return Status::Ok();
    for (;;) {
      Block& b = blocks_[head_ % kBlocks];
      if (!have_head_) {
        std::unique_lock<std::mutex> lock(mu_);
        cv_.wait(lock, [&] { return filled_ > head_; });
        have_head_ = true;
        head_pos_ = 0;
      }
      if (head_pos_ < b.len) {
        const size_t k = std::min(n, b.len - head_pos_);
        std::memcpy(dst, b.bytes.data() + head_pos_, k);
        head_pos_ += k;
        *got = k;
        return Status::Ok();
      }
      if (b.last) {
        finished_ = true;
        final_status_ = b.status;  // Ok at the end of the input
        return final_status_;
      }
      // Block used up: give it back to the thread.
      have_head_ = false;
      {
        std::lock_guard<std::mutex> lock(mu_);
        ++head_;
      }
      cv_.notify_all();
    }
  }
  uint64_t raw_consumed() const override { return raw_consumed_.load(std::memory_order_relaxed); }
  uint64_t raw_total() const override { return inner_->raw_total(); }
  bool compressed() const override { return inner_->compressed(); }
  const char* decoder() const override { return inner_->decoder(); }

 private:
  // The thread: fills block `filled_ % kBlocks` once the reader released it.
  void produce() {
    for (uint64_t next = 0;; ++next) {
      {
        std::unique_lock<std::mutex> lock(mu_);
        cv_.wait(lock, [&] { return stop_ || next < head_ + kBlocks; });
        if (stop_) return;
      }
      Block& b = blocks_[next % kBlocks];
      b.len = 0;
      b.last = false;
      while (b.len < b.bytes.size()) {
        size_t got = 0;
        b.status = inner_->read(b.bytes.data() + b.len, b.bytes.size() - b.len, &got);
        if (!b.status.ok() || got == 0) {
          b.last = true;
          break;
        }
        b.len += got;
      }
      raw_consumed_.store(inner_->raw_consumed(), std::memory_order_relaxed);
      {
        std::lock_guard<std::mutex> lock(mu_);
        filled_ = next + 1;
      }
      cv_.notify_all();
      if (b.last) return;
    }
  }

  std::unique_ptr<ByteSource> inner_;
  std::vector<Block> blocks_;
  std::thread worker_;
  bool synchronous_ = false;
  std::atomic<uint64_t> raw_consumed_{0};

  std::mutex mu_;
  std::condition_variable cv_;
  uint64_t filled_ = 0;  // blocks the thread has filled (guarded by mu_)
  uint64_t head_ = 0;    // blocks the reader has released (guarded by mu_)
  bool stop_ = false;    // guarded by mu_

  // Reader-side only.
  bool have_head_ = false;
  size_t head_pos_ = 0;
  bool finished_ = false;
  Status final_status_;
};

}  // namespace

std::unique_ptr<ByteSource> prefetch_source(std::unique_ptr<ByteSource> inner) {
  return std::make_unique<PrefetchSource>(std::move(inner));
}

}  // namespace gpuacct
