#include "inject/python/python_hook.h"

#include <dlfcn.h>

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>

#include "inject/log.h"

namespace gpuacct::inject {
namespace {

// The CPython C API, looked up in the process (the library never links libpython).
using IsInitializedFn = int (*)();
using AddPendingCallFn = int (*)(int (*)(void*), void*);
using AddModuleFn = void* (*)(const char*);
using GetDictFn = void* (*)(void*);
using BytesFn = void* (*)(const char*, long);
using UnicodeFn = void* (*)(const char*);
using SetItemFn = int (*)(void*, const char*, void*);
using GetItemFn = void* (*)(void*, const char*);
using RunStringFn = void* (*)(const char*, int, void*, void*, void*);
using AsUtf8Fn = const char* (*)(void*);
using ErrClearFn = void (*)();
using DecRefFn = void (*)(void*);

constexpr int kPyFileInput = 257;  // Py_file_input (Include/compile.h), stable since 2.x

std::atomic<bool> g_scheduled{false};
std::atomic<bool> g_pending_done{false};
std::mutex g_status_mu;
// Guarded by g_status_mu.  origin: "installed", "embedded", "off", "failed" (empty: not run);
// detail: the rest of the bootstrap's status, then what the package says it instrumented.
std::string g_origin;
std::string g_detail;

template <typename Fn>
Fn sym(const char* name) {
  return reinterpret_cast<Fn>(dlsym(RTLD_DEFAULT, name));
}

// The first archive entry: the bootstrap's source.
std::string bootstrap_source(std::string_view archive) {
  const size_t nl = archive.find('\n');
  if (nl == std::string_view::npos) return "";
  const size_t nl2 = archive.find('\n', nl + 1);
  if (nl2 == std::string_view::npos) return "";
  const size_t size = std::strtoul(std::string(archive.substr(nl + 1, nl2 - nl - 1)).c_str(),
                                   nullptr, 10);
  if (nl2 + 1 + size > archive.size()) return "";
  return std::string(archive.substr(nl2 + 1, size));
}

std::string own_path() {
  Dl_info info{};
  if (dladdr(reinterpret_cast<void*>(&own_path), &info) == 0 || info.dli_fname == nullptr)
    return "";
  return info.dli_fname;
}

// Runs on the interpreter's main thread with the GIL held.  Never lets an error reach the
// interpreter: the bootstrap catches every exception itself, and one left here is cleared.
std::string run_bootstrap() {
  const auto add_module = sym<AddModuleFn>("PyImport_AddModule");
  const auto get_dict = sym<GetDictFn>("PyModule_GetDict");
  const auto bytes = sym<BytesFn>("PyBytes_FromStringAndSize");
  const auto unicode = sym<UnicodeFn>("PyUnicode_FromString");
  const auto set_item = sym<SetItemFn>("PyDict_SetItemString");
  const auto get_item = sym<GetItemFn>("PyDict_GetItemString");
  const auto run = sym<RunStringFn>("PyRun_StringFlags");
  const auto as_utf8 = sym<AsUtf8Fn>("PyUnicode_AsUTF8");
  const auto clear = sym<ErrClearFn>("PyErr_Clear");
  const auto decref = sym<DecRefFn>("Py_DecRef");
  if (!add_module || !get_dict || !bytes || !unicode || !set_item || !get_item || !run ||
      !as_utf8 || !clear || !decref) {
    return "failed: this interpreter lacks a CPython C API function the library needs";
  }
  const std::string_view archive = embedded_python_package();
  const std::string source = bootstrap_source(archive);
  if (source.empty()) return "failed: the library's embedded Python package is damaged";
  void* module = add_module("_gpuacct_bootstrap");  // borrowed
  void* dict = module != nullptr ? get_dict(module) : nullptr;
  if (dict == nullptr) {
    clear();
    return "failed: cannot create the bootstrap module";
  }
  void* blob = bytes(archive.data(), static_cast<long>(archive.size()));
  void* path = unicode(own_path().c_str());
  const bool set = blob != nullptr && path != nullptr && set_item(dict, "ARCHIVE", blob) == 0 &&
                   set_item(dict, "LIBRARY", path) == 0;
  if (blob != nullptr) decref(blob);
  if (path != nullptr) decref(path);
  if (!set) {
    clear();
    return "failed: cannot hand the bootstrap its package";
  }
  void* result = run(source.c_str(), kPyFileInput, dict, dict, nullptr);
  if (result == nullptr) {
    clear();
    return "failed: the bootstrap raised";
  }
  decref(result);
  void* status = get_item(dict, "STATUS");  // borrowed
  const char* text = status != nullptr ? as_utf8(status) : nullptr;
  if (text == nullptr) {
    clear();
    return "failed: the bootstrap gave no status";
  }
  return text;
}

int import_auto(void*) {
  if (g_pending_done.exchange(true)) return 0;
  std::string status;
  try {
    status = run_bootstrap();
  } catch (...) {
    status = "failed: internal error";
  }
  {
    const size_t colon = status.find(": ");
    std::lock_guard<std::mutex> lock(g_status_mu);
    g_origin = status.substr(0, colon);
    if (colon != std::string::npos && g_detail.empty()) g_detail = status.substr(colon + 2, 400);
  }
  if (status.rfind("failed", 0) == 0) {
    log_line("Python instrumentation did not load (" + status.substr(8) +
             "); steps come from detection, and a DataLoader's waits are not marked");
  }
  return 0;  // never report an error to the interpreter
}

}  // namespace

void schedule_python_auto_import() {
  auto is_init = sym<IsInitializedFn>("Py_IsInitialized");
  if (is_init == nullptr || is_init() != 1) return;
  auto add = sym<AddPendingCallFn>("Py_AddPendingCall");
  if (add == nullptr) return;
  if (g_scheduled.exchange(true)) return;
  if (add(&import_auto, nullptr) != 0) g_scheduled.store(false);
}

void python_switched_off() {
  std::lock_guard<std::mutex> lock(g_status_mu);
  g_origin = "off";
  g_detail = "GPUACCT_PYTHON=0";
}

void set_python_status(std::string_view text) {
  std::lock_guard<std::mutex> lock(g_status_mu);
  g_detail.assign(text.substr(0, 400));
}

std::string python_status() {
  {
    std::lock_guard<std::mutex> lock(g_status_mu);
    if (!g_origin.empty()) return g_detail.empty() ? g_origin : g_origin + ": " + g_detail;
    // The package reported before the bootstrap finished (it reports while it installs).
    if (!g_detail.empty()) return g_detail;
  }
  if (sym<IsInitializedFn>("Py_IsInitialized") == nullptr) return "not a CPython process";
  if (!g_scheduled.load()) return "not scheduled: the interpreter was not running";
  return "pending: the interpreter never ran the library's pending call";
}

}  // namespace gpuacct::inject
