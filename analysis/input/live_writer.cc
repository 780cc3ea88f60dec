#include "analysis/input/live_writer.h"

#include <dirent.h>
#include <limits.h>
#include <stdlib.h>
#include <unistd.h>

#include <memory>

namespace gpuacct {

bool file_held_by_live_writer(const std::string& path, const RunMetadata& writer) {
  if (writer.pid <= 0 || writer.hostname.empty()) return false;
  char host[HOST_NAME_MAX + 1] = {};
  if (gethostname(host, sizeof host - 1) != 0 || writer.hostname != host) return false;
  char want[PATH_MAX];
  if (realpath(path.c_str(), want) == nullptr) return false;
  const std::string fd_dir = "/proc/" + std::to_string(writer.pid) + "/fd";
  std::unique_ptr<DIR, int (*)(DIR*)> dir(opendir(fd_dir.c_str()), closedir);
  if (dir == nullptr) return false;  // gone, or not ours to look at
  while (const dirent* e = readdir(dir.get())) {
    if (e->d_name[0] == '.') continue;
    char target[PATH_MAX];
    const std::string link = fd_dir + "/" + e->d_name;
    const ssize_t n = readlink(link.c_str(), target, sizeof target - 1);
    if (n <= 0) continue;
    target[n] = '\0';
    if (std::string(target) == want) return true;
  }
  return false;
}

}  // namespace gpuacct
