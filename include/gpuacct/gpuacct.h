/* gpuacct public C API.
 *
 * libgpuacct.so is normally *injected* (CUDA_INJECTION64_PATH) rather than linked, so a
 * program that wants to mark steps explicitly has two choices:
 *   1. link against libgpuacct.so and call the functions below directly, or
 *   2. include <gpuacct/gpuacct_dynamic.h>, which resolves these symbols at run time from the
 *      already-injected library and turns every call into a no-op when it is absent.
 *
 * Contract shared by every function:
 *   - safe to call from any thread, at any time, before or after the library started;
 *   - never blocks on I/O, never allocates on the calling thread after the first call per
 *     thread, never throws, never aborts;
 *   - when the library is switched off (GPUACCT_ENABLE=0, CUPTI missing, another profiler
 *     subscribed) the calls still record host ranges so a report can say what it saw.
 *
 * Ranges are per thread and must nest (push/pop).  Steps are process-wide: at most one step is
 * open at a time; gpuacct_step_begin while a step is open ends it first.
 */
#ifndef GPUACCT_GPUACCT_H_
#define GPUACCT_GPUACCT_H_

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define GPUACCT_API_VERSION 1

#if defined(__GNUC__)
#define GPUACCT_EXPORT __attribute__((visibility("default")))
#else
#define GPUACCT_EXPORT
#endif

/* Returns GPUACCT_API_VERSION of the loaded library. */
GPUACCT_EXPORT int gpuacct_api_version(void);

/* 1 when the library is collecting GPU activity, 0 when it only records host ranges. */
GPUACCT_EXPORT int gpuacct_is_active(void);

/* Steps.  step_number < 0 numbers the step automatically (previous + 1, starting at 0). */
GPUACCT_EXPORT void gpuacct_step_begin(int64_t step_number);
GPUACCT_EXPORT void gpuacct_step_end(void);
/* Ends the open step (if any) and begins the next one: for loops with one call per iteration. */
GPUACCT_EXPORT void gpuacct_step_mark(int64_t step_number);

/* Data ranges: the calling thread is waiting for input (DataLoader fetch, decode, read). */
GPUACCT_EXPORT void gpuacct_data_push(const char* name);
GPUACCT_EXPORT void gpuacct_data_pop(void);

/* User ranges: shown in reports and timelines, not used for accounting. */
GPUACCT_EXPORT void gpuacct_range_push(const char* name);
GPUACCT_EXPORT void gpuacct_range_pop(void);

/* Model FLOPs of the current step (for MFU); the last value set inside a step wins. */
GPUACCT_EXPORT void gpuacct_set_step_flops(double flops);

/* Work of the current step, for the cost per unit of work (docs/cost.md): the tokens and the
 * samples one step of the whole job processes (the global batch, as GPUACCT_TOKENS_PER_STEP),
 * declared step by step for steps whose work varies.  Calls inside one step add up (gradient
 * accumulation: declare each micro-batch); 0 declares nothing for that unit; a negative or
 * non-finite value is ignored and counted (invalid_events_skipped).  Work declared outside
 * any step is dropped.  Added in API version 1 after its first release: gpuacct_dynamic.h
 * turns it into a no-op on an older library. */
GPUACCT_EXPORT void gpuacct_set_step_work(double tokens, double samples);

/* Ask the library to flush CUPTI buffers and stream finished steps now (non-blocking). */
GPUACCT_EXPORT void gpuacct_flush(void);

/* For the Python instrumentation the library carries (gpuacct._auto): what it instrumented
 * ("torch 2.11.0: optimizer step hook, DataLoader waits"), or why it could not; the report's
 * collection section shows the last text given (at most 400 bytes kept).  Added in API
 * version 1 after its first release. */
GPUACCT_EXPORT void gpuacct_python_status(const char* text);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* GPUACCT_GPUACCT_H_ */
