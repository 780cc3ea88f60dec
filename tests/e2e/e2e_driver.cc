// A host program for the library's fault and lifecycle tests on the simulated device
// (the scenario programs cover accounting).  Marks steps through gpuacct_dynamic.h.
//
//   e2e_driver --mode=loop  --steps=N --sleep-ms=M   steps of 10 ms data + 5 kernels, real sleeps
//              [--kernels=K]                       K kernels of 1 ms per step instead of 5
//              [--sync-every=N]                    synchronize after every N-th step only (1:
//                                                  each step): with more kernel time than host
//                                                  time per step the GPU queue never drains in
//                                                  between, and a kernel is always in flight
//              [--work]                            declares step i's work: tokens 1000 (i + 1)
//                                                  + 0.5 in two calls (500 (i + 1), then the
//                                                  rest), samples i % 3 + 1 (run_e2e.py's truth)
//              [--graph]                           instead: the data wait in two halves of 5 ms
//                                                  (a sleep after each), then one graph launch
//                                                  of kernels of 1, 1 and 6 ms, no sync: the
//                                                  last runs 8 ms into the next step
//   e2e_driver --mode=fork  --steps=N                forks mid-run; the child marks and exit()s
//   e2e_driver --mode=nocuda --steps=N --sleep-ms=M  never initialises CUDA (host ranges only)
//              [--latin1-names]                    the data range, a user range and the kernel
//                                                  named with bytes that are not UTF-8
//   e2e_driver --mode=threads --steps=N              each step's work on a new thread (below)
#include <gpuacct/gpuacct_dynamic.h>
#include <pthread.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <set>
#include <string>
#include <thread>

#include "sim_cuda.h"

