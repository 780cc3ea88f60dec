// gpuacct run / plot / where / job-parquet / job-export / job-query (and report --json): handed
// to the Python package (python -m gpuacct), so one name serves both halves of the tool.  The
// launcher, the plots and the Parquet / DuckDB / Spark side live in Python because they drive
// Python programs and Python libraries; this binary only finds them.
#include <limits.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "cli/commands.h"

namespace gpuacct::cli {
namespace {

std::string self_path() {
  char buf[PATH_MAX];
  const ssize_t n = readlink("/proc/self/exe", buf, sizeof buf - 1);
  if (n <= 0) return "";
  buf[n] = '\0';
  return buf;
}

void set_default_env(const char* name, const std::string& value) {
  const char* cur = std::getenv(name);
  if ((cur == nullptr || *cur == '\0') && !value.empty()) setenv(name, value.c_str(), 1);
}

}  // namespace

int run_python_command(const char* command, int argc, char** argv) {
  namespace fs = std::filesystem;
  const std::string self = self_path();
  std::error_code ec;
  // The build tree this binary came from: <build>/bin/gpuacct next to <build>/inject/.
  const fs::path build = self.empty() ? fs::path() : fs::path(self).parent_path().parent_path();
  const fs::path lib = build / "inject" / "libgpuacct.so";
  if (!build.empty() && fs::is_regular_file(lib, ec)) {
    set_default_env("GPUACCT_LIBRARY", lib.string());
    set_default_env("GPUACCT_BUILD_DIR", build.string());
  }
  set_default_env("GPUACCT_CLI", self);
  // The package in the source tree, for runs from a checkout without `pip install`.
  const fs::path shim = fs::path(GPUACCT_SOURCE_DIR) / "python_shim";
  if (fs::is_directory(shim / "gpuacct", ec)) {
    const char* old = std::getenv("PYTHONPATH");
    std::string path = shim.string();
    if (old != nullptr && *old != '\0') path += std::string(":") + old;
    setenv("PYTHONPATH", path.c_str(), 1);
  }
  const char* py = std::getenv("GPUACCT_PYTHON_EXE");
  const std::string python = py != nullptr && *py != '\0' ? py : "python3";
  std::vector<char*> args;
  args.push_back(const_cast<char*>(python.c_str()));
  args.push_back(const_cast<char*>("-m"));
  args.push_back(const_cast<char*>("gpuacct"));
  args.push_back(const_cast<char*>(command));
  for (int i = 1; i < argc; ++i) args.push_back(argv[i]);
  args.push_back(nullptr);
  execvp(python.c_str(), args.data());
  std::fprintf(stderr,
               "gpuacct %s: cannot start %s (%s): this command is the Python package's: it needs "
               "Python 3 with the gpuacct package (pip install ./python_shim, or set "
               "GPUACCT_PYTHON_EXE)\n",
               command, python.c_str(), std::strerror(errno));
  return 1;
}

int run_run(int argc, char** argv) {
  return run_python_command("run", argc, argv);
}
int run_plot(int argc, char** argv) {
  return run_python_command("plot", argc, argv);
}
int run_job_parquet(int argc, char** argv) {
  return run_python_command("job-parquet", argc, argv);
}
int run_job_export(int argc, char** argv) {
  return run_python_command("job-export", argc, argv);
}
int run_job_query(int argc, char** argv) {
  return run_python_command("job-query", argc, argv);
}
int run_where(int argc, char** argv) {
  return run_python_command("where", argc, argv);
}

}  // namespace gpuacct::cli
