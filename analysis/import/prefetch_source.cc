#include "analysis/import/prefetch_source.h"

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstring>
#include <memory>
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
// Bytes before each block's data that a borrower may write (lend(): the partial value it
// carries over from the block before).  A trace event is a few hundred bytes; a larger carry
// makes the reader copy instead (json_scan::Stream).
constexpr size_t kHeadroom = size_t{64} << 10;

struct Block {
  // kHeadroom, then the data.  Not zero-filled: the thread's first write faults each page in,
  // on its own core, instead of the reader's constructor clearing 4 MiB.
  std::unique_ptr<char[]> bytes;
  char* data() { return bytes.get() + kHeadroom; }
  size_t len = 0;
  bool last = false;  // the inner source ended (or failed) with this block
  Status status;      // its error, returned after the block's bytes
};

class PrefetchSource final : public ByteSource {
 public:
  explicit PrefetchSource(std::unique_ptr<ByteSource> inner) : inner_(std::move(inner)) {
    blocks_.resize(kBlocks);
    for (Block& b : blocks_) b.bytes.reset(new char[kHeadroom + kBlockBytes]);
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
    if (n == 0 && !finished_) return Status::Ok();
    lent_ = false;  // a span lent before is no longer the reader's
    Block* b = unread_block(/*hold=*/false);
    if (b == nullptr) return final_status_;  // the end, or the inner source's error, again
    const size_t k = std::min(n, b->len - head_pos_);
    std::memcpy(dst, b->data() + head_pos_, k);
    head_pos_ += k;
    *got = k;
    return Status::Ok();
  }

  size_t lend_headroom() const override { return synchronous_ ? 0 : kHeadroom; }

  // The rest of the block being read, or the next one.  The block lent before goes back to
  // the thread only after `carry` (which may lie in it) was copied.
  Status lend(std::string_view carry, char** data, size_t* len) override {
    *data = nullptr;
    *len = 0;
    if (synchronous_ || carry.size() > kHeadroom) {
      return ByteSource::lend(carry, data, len);  // the contract was not kept: an error
    }
    Block* b = unread_block(/*hold=*/lent_);
    if (b == nullptr) return final_status_;  // the span lent before stays valid
    char* at = b->data() + head_pos_;
    if (!carry.empty()) std::memmove(at - carry.size(), carry.data(), carry.size());
    *data = at;
    *len = b->len - head_pos_;
    head_pos_ = b->len;
    lent_ = true;
    give_back_before(head_);
    return Status::Ok();
  }

  uint64_t raw_consumed() const override { return raw_consumed_.load(std::memory_order_relaxed); }
  uint64_t raw_total() const override { return inner_->raw_total(); }
  bool compressed() const override { return inner_->compressed(); }
  const char* decoder() const override { return inner_->decoder(); }

 private:
  // The block with unread bytes, waiting for the thread to fill it; nullptr at the end of the
  // input or after its error (final_status_ says which).  Used-up blocks are given back to the
  // thread, unless `hold`: then the caller still needs the bytes of the block lent last and
  // gives them back itself (give_back_before).
  Block* unread_block(bool hold) {
    if (finished_) return nullptr;
    for (;;) {
      Block& b = blocks_[head_ % kBlocks];
      if (!have_head_) {
        std::unique_lock<std::mutex> lock(mu_);
        cv_.wait(lock, [&] { return filled_ > head_; });
        have_head_ = true;
        head_pos_ = 0;
      }
      if (head_pos_ < b.len) return &b;
      if (b.last) {
        finished_ = true;
        final_status_ = b.status;  // Ok at the end of the input
        return nullptr;
      }
      have_head_ = false;  // used up: on to the next block
      ++head_;
      if (!hold) give_back_before(head_);
    }
  }

  // Blocks before number `n` may be refilled.
  void give_back_before(uint64_t n) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (n <= released_) return;
      released_ = n;
    }
    cv_.notify_all();
  }

  // The thread: fills block `filled_ % kBlocks` once the reader released it.
  void produce() {
    for (uint64_t next = 0;; ++next) {
      {
        std::unique_lock<std::mutex> lock(mu_);
        cv_.wait(lock, [&] { return stop_ || next < released_ + kBlocks; });
        if (stop_) return;
      }
      Block& b = blocks_[next % kBlocks];
      b.len = 0;
      b.last = false;
      while (b.len < kBlockBytes) {
        size_t got = 0;
        b.status = inner_->read(b.data() + b.len, kBlockBytes - b.len, &got);
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
  uint64_t filled_ = 0;    // blocks the thread has filled (guarded by mu_)
  uint64_t released_ = 0;  // blocks the reader has given back (guarded by mu_)
  bool stop_ = false;      // guarded by mu_

  // Reader-side only.
  uint64_t head_ = 0;  // the block being read (blocks before it are used up)
  bool have_head_ = false;
  size_t head_pos_ = 0;
  bool lent_ = false;  // the reader may still hold bytes lend() gave (block head_)
  bool finished_ = false;
  Status final_status_;
};

}  // namespace

std::unique_ptr<ByteSource> prefetch_source(std::unique_ptr<ByteSource> inner) {
  return std::make_unique<PrefetchSource>(std::move(inner));
}

}  // namespace gpuacct
