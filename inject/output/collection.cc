#include "inject/output/collection.h"

#include "analysis/model/json_text.h"

namespace gpuacct::inject {

nlohmann::json collection_section(const CollectionFacts& f) {
  const cupti::ParseTotals& t = *f.totals;
  nlohmann::json c = {
      {"gpu", f.gpu.state},
      {"detail", f.gpu.message},
      {"cupti_version", f.cupti_version},
      {"step_source", f.step_source},
      {"python", json_safe_utf8(f.python)},
      {"buffers",
       {{"count", f.buffer_count},
        {"bytes_each", f.buffer_bytes},
        {"allocated", f.buffers_allocated}}},
      {"records",
       {{"kernels", t.kernels},
        {"memcpys", t.memcpys},
        {"memsets", t.memsets},
        {"api_calls", t.api_calls},
        {"api_calls_nested", t.api_calls_nested},
        {"graph_spans", t.graph_spans},
        {"graph_spans_without_nodes", t.graph_spans_without_nodes}}},
  };
  if (f.clock_source != cupti::ClockSource::kNone) {
    c["clock"] = {{"source", cupti::to_string(f.clock_source)},
                  {"offset_ns", f.clock_offset_ns},
                  {"offset_uncertainty_ns", f.clock_offset_uncertainty_ns}};
    // What was asked of CUPTI (docs/overhead.md, "The design"): the overhead matrix reads it
    // back to check that a row ran as configured.
    auto domains = [](uint8_t d) {
      return std::string((d & cupti::kRuntimeDomain) != 0 ? "runtime" : "") +
             ((d & cupti::kRuntimeDomain) != 0 && (d & cupti::kDriverDomain) != 0 ? "+" : "") +
             ((d & cupti::kDriverDomain) != 0 ? "driver" : "");
    };
    c["cupti"] = {{"kinds", cupti::kinds_to_string(f.plan.kinds)},
                  {"graph_trace", f.graph_trace},
                  {"api_records", f.plan.api_records && !cupti::api_from_callbacks(f.plan)},
                  {"api_source", cupti::to_string(f.plan.api_source)},
                  {"launch_callbacks", domains(f.callbacks.launch)},
                  {"sync_callbacks", domains(f.callbacks.sync)},
                  {"copy_callbacks", domains(f.callbacks.copy)},
                  {"reset_callback", f.plan.reset_callback},
                  {"timestamps", cupti::to_string(f.plan.timestamps)},
                  {"sample_switch", cupti::to_string(f.plan.sample_switch)},
                  {"experiment", f.plan.experiment}};
  }
  // Indexed by CUpti_ActivitySynchronizationType (cupti_hooks/activity_parser.h SyncTotals).
  const char* sync_names[] = {"unknown", "event_synchronize", "stream_wait_event",
                              "stream_synchronize", "context_synchronize"};
  nlohmann::json sync = nlohmann::json::object();
  for (size_t i = 0; i < t.sync.count.size(); ++i) {
    if (t.sync.count[i] == 0) continue;
    sync[sync_names[i]] = {{"count", t.sync.count[i]},
                           {"total_ms", static_cast<double>(t.sync.ns[i]) / 1e6}};
  }
  c["synchronization"] = sync;
  c["native_sites"] = f.native_sites;
  if (!f.nccl_plugin.is_null()) c["nccl_plugin"] = f.nccl_plugin;
  if (!f.counters.is_null()) c["counters"] = f.counters;
  if (f.gpu.state != "active" && f.gpu.state != "stopped") {
    c["note"] = "no GPU activity: " + f.gpu.message;
  } else if (t.kernels + t.memcpys + t.memsets + t.graph_spans == 0) {
    c["note"] = "no GPU activity was recorded";
  }
  return c;
}

}  // namespace gpuacct::inject
