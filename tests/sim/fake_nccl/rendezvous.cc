// The shared-memory meeting place of the fake NCCL's ranks (rendezvous.h).
#include "rendezvous.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <thread>

namespace simnccl {

// A cell: the tag (seq + 1) is stored last with release, so a reader that sees it sees the rest.
struct Rendezvous::Cell {
  std::atomic<uint64_t> tag;
  uint64_t true_start;
  uint64_t link_bytes_per_us;
  uint64_t unused;
};

struct Rendezvous::Layout {
  uint64_t magic;  // informative; the file starts zeroed and every field is usable as is
  std::atomic<uint64_t> keys[kMaxKeys];  // claimed communicator keys (0 = free)
  Cell cells[kMaxKeys][kRing][kMaxRanks];
};
static_assert(std::atomic<uint64_t>::is_always_lock_free, "cells are shared between processes");

Rendezvous::~Rendezvous() {
  if (map_ != nullptr) munmap(map_, sizeof(Layout));
}

std::string Rendezvous::open(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
  if (fd < 0) return "cannot open " + path + ": " + std::strerror(errno);
  struct stat st{};
  // Every rank extends the file to the same size: zero-filled, never shrunk under another.
  if (fstat(fd, &st) != 0 ||
      (st.st_size < static_cast<off_t>(sizeof(Layout)) &&
       ftruncate(fd, static_cast<off_t>(sizeof(Layout))) != 0)) {
    const std::string why = std::strerror(errno);
    ::close(fd);
    return "cannot size " + path + ": " + why;
  }
  void* p = mmap(nullptr, sizeof(Layout), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  ::close(fd);
  if (p == MAP_FAILED) return "cannot map " + path + ": " + std::strerror(errno);
  map_ = static_cast<Layout*>(p);
  return "";
}

int Rendezvous::slot_for(uint64_t key) {
  for (int i = 0; i < kMaxKeys; ++i) {
    uint64_t seen = map_->keys[i].load(std::memory_order_acquire);
    if (seen == key) return i;
    if (seen == 0) {
      if (map_->keys[i].compare_exchange_strong(seen, key, std::memory_order_acq_rel)) return i;
      if (seen == key) return i;
    }
  }
  return -1;
}

std::string Rendezvous::meet(uint64_t key, uint64_t seq, int rank, int nranks, const Arrival& mine,
                             double timeout_s, std::vector<Arrival>* all) {
  if (map_ == nullptr) return "no rendezvous file (GPUACCT_SIM_NCCL_RENDEZVOUS)";
  if (nranks > kMaxRanks || rank < 0 || rank >= nranks) return "rank out of range";
  const int slot = slot_for(key);
  if (slot < 0) return "too many communicators for the rendezvous file";
  Cell* row = map_->cells[slot][seq % kRing];
  Cell& own = row[rank];
  own.true_start = mine.true_start;
  own.link_bytes_per_us = mine.link_bytes_per_us;
  own.tag.store(seq + 1, std::memory_order_release);
  const auto deadline = std::chrono::steady_clock::now() +
                        std::chrono::microseconds(static_cast<int64_t>(timeout_s * 1e6));
  all->assign(static_cast<size_t>(nranks), Arrival{});
  for (;;) {
    int missing = 0;
    for (int r = 0; r < nranks; ++r) {
      if (row[r].tag.load(std::memory_order_acquire) != seq + 1) ++missing;
    }
    if (missing == 0) break;
    if (std::chrono::steady_clock::now() > deadline) {
      std::string who;
      for (int r = 0; r < nranks; ++r) {
        if (row[r].tag.load(std::memory_order_acquire) != seq + 1) {
          who += (who.empty() ? "" : ",") + std::to_string(r);
        }
      }
      return "ranks [" + who + "] did not arrive within " + std::to_string(timeout_s) + " s";
    }
    std::this_thread::sleep_for(std::chrono::microseconds(50));
  }
  for (int r = 0; r < nranks; ++r) {
    (*all)[static_cast<size_t>(r)] = {row[r].true_start, row[r].link_bytes_per_us};
  }
  return "";
}

}  // namespace simnccl
