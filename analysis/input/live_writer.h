// Whether a file that has no closing line yet is still being written: its header names the
// process that writes it (hostname, pid), and a live job's step stream is read while it runs
// (`gpuacct report` of a job in progress).  Then its rows so far are all there is yet -- nothing
// was lost -- which a killed writer's cut file cannot say.  POSIX / Linux (/proc); no CUDA.
#pragma once

#include <string>

#include "analysis/model/run_metadata.h"

namespace gpuacct {

// True when `writer` names this host (by name) and its pid is a live process that holds `path`
// open (/proc/<pid>/fd): a pid reused by another process does not hold the file, so it is not
// taken for the writer.  False whenever that cannot be known (another host, no /proc, no
// permission to read the process's descriptors).
bool file_held_by_live_writer(const std::string& path, const RunMetadata& writer);

}  // namespace gpuacct
