// LD_PRELOAD shim that simulates a full disk for the files whose path contains a given string,
// for the disk-full tests (tests/diskfull/run_diskfull.py).  Works without root or a tmpfs.
//
//   ENOSPC_SHIM_MATCH=text          only files whose path (/proc/self/fd/N) contains `text`;
//                                   unset: the shim changes nothing
//   ENOSPC_SHIM_BYTES=N             bytes those files may take in total before the disk is full
//                                   (default 0: full from the start); the write that crosses
//                                   the limit is cut short, as on a real file system
//   ENOSPC_SHIM_RECOVER_AFTER=K     after K failed writes the disk has space again (default:
//                                   never), for "space was freed while the job ran"
//
// write, pwrite, pwrite64 and writev fail with ENOSPC.  Streams (fwrite, fputs, fputc,
// fprintf, vfprintf, fflush) are covered too: glibc's stdio flushes through an internal write
// that no LD_PRELOAD can see, so those calls are charged and refused here when the disk is full.
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <sys/uio.h>
#include <unistd.h>

static long long g_left = -1;      // bytes left; -1 unlimited
static long long g_recover = -1;   // failed writes until the disk has space again; -1 never
static const char* g_match = NULL;
static int g_ready = 0;

static void init(void) {
  if (__atomic_load_n(&g_ready, __ATOMIC_ACQUIRE)) return;
  g_match = getenv("ENOSPC_SHIM_MATCH");
  if (g_match != NULL && *g_match != '\0') {
    const char* b = getenv("ENOSPC_SHIM_BYTES");
    const char* r = getenv("ENOSPC_SHIM_RECOVER_AFTER");
    g_left = b != NULL ? atoll(b) : 0;
    g_recover = r != NULL ? atoll(r) : -1;
  } else {
    g_match = NULL;
  }
  __atomic_store_n(&g_ready, 1, __ATOMIC_RELEASE);
}

static int matches(int fd) {
  init();
  if (g_match == NULL || fd < 0) return 0;
  char link[64], path[PATH_MAX];
  snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
  const ssize_t n = readlink(link, path, sizeof path - 1);
  if (n <= 0) return 0;
  path[n] = '\0';
  return strstr(path, g_match) != NULL;
}

// How many of `want` bytes fit; 0 means the disk is full (the caller fails with ENOSPC).
static size_t charge(size_t want) {
  for (;;) {
    long long left = __atomic_load_n(&g_left, __ATOMIC_ACQUIRE);
    if (left < 0) return want;
    if (left == 0) {
      if (__atomic_load_n(&g_recover, __ATOMIC_ACQUIRE) >= 0 &&
          __atomic_sub_fetch(&g_recover, 1, __ATOMIC_ACQ_REL) == 0) {
        __atomic_store_n(&g_left, -1, __ATOMIC_RELEASE);  // space again from the next write
      }
      return 0;
    }
    const long long take = (long long)want < left ? (long long)want : left;
    if (__atomic_compare_exchange_n(&g_left, &left, left - take, 0, __ATOMIC_ACQ_REL,
                                    __ATOMIC_ACQUIRE)) {
      return (size_t)take;
    }
  }
}

// The next definition of `name` (libc's), looked up once; racing threads store the same value.
#define REAL(name)                                                   \
  static __typeof__(&name) real_##name##_p = NULL;                   \
  __typeof__(&name) real_##name = __atomic_load_n(&real_##name##_p, __ATOMIC_ACQUIRE); \
  if (real_##name == NULL) {                                         \
    void* sym_ = dlsym(RTLD_NEXT, #name); /* ISO C: copied, not cast */ \
    memcpy(&real_##name, &sym_, sizeof sym_);                        \
    __atomic_store_n(&real_##name##_p, real_##name, __ATOMIC_RELEASE); \
  }

ssize_t write(int fd, const void* buf, size_t n) {
  REAL(write);
  if (n == 0 || !matches(fd)) return real_write(fd, buf, n);
  const size_t ok = charge(n);
  if (ok == 0) {
    errno = ENOSPC;
    return -1;
  }
  return real_write(fd, buf, ok);
}

ssize_t pwrite(int fd, const void* buf, size_t n, off_t off) {
  REAL(pwrite);
  if (n == 0 || !matches(fd)) return real_pwrite(fd, buf, n, off);
  const size_t ok = charge(n);
  if (ok == 0) {
    errno = ENOSPC;
    return -1;
  }
  return real_pwrite(fd, buf, ok, off);
}

ssize_t pwrite64(int fd, const void* buf, size_t n, off_t off) {
  return pwrite(fd, buf, n, off);
}

ssize_t writev(int fd, const struct iovec* iov, int cnt) {
  REAL(writev);
  if (!matches(fd)) return real_writev(fd, iov, cnt);
  size_t total = 0;
  for (int i = 0; i < cnt; ++i) total += iov[i].iov_len;
  if (total == 0) return real_writev(fd, iov, cnt);
  size_t ok = charge(total);
  if (ok == 0) {
    errno = ENOSPC;
    return -1;
  }
  ssize_t done = 0;  // the first `ok` bytes, piece by piece
  for (int i = 0; i < cnt && ok > 0; ++i) {
    const size_t part = iov[i].iov_len < ok ? iov[i].iov_len : ok;
    struct iovec one = {iov[i].iov_base, part};
    const ssize_t r = real_writev(fd, &one, 1);
    if (r < 0) return done > 0 ? done : -1;
    done += r;
    ok -= part;
  }
  return done;
}

// ---- streams --------------------------------------------------------------------------------

static int stream_refused(FILE* f, size_t n) {
  if (!matches(fileno(f))) return 0;
  if (charge(n) == n) return 0;
  errno = ENOSPC;
  return 1;
}

size_t fwrite(const void* p, size_t size, size_t count, FILE* f) {
  REAL(fwrite);
  if (size * count > 0 && stream_refused(f, size * count)) return 0;
  return real_fwrite(p, size, count, f);
}

int fputs(const char* s, FILE* f) {
  REAL(fputs);
  if (stream_refused(f, strlen(s))) return EOF;
  return real_fputs(s, f);
}

int fputc(int c, FILE* f) {
  REAL(fputc);
  if (stream_refused(f, 1)) return EOF;
  return real_fputc(c, f);
}

int vfprintf(FILE* f, const char* fmt, va_list ap) {
  REAL(vfprintf);
  if (matches(fileno(f))) {
    va_list copy;
    va_copy(copy, ap);
    const int n = vsnprintf(NULL, 0, fmt, copy);
    va_end(copy);
    if (n > 0 && stream_refused(f, (size_t)n)) return -1;
  }
  return real_vfprintf(f, fmt, ap);
}

int fprintf(FILE* f, const char* fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  const int r = vfprintf(f, fmt, ap);
  va_end(ap);
  return r;
}

int fflush(FILE* f) {
  REAL(fflush);
  if (f != NULL && matches(fileno(f)) && __atomic_load_n(&g_left, __ATOMIC_ACQUIRE) == 0) {
    errno = ENOSPC;
    return EOF;
  }
  return real_fflush(f);
}
