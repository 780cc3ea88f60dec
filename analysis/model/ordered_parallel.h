// Independent work items done on several threads, their results used in order on the caller's
// thread: reading several inputs (ranks) at once while the output stays what one thread gives.
//
//   ordered_parallel<R>(count, threads, produce, consume):
//     produce(i) -> R runs for each i in [0, count) on up to `threads` worker threads, taken in
//     increasing i; consume(i, R&&) runs on the calling thread for i = 0, 1, ... in order, each
//     as soon as its result is there.  A worker starts item i only while i < (items consumed) +
//     2 x (threads started), so at most that many results wait in memory whatever `count` is.
//     threads <= 1 or count <= 1: everything on the calling thread, produce(i) then consume(i).
//   An exception from produce(i) is rethrown by the call at item i, on the calling thread, after
//   the workers are stopped (items already started finish first); one from consume likewise.
//   produce must be safe to call from several threads at once (its items share no mutable
//   state); consume needs no such care.
#pragma once

#include <algorithm>
#include <condition_variable>
#include <cstddef>
#include <exception>
#include <mutex>
#include <optional>
#ifdef __linux__
#include <sched.h>
#endif
#include <system_error>
#include <thread>
#include <utility>
#include <vector>

namespace gpuacct {

// Inputs read at once by default: each read takes up to three threads (inflate, read, account:
// docs/kineto_import.md) but keeps them busy only part of the time (the accounting's finish and
// the report are serial): four 85 MB traces on two cores took 0.34-0.44 s one at a time,
// 0.28-0.30 s two or more at a time.  Half the cores this process may run on, at least 2 and at
// most 4: each read holds its own input's events (a 1 GB trace ~420 MB), so memory, not cores,
// bounds how many a machine takes -- more only when asked (--jobs).
// The CPUs this process may run on (its affinity: a container's or taskset's cpuset), else the
// machine's; 0 when unknown.
inline unsigned usable_cpus() {
#ifdef __linux__
  cpu_set_t allowed;
  CPU_ZERO(&allowed);
  if (sched_getaffinity(0, sizeof allowed, &allowed) == 0 && CPU_COUNT(&allowed) > 0)
    return static_cast<unsigned>(CPU_COUNT(&allowed));
#endif
  return std::thread::hardware_concurrency();
}

inline unsigned default_read_jobs() {
  return std::clamp(usable_cpus() / 2, 2u, 4u);
}
inline constexpr unsigned kMaxReadJobs = 256;

template <typename Result, typename Produce, typename Consume>
void ordered_parallel(size_t count, unsigned threads, Produce produce, Consume consume) {
  if (threads <= 1 || count <= 1) {
    for (size_t i = 0; i < count; ++i) consume(i, produce(i));
    return;
  }
  struct Slot {
    std::optional<Result> result;
    std::exception_ptr failure;
    bool done = false;
  };
  struct Shared {
    std::mutex mu;
    std::condition_variable cv;
    std::vector<Slot> slots;
    size_t next = 0;      // the next item a worker takes
    size_t consumed = 0;  // items the caller has taken
    size_t ahead = 0;     // 2 x the threads started (0 until they are)
    bool stop = false;
  } shared;
  shared.slots.resize(count);
  auto work = [&] {
    for (;;) {
      size_t i = 0;
      {
        std::unique_lock<std::mutex> lock(shared.mu);
        shared.cv.wait(lock, [&] {
          return shared.stop || shared.next >= count ||
                 shared.next < shared.consumed + shared.ahead;
        });
        if (shared.stop || shared.next >= count) return;
        i = shared.next++;
      }
      std::optional<Result> result;
      std::exception_ptr failure;
      try {
        result.emplace(produce(i));
      } catch (...) {
        failure = std::current_exception();
      }
      {
        std::lock_guard<std::mutex> lock(shared.mu);
        shared.slots[i].result = std::move(result);
        shared.slots[i].failure = failure;
        shared.slots[i].done = true;
      }
      shared.cv.notify_all();
    }
  };
  // Joins the workers on every way out, an exception included.
  struct Workers {
    Shared& shared;
    std::vector<std::thread> threads;
    ~Workers() {
      {
        std::lock_guard<std::mutex> lock(shared.mu);
        shared.stop = true;
      }
      shared.cv.notify_all();
      for (std::thread& t : threads) t.join();
    }
  } workers{shared, {}};
  const size_t thread_count = std::min<size_t>(threads, count);
  for (size_t t = 0; t < thread_count; ++t) {
    try {
      workers.threads.emplace_back(work);
    } catch (const std::system_error&) {
      break;  // no more threads: the ones started do the work
    }
  }
  if (workers.threads.empty()) {  // none at all: the calling thread does it
    for (size_t i = 0; i < count; ++i) consume(i, produce(i));
    return;
  }
  {
    std::lock_guard<std::mutex> lock(shared.mu);
    shared.ahead = 2 * workers.threads.size();
  }
  shared.cv.notify_all();
  for (size_t i = 0; i < count; ++i) {
    Slot slot;
    {
      std::unique_lock<std::mutex> lock(shared.mu);
      shared.cv.wait(lock, [&] { return shared.slots[i].done; });
      slot = std::move(shared.slots[i]);
      shared.slots[i] = Slot{};
      shared.consumed = i + 1;
    }
    shared.cv.notify_all();
    if (slot.failure) std::rethrow_exception(slot.failure);
    consume(i, std::move(*slot.result));
  }
}

}  // namespace gpuacct
