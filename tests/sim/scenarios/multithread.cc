// multithread: 4 persistent worker threads, each with its own stream, launch 8 kernels of 500 us
// per step.  A turnstile makes them launch in strict round robin (worker i issues launches
// i, i+W, i+2W, ...), so the timeline is deterministic although the launches come from
// different threads.  Stream i runs from T0 + i*L + lat without a gap (500 us >> W*L), so per
// step: launch_gap lat, compute (W-1)*L + K*500 us.  The main thread marks steps and synchronizes.
#include <condition_variable>
#include <mutex>
#include <thread>

#include "scenario_common.h"

using namespace sim_scenario;

namespace {

struct Turnstile {
  std::mutex mu;
  std::condition_variable cv;
  int generation = 0;  // bumped by the main thread to start a step
  int turn = 0;        // next global launch index in the current step
  bool stop = false;
};

}  // namespace

int main(int argc, char** argv) {
  Harness h(argc, argv, "multithread", 20);
  const uint64_t L = 4 * kUs, lat = 5 * kUs, dk = 500 * kUs;
  const int workers = 4, per_worker = 8;
  h.Init(1, L, lat);
  h.Param("threads", workers);
  h.Param("kernels_per_thread", per_worker);
  h.Param("kernel_ns", dk);

  Turnstile ts;
  std::vector<std::thread> threads;
  for (int w = 0; w < workers; ++w) {
    threads.emplace_back([&, w] {
      simStream_t s = simStreamCreate(0);
      int seen = 0;
      for (;;) {
        {
          std::unique_lock<std::mutex> lock(ts.mu);
          ts.cv.wait(lock, [&] { return ts.stop || ts.generation != seen; });
          if (ts.stop) return;
          seen = ts.generation;
        }
        for (int k = 0; k < per_worker; ++k) {
          std::unique_lock<std::mutex> lock(ts.mu);
          ts.cv.wait(lock, [&] { return ts.turn == k * workers + w; });
          // Launch while holding the turnstile so the next thread cannot overtake.
          simLaunchKernel(s, "worker_kernel", dk);
          ++ts.turn;
          ts.cv.notify_all();
        }
      }
    });
  }

  for (int i = 0; i < h.steps(); ++i) {
    h.StepBegin(i);
    {
      std::lock_guard<std::mutex> lock(ts.mu);
      ts.turn = 0;
      ++ts.generation;
    }
    ts.cv.notify_all();
    {
      std::unique_lock<std::mutex> lock(ts.mu);
      ts.cv.wait(lock, [&] { return ts.turn == workers * per_worker; });
    }
    simDeviceSynchronize(0);
    Expect e;
    e.launch_gap = lat;
    e.compute = static_cast<uint64_t>(workers - 1) * L + static_cast<uint64_t>(per_worker) * dk;
    h.StepEnd(e);
  }
  {
    std::lock_guard<std::mutex> lock(ts.mu);
    ts.stop = true;
  }
  ts.cv.notify_all();
  for (auto& t : threads) t.join();
  return h.Finish("compute");
}
