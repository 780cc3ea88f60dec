#include "analysis/model/run_metadata.h"

#include "analysis/model/json_text.h"

namespace gpuacct {

using nlohmann::json;

json run_metadata_to_json(const RunMetadata& m) {
  json devices = json::array();
  for (const DeviceInfo& d : m.devices) {
    devices.push_back({{"id", d.id},
                       {"name", json_safe_utf8(d.name)},
                       {"sm_count", d.sm_count},
                       {"compute_capability",
                        std::to_string(d.compute_major) + "." + std::to_string(d.compute_minor)},
                       {"total_memory", d.total_memory}});
  }
  json other = json::object();
  for (const auto& [category, n] : m.other_accelerator_events) other[json_safe_utf8(category)] = n;
  json out = {{"source", json_safe_utf8(m.source)},
              {"source_path", json_safe_utf8(m.source_path)},
              {"hostname", json_safe_utf8(m.hostname)},
              {"pid", m.pid},
              {"rank", m.rank},
              {"world_size", m.world_size},
              {"job_id", json_safe_utf8(m.job_id)},
              {"command", json_safe_utf8(m.command)},
              {"gpuacct_version", json_safe_utf8(m.gpuacct_version)},
              {"devices", devices},
              {"other_accelerator_events", other}};
  if (!m.accounting.empty()) {
    json settings = json::object();
    for (const auto& [name, value] : m.accounting) settings[json_safe_utf8(name)] = value;
    out["accounting"] = settings;
  }
  if (!m.step_detection.empty()) {
    // Text this library wrote from a json (dump_json): it parses; anything else is left out.
    json section = parse_json(m.step_detection);
    if (section.is_object()) out["step_detection"] = section;
  }
  return out;
}

}  // namespace gpuacct
