#include "inject/python_hook.h"

#include <dlfcn.h>

#include <atomic>

namespace gpuacct::inject {
namespace {

using IsInitializedFn = int (*)();
using AddPendingCallFn = int (*)(int (*)(void*), void*);
using ImportModuleFn = void* (*)(const char*);
using ErrClearFn = void (*)();
using DecRefFn = void (*)(void*);

std::atomic<bool> g_scheduled{false};
std::atomic<bool> g_pending_done{false};

int import_auto(void*) {
  // Runs on the interpreter's main thread with the GIL held.
  if (g_pending_done.exchange(true)) return 0;
  auto import = reinterpret_cast<ImportModuleFn>(dlsym(RTLD_DEFAULT, "PyImport_ImportModule"));
  auto clear = reinterpret_cast<ErrClearFn>(dlsym(RTLD_DEFAULT, "PyErr_Clear"));
  auto decref = reinterpret_cast<DecRefFn>(dlsym(RTLD_DEFAULT, "Py_DecRef"));
  if (import == nullptr || clear == nullptr) return 0;
  void* mod = import("gpuacct._auto");
  if (mod == nullptr) {
    clear();  // try: import gpuacct._auto / except: pass
  } else if (decref != nullptr) {
    decref(mod);
  }
  return 0;  // never report an error to the interpreter
}

}  // namespace

void schedule_python_auto_import() {
  auto is_init = reinterpret_cast<IsInitializedFn>(dlsym(RTLD_DEFAULT, "Py_IsInitialized"));
  if (is_init == nullptr || is_init() != 1) return;
  auto add = reinterpret_cast<AddPendingCallFn>(dlsym(RTLD_DEFAULT, "Py_AddPendingCall"));
  if (add == nullptr) return;
  if (g_scheduled.exchange(true)) return;
  if (add(&import_auto, nullptr) != 0) g_scheduled.store(false);
}

}  // namespace gpuacct::inject
