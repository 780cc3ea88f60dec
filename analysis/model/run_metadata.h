// Facts about the run that are not events: who recorded it, where, on what.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

namespace gpuacct {

struct DeviceInfo {
  int id = 0;
  std::string name;  // e.g. "NVIDIA H200"
  int sm_count = 0;
  int compute_major = 0;
  int compute_minor = 0;
  uint64_t total_memory = 0;
};

struct RunMetadata {
  std::string source;       // "injected", "kineto", "recording", "synthetic"
  std::string source_path;  // file analysed, if any
  std::string hostname;
  int64_t pid = 0;
  int rank = -1;  // -1 = not distributed / unknown
  int world_size = 0;
  // Which job the rank belongs to, so the job view can refuse to merge ranks of two jobs:
  // GPUACCT_JOB_ID, else SLURM_JOB_ID, TORCHELASTIC_RUN_ID, LSB_JOBID, PBS_JOBID (inject/config.cc);
  // empty when unknown.
  std::string job_id;
  std::string command;  // argv of the profiled process, if known
  std::vector<DeviceInfo> devices;
  std::string gpuacct_version;
  // Events of accelerators gpuacct does not account (a Kineto trace's "mtia_ccp_events",
  // "mtia_runtime", "xpu_runtime", "hpu_op", ...), by category, most frequent first: the
  // verdict names them when there is no CUDA GPU work to account.
  std::vector<std::pair<std::string, int64_t>> other_accelerator_events;
  // A live run that detected its steps: its report's "step_detection" section (JSON object
  // text, report/report.h add_step_detection_section).  Recordings carry it with the detected
  // step ranges, so a re-analysis reports the steps and the section live found; empty
  // otherwise.
  std::string step_detection;
  // The accounting settings the live run used (AccountingConfig's fields by name, value in the
  // field's unit: analysis/input/input.h accounting_settings), so that a re-analysis of its
  // recording accounts as the run did.  Empty for inputs that do not carry them (traces,
  // synthetic runs, recordings written before this field): those get the defaults.
  std::vector<std::pair<std::string, int64_t>> accounting;
};

// The one RunMetadata -> JSON writer: the report's "run" section (analysis/report/report.cc)
// and a recording's metadata chunk (analysis/import/recording.cc) are this object, so both
// have the same keys (docs/report_schema.md, docs/recording_format.md):
//   source, source_path, hostname, pid, rank, world_size, job_id, command, gpuacct_version,
//   devices[] {id, name, sm_count, compute_capability ("9.0"), total_memory},
//   other_accelerator_events {category: count}, step_detection (an object) when set, and
//   accounting {setting: integer} when set.
// Every string is made safe with json_safe_utf8 (analysis/model/json_text.h): the result
// always serialises.  Recordings written before this writer existed name a device's compute
// capability compute_major / compute_minor; their reader (recording.cc) takes both.
nlohmann::json run_metadata_to_json(const RunMetadata& meta);

}  // namespace gpuacct