namespace {

int g_kernels = 5;
int g_sync_every = 1;  // --sync-every
bool g_work = false;   // --work
// Names (--latin1-names: a Latin-1 byte, a cut sequence, an escape sequence).
const char* g_data_name = "dataloader";
const char* g_kernel_name = "e2e_kernel";
const char* g_user_name = nullptr;
simGraph_t g_graph = nullptr;  // --graph

// The --graph step: the 6 ms kernel ends 8 ms after the launch, past the step's end, and the
// halves put a flush (and the sim clock) between the first kernels' ends and the last's.
void graph_step(const gpuacct_dyn_api* api, simStream_t s, int i, int sleep_ms) {
  api->step_begin(i);
  api->data_push(g_data_name);
  for (int half = 0; half < 2; ++half) {
    simHostWork(5'000'000);
    if (sleep_ms > 0) usleep(static_cast<useconds_t>(sleep_ms) * 1000);
  }
  api->data_pop();
  simGraphLaunch(s, g_graph);
  api->step_end();
}

void one_step(const gpuacct_dyn_api* api, simStream_t s, int i, int sleep_ms) {
  if (g_graph != nullptr) return graph_step(api, s, i, sleep_ms);
  api->step_begin(i);
  if (g_user_name != nullptr) api->range_push(g_user_name);
  api->data_push(g_data_name);
  if (s != nullptr) simHostWork(10'000'000);
  if (sleep_ms > 0) usleep(static_cast<useconds_t>(sleep_ms) * 1000);
  api->data_pop();
  if (g_work) {  // two micro-batches: the library adds them up
    const double half = 500.0 * (i + 1);
    api->set_step_work(half, 0);
    api->set_step_work(half + 0.5, static_cast<double>(i % 3 + 1));
  }
  if (s != nullptr) {
    for (int k = 0; k < g_kernels; ++k) simLaunchKernel(s, g_kernel_name, 1'000'000);
    if ((i + 1) % g_sync_every == 0) simStreamSynchronize(s);
  }
  if (g_user_name != nullptr) api->range_pop();
  api->step_end();
}

// Step i's work on a thread of its own, created after the library started and gone (joined)
// before the step ends, so CUPTI delivers its records after it exited; the C library reuses a
// joined thread's stack, so later threads usually get the same pthread_self() (CUPTI's default
// thread id).  The main thread marks the step.  The thread's first call is CUDA's: a 1 ms
// kernel and a synchronize, then a flush and 30 ms of real time, so the library parses that
// launch's record before the thread marks anything; then it waits 10 ms for data in a data
// range, launches 5 kernels of 1 ms (L = 4 us, lat = 5 us) and synchronizes.  Per step:
// data_wait 10 ms, launch_gap 2 x 5 us, compute 6 ms -- the data wait is the launching
// thread's, so it counts only when the launches' API records name that thread.  Prints how many
// steps ran on a pthread id an earlier step's thread had.
void threads_mode(const gpuacct_dyn_api* api, simStream_t s, int steps) {
  std::set<uint32_t> seen;
  int reused = 0;
  for (int i = 0; i < steps; ++i) {
    api->step_begin(i);
    uint32_t id = 0;
    std::thread t([&] {
      id = static_cast<uint32_t>(pthread_self());
      simLaunchKernel(s, "first_kernel", 1'000'000);
      simStreamSynchronize(s);
      api->flush();
      usleep(30'000);
      api->data_push("dataloader");
      simHostWork(10'000'000);
      api->data_pop();
      for (int k = 0; k < 5; ++k) simLaunchKernel(s, "thread_kernel", 1'000'000);
      simStreamSynchronize(s);
    });
    t.join();
    api->step_end();
    if (!seen.insert(id).second) ++reused;
  }
  std::printf("pthread_ids_reused=%d\n", reused);
}

}  // namespace

int main(int argc, char** argv) {
  std::string mode = "loop";
  int steps = 10, sleep_ms = 0;
  bool graph = false;
  for (int i = 1; i < argc; ++i) {
    if (std::strncmp(argv[i], "--mode=", 7) == 0)
      mode = argv[i] + 7;
    else if (std::strncmp(argv[i], "--steps=", 8) == 0)
      steps = std::atoi(argv[i] + 8);
    else if (std::strncmp(argv[i], "--sleep-ms=", 11) == 0)
      sleep_ms = std::atoi(argv[i] + 11);
    else if (std::strncmp(argv[i], "--kernels=", 10) == 0)
      g_kernels = std::atoi(argv[i] + 10);
    else if (std::strncmp(argv[i], "--sync-every=", 13) == 0)
      g_sync_every = std::max(1, std::atoi(argv[i] + 13));
    else if (std::strcmp(argv[i], "--work") == 0)
      g_work = true;
    else if (std::strcmp(argv[i], "--graph") == 0)
      graph = true;
    else if (std::strcmp(argv[i], "--latin1-names") == 0) {
      g_data_name = "donn\351es";  // octal: the byte 0xE9 then "es"
      g_kernel_name = "k\xE9rnel_\xC3";
      g_user_name = "user\x1B[31m\xFF";
    }
  }
  simStream_t s = nullptr;
  if (mode != "nocuda") {
    if (simInit(1) != SIM_OK) return 2;
    simSetLaunchCost(4000);
    simSetLaunchLatency(5000);
    s = simStreamCreate(0);
    if (graph) {
      g_graph = simGraphCreate();
      for (const uint64_t ns : {uint64_t{1'000'000}, uint64_t{1'000'000}, uint64_t{6'000'000}})
        simGraphAddKernel(g_graph, "graph_kernel", ns);
    }
  }
  const gpuacct_dyn_api* api = gpuacct_dyn();
  std::printf("loaded=%d\n", api->loaded);
  const char* injection = std::getenv("CUDA_INJECTION64_PATH");
  std::printf("cuda_injection=%s\n", injection != nullptr ? injection : "");
  std::fflush(stdout);
  if (mode == "fork") {
    for (int i = 0; i < steps / 2; ++i) one_step(api, s, i, 0);
    const pid_t child = fork();
    if (child == 0) {
      // The child inherits the library: it must neither flush nor write the parent's files.
      for (int i = 0; i < 3; ++i) {
        api->step_begin(1000 + i);
        api->step_end();
      }
      api->flush();
      std::exit(0);  // runs the inherited atexit handlers
    }
    int status = 0;
    waitpid(child, &status, 0);
    std::printf("child_pid=%d status=%d\n", static_cast<int>(child), status);
    for (int i = steps / 2; i < steps; ++i) one_step(api, s, i, 0);
  } else if (mode == "threads") {
    threads_mode(api, s, steps);
  } else {
    for (int i = 0; i < steps; ++i) {
      one_step(api, s, i, sleep_ms);
      if (i == 2) {
        std::printf("step2_done\n");
        std::fflush(stdout);
      }
    }
  }
  if (s != nullptr && (g_graph != nullptr || g_sync_every > 1)) simStreamSynchronize(s);
  std::printf("done\n");
  if (s != nullptr) simShutdown();
  return 0;
}
