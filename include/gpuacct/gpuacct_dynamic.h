/* Header-only, no-link access to an injected libgpuacct.so.
 *
 * The CUDA driver dlopen()s the library named by CUDA_INJECTION64_PATH with local symbol
 * visibility, so its symbols cannot be found with dlsym(RTLD_DEFAULT).  This header re-opens
 * the same path with RTLD_NOLOAD (which returns the already-loaded instance, or NULL) and
 * resolves the C API from it.  When the library is not loaded every call is a cheap no-op.
 *
 * Use: #include <gpuacct/gpuacct_dynamic.h>, then gpuacct_dyn()->step_mark(-1) etc.
 * Link with -ldl on old glibc.
 */
#ifndef GPUACCT_GPUACCT_DYNAMIC_H_
#define GPUACCT_GPUACCT_DYNAMIC_H_

#include <dlfcn.h>
#include <stdint.h>
#include <stdlib.h>

typedef struct gpuacct_dyn_api {
  int loaded; /* 1 when the functions below reach the library */
  void (*step_begin)(int64_t);
  void (*step_end)(void);
  void (*step_mark)(int64_t);
  void (*data_push)(const char*);
  void (*data_pop)(void);
  void (*range_push)(const char*);
  void (*range_pop)(void);
  void (*set_step_flops)(double);
  void (*set_step_work)(double, double);
  void (*flush)(void);
} gpuacct_dyn_api;

static void gpuacct_dyn_noop_i64(int64_t v) { (void)v; }
static void gpuacct_dyn_noop(void) {}
static void gpuacct_dyn_noop_str(const char* s) { (void)s; }
static void gpuacct_dyn_noop_f64(double v) { (void)v; }
static void gpuacct_dyn_noop_f64_f64(double a, double b) { (void)a; (void)b; }

static void* gpuacct_dyn_sym(void* handle, const char* name, void* fallback) {
  void* p = handle ? dlsym(handle, name) : NULL;
  return p ? p : fallback;
}

/* Resolves once per translation unit (not thread-safe on the very first call; call it once
 * from main() before starting threads). */
static inline const gpuacct_dyn_api* gpuacct_dyn(void) {
  static gpuacct_dyn_api api;
  static int resolved = 0;
  if (!resolved) {
    const char* path = getenv("GPUACCT_LIBRARY");
    void* h = path && *path ? dlopen(path, RTLD_NOW | RTLD_NOLOAD) : NULL;
    if (!h) {
      path = getenv("CUDA_INJECTION64_PATH");
      h = path && *path ? dlopen(path, RTLD_NOW | RTLD_NOLOAD) : NULL;
    }
    api.loaded = h != NULL;
    api.step_begin = (void (*)(int64_t))gpuacct_dyn_sym(h, "gpuacct_step_begin", (void*)gpuacct_dyn_noop_i64);
    api.step_end = (void (*)(void))gpuacct_dyn_sym(h, "gpuacct_step_end", (void*)gpuacct_dyn_noop);
    api.step_mark = (void (*)(int64_t))gpuacct_dyn_sym(h, "gpuacct_step_mark", (void*)gpuacct_dyn_noop_i64);
    api.data_push = (void (*)(const char*))gpuacct_dyn_sym(h, "gpuacct_data_push", (void*)gpuacct_dyn_noop_str);
    api.data_pop = (void (*)(void))gpuacct_dyn_sym(h, "gpuacct_data_pop", (void*)gpuacct_dyn_noop);
    api.range_push = (void (*)(const char*))gpuacct_dyn_sym(h, "gpuacct_range_push", (void*)gpuacct_dyn_noop_str);
    api.range_pop = (void (*)(void))gpuacct_dyn_sym(h, "gpuacct_range_pop", (void*)gpuacct_dyn_noop);
    api.set_step_flops = (void (*)(double))gpuacct_dyn_sym(h, "gpuacct_set_step_flops", (void*)gpuacct_dyn_noop_f64);
    api.set_step_work = (void (*)(double, double))gpuacct_dyn_sym(h, "gpuacct_set_step_work", (void*)gpuacct_dyn_noop_f64_f64);
    api.flush = (void (*)(void))gpuacct_dyn_sym(h, "gpuacct_flush", (void*)gpuacct_dyn_noop);
    resolved = 1;
  }
  return &api;
}

#endif /* GPUACCT_GPUACCT_DYNAMIC_H_ */
