// graphs: each step does 1 ms of host work outside any range, then one cudaGraphLaunch of 40
// kernels of 150 us.  Graph kernels carry graphId / graphNodeId and the correlation id of the
// cudaGraphLaunch record.  Per step: host_other 1 ms, launch_gap lat, compute 40*150 us.
#include "scenario_common.h"

using namespace sim_scenario;

int main(int argc, char** argv) {
  Harness h(argc, argv, "graphs", 20);
  const uint64_t L = 4 * kUs, lat = 5 * kUs, host = 1 * kMs, dk = 150 * kUs;
  const int nodes = 40;
  h.Init(1, L, lat);
  h.Param("host_other_ns", host);
  h.Param("kernel_ns", dk);
  h.Param("graph_nodes", nodes);
  simStream_t s = simStreamCreate(0);
  simGraph_t g = simGraphCreate();
  for (int n = 0; n < nodes; ++n) {
    simGraphAddKernel(g, n % 2 == 0 ? "graph_gemm_kernel" : "graph_softmax_kernel", dk);
  }
  h.Param("graph_id", simGraphId(g));
  for (int i = 0; i < h.steps(); ++i) {
    h.StepBegin(i);
    simHostWork(host);
    simGraphLaunch(s, g);
    simStreamSynchronize(s);
    Expect e;
    e.host_other = host;
    e.launch_gap = lat;
    e.compute = nodes * dk;
    h.StepEnd(e);
  }
  return h.Finish("compute");
}
