/* A stand-in libgpuacct.so for the Python binding tests: implements the public C API
 * (include/gpuacct/gpuacct.h) by logging every call with a CLOCK_MONOTONIC timestamp.  The log
 * is written at exit to $FAKE_GPUACCT_LOG, and can be read in-process with fake_log().  It lets
 * the tests check what the binding and the auto-instrumentation call without the real library. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <pthread.h>
#include <time.h>

#define MAXE 100000
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static char* lines[MAXE];
static int n;

static void add(const char* what, const char* arg) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  char buf[256];
  snprintf(buf, sizeof buf, "%lld %s %s", (long long)ts.tv_sec * 1000000000LL + ts.tv_nsec, what,
           arg ? arg : "-");
  pthread_mutex_lock(&mu);
  if (n < MAXE) lines[n++] = strdup(buf);
  pthread_mutex_unlock(&mu);
}

int gpuacct_api_version(void) { return 1; }
int gpuacct_is_active(void) { return 0; }
void gpuacct_step_begin(int64_t s) { char b[32]; snprintf(b, sizeof b, "%lld", (long long)s); add("step_begin", b); }
void gpuacct_step_end(void) { add("step_end", NULL); }
void gpuacct_step_mark(int64_t s) { char b[32]; snprintf(b, sizeof b, "%lld", (long long)s); add("step_mark", b); }
void gpuacct_data_push(const char* name) { add("data_push", name); }
void gpuacct_data_pop(void) { add("data_pop", NULL); }
void gpuacct_range_push(const char* name) { add("range_push", name); }
void gpuacct_range_pop(void) { add("range_pop", NULL); }
void gpuacct_set_step_flops(double f) { char b[64]; snprintf(b, sizeof b, "%g", f); add("set_step_flops", b); }
#ifndef FAKE_GPUACCT_NO_STEP_WORK /* -D...: a library built before gpuacct_set_step_work */
void gpuacct_set_step_work(double t, double s) { char b[96]; snprintf(b, sizeof b, "%g,%g", t, s); add("set_step_work", b); }
#endif
void gpuacct_flush(void) { add("flush", NULL); }

/* Test helpers. */
int fake_count(void) { return n; }
const char* fake_line(int i) { return i >= 0 && i < n ? lines[i] : NULL; }

__attribute__((destructor)) static void dump(void) {
  const char* path = getenv("FAKE_GPUACCT_LOG");
  if (!path || !*path) return;
  FILE* f = fopen(path, "w");
  if (!f) return;
  for (int i = 0; i < n; ++i) fprintf(f, "%s\n", lines[i]);
  fclose(f);
}
