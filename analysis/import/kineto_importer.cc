#include "analysis/import/kineto_importer.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <deque>
#include <limits>
#include <unordered_map>
#include <vector>

#include <nlohmann/json.hpp>

#include "analysis/import/byte_source.h"
#include "analysis/model/nccl_names.h"

namespace gpuacct {
namespace {

constexpr size_t kChunkBytes = size_t{1} << 20;       // read granularity
constexpr size_t kMaxValueBytes = size_t{256} << 20;  // largest single event / top-level value
constexpr int kMaxDepth = 128;                        // JSON nesting limit (stack safety)
constexpr size_t kFlowMemory = 1 << 16;               // recent ac2g flows kept for fallback
constexpr size_t kMaxPending = 1 << 16;               // events waiting for their flow

bool starts_with(std::string_view s, std::string_view p) {
  return s.substr(0, p.size()) == p;
}

// ---------------------------------------------------------------------------------------------
// Exact decimal -> integer conversion.

// 128-bit integers (GCC/Clang) hold a timestamp at 1e-9 ns resolution: enough to add `ts` and
// `dur` exactly before rounding their sum to whole nanoseconds.
__extension__ typedef __int128 Int128;
__extension__ typedef unsigned __int128 UInt128;

// Parses a JSON number into round(value * 10^scale), exactly (no binary floating point),
// rounding half away from zero.  Returns false on a syntax error or when the integer part has
// more than `max_digits` digits (the caller's integer type could overflow).  `exact`
// (optional) is set when no non-zero digit was rounded away.
template <typename Unsigned>
bool parse_scaled_digits(std::string_view t, int scale, int max_digits, Unsigned* magnitude,
                         bool* negative, bool* exact) {
  size_t i = 0;
  bool neg = false;
  if (i < t.size() && (t[i] == '-' || t[i] == '+')) {
    neg = t[i] == '-';
    ++i;
  }
  // Collect significant digits (leading zeros dropped) and the decimal exponent.
  char digits[40];
  int nd = 0;          // digits kept
  int dropped_nz = 0;  // non-zero digits beyond the kept ones
  int point = 0;       // position of the decimal point relative to digits[0]
  bool any = false, seen_point = false;
  for (; i < t.size(); ++i) {
    char c = t[i];
    if (c >= '0' && c <= '9') {
      any = true;
      if (nd == 0 && c == '0') {
        if (seen_point) --point;
        continue;
      }
      if (nd < 40) {
        digits[nd++] = c;
        if (!seen_point) ++point;
      } else {
        if (c != '0') dropped_nz = 1;
        if (!seen_point) ++point;
      }
    } else if (c == '.' && !seen_point) {
      seen_point = true;
    } else {
      break;
    }
  }
  if (!any) return false;
  if (i < t.size() && (t[i] == 'e' || t[i] == 'E')) {
    ++i;
    bool eneg = false;
    if (i < t.size() && (t[i] == '-' || t[i] == '+')) {
      eneg = t[i] == '-';
      ++i;
    }
    if (i >= t.size()) return false;
    int64_t e = 0;
    for (; i < t.size() && t[i] >= '0' && t[i] <= '9'; ++i) {
      if (e < 100000) e = e * 10 + (t[i] - '0');
    }
    point += static_cast<int>(eneg ? -e : e);
  }
  if (i != t.size()) return false;
  *negative = neg;
  // value = 0.d1d2d3... * 10^point; we want the integer part of value * 10^scale.
  const int64_t int_digits = int64_t{point} + scale;
  if (nd == 0) {
    *magnitude = 0;
    if (exact) *exact = true;
    return true;
  }
  if (int_digits > max_digits) return false;
  Unsigned v = 0;
  for (int64_t k = 0; k < int_digits; ++k) {
    v = v * 10 + static_cast<Unsigned>(k < nd ? digits[k] - '0' : 0);
  }
  // Round half away from zero on the first dropped digit.
  bool rest_nz = dropped_nz != 0;
  int round_digit = 0;
  if (int_digits < 0) {
    rest_nz = true;  // every digit lies below the rounding position: |value| < 0.1 unit
  } else if (int_digits < nd) {
    round_digit = digits[int_digits] - '0';
    for (int64_t k = int_digits + 1; k < nd; ++k) rest_nz |= digits[k] != '0';
  }
  if (round_digit >= 5) v += 1;
  if (exact) *exact = round_digit == 0 && !rest_nz;
  *magnitude = v;
  return true;
}

// round(value * 10^scale) as int64.  At most 19 integer digits: fits in uint64 (< 1.8e19)
// even after rounding up.
bool parse_scaled(std::string_view t, int scale, int64_t* out, bool* exact) {
  uint64_t v = 0;
  bool neg = false;
  if (!parse_scaled_digits(t, scale, 19, &v, &neg, exact)) return false;
  if (v > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) return false;
  *out = neg ? -static_cast<int64_t>(v) : static_cast<int64_t>(v);
  return true;
}

// Microseconds at 1e-9 ns resolution (scale 10^12): at most 37 integer digits, far inside the
// 128-bit range, so two of them add without overflow.
bool parse_us_fine(std::string_view t, Int128* out) {
  UInt128 v = 0;
  bool neg = false;
  if (!parse_scaled_digits(t, 12, 37, &v, &neg, nullptr)) return false;
  *out = neg ? -static_cast<Int128>(v) : static_cast<Int128>(v);
  return true;
}

// Fine units (1e-9 ns) -> whole ns, half away from zero; false outside int64.
bool fine_to_ns(Int128 fine, int64_t* ns) {
  constexpr Int128 kPerNs = 1'000'000'000;
  const Int128 half = kPerNs / 2;
  const Int128 q = fine >= 0 ? (fine + half) / kPerNs : -((-fine + half) / kPerNs);
  if (q > std::numeric_limits<int64_t>::max() || q < std::numeric_limits<int64_t>::min())
    return false;
  *ns = static_cast<int64_t>(q);
  return true;
}

// An X event's [start, end) in ns.  The end is ts + dur rounded once, not round(ts) +
// round(dur): two consecutive events that Kineto wrote touching (ProfilerStep#N ends where #N+1
// begins) must not overlap by a rounding nanosecond.  The start is round(ts), exactly as
// parse_us_to_ns (flows are matched on it).  False on bad syntax, a negative dur or overflow.
bool parse_span_ns(std::string_view ts_text, std::string_view dur_text, int64_t* start,
                   int64_t* end) {
  Int128 ts_fine = 0, dur_fine = 0;
  if (!parse_scaled(ts_text, 3, start, nullptr) || !parse_us_fine(ts_text, &ts_fine) ||
      !parse_us_fine(dur_text, &dur_fine) || dur_fine < 0 || !fine_to_ns(ts_fine + dur_fine, end)) {
    return false;
  }
  // Rounding at 1e-9 ns first can move the end of a zero-length event by a nanosecond
  // against the exactly rounded start only for 13+ decimals; never let it end first.
  *end = std::max(*end, *start);
  return true;
}

bool parse_int(std::string_view t, int64_t* out) {
  bool exact = false;
  return parse_scaled(t, 0, out, &exact) && exact;
}

// ---------------------------------------------------------------------------------------------
// In-memory JSON scanning over a buffer that may end mid-value (kNeedMore: read more, retry).

enum class PR : uint8_t { kOk, kNeedMore, kSyntax };

struct Cur {
  const char* p;
  const char* end;
};

inline bool is_ws(char c) {
  return c == ' ' || c == '\n' || c == '\r' || c == '\t';
}

inline PR skip_ws(Cur& c) {
  while (c.p < c.end && is_ws(*c.p)) ++c.p;
  return c.p < c.end ? PR::kOk : PR::kNeedMore;
}

struct SyntaxError {
  const char* at = nullptr;
  const char* what = "";
};

// A value read from an event: strings are views into the buffer or into per-event scratch.
enum class VType : uint8_t { kNone, kString, kNumber, kOther };
struct Val {
  VType type = VType::kNone;
  std::string_view text;  // string contents (decoded) or number text
};

class Scanner {
 public:
  SyntaxError err;
  std::deque<std::string> scratch;  // decoded strings with escapes; stable addresses
  size_t scratch_used = 0;

  PR fail(const char* at, const char* what) {
    err.at = at;
    err.what = what;
    return PR::kSyntax;
  }

  static void put_utf8(std::string& s, uint32_t cp) {
    if (cp < 0x80) {
      s.push_back(static_cast<char>(cp));
    } else if (cp < 0x800) {
      s.push_back(static_cast<char>(0xC0 | (cp >> 6)));
      s.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
    } else if (cp < 0x10000) {
      s.push_back(static_cast<char>(0xE0 | (cp >> 12)));
      s.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
      s.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
    } else {
      s.push_back(static_cast<char>(0xF0 | (cp >> 18)));
      s.push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
      s.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
      s.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
    }
  }

  static int hexval(char ch) {
    if (ch >= '0' && ch <= '9') return ch - '0';
    if (ch >= 'a' && ch <= 'f') return ch - 'a' + 10;
    if (ch >= 'A' && ch <= 'F') return ch - 'A' + 10;
    return -1;
  }

  // c.p at the opening quote.  `decode`: produce the text (else only skip).
  PR string(Cur& c, std::string_view* out, bool decode) {
    const char* start = c.p + 1;
    const char* q = start;
    // Fast path: find the first '"' or '\\' eight bytes at a time (SWAR).
    constexpr uint64_t kOnes = 0x0101010101010101ull, kHigh = 0x8080808080808080ull;
    constexpr uint64_t kQuote = kOnes * '"', kSlash = kOnes * '\\';
    while (c.end - q >= 8) {
      uint64_t w;
      std::memcpy(&w, q, 8);
      const uint64_t a = w ^ kQuote, b = w ^ kSlash;
      const uint64_t hit = ((a - kOnes) & ~a & kHigh) | ((b - kOnes) & ~b & kHigh);
      if (hit) {
        q += __builtin_ctzll(hit) / 8;
        break;
      }
      q += 8;
    }
    while (q < c.end && *q != '"' && *q != '\\') ++q;
    if (q >= c.end) return PR::kNeedMore;
    if (*q == '"') {
      if (out) *out = std::string_view(start, static_cast<size_t>(q - start));
      c.p = q + 1;
      return PR::kOk;
    }
    const char* bs = q;
    // Slow path: escapes.
    std::string* s = nullptr;
    if (decode) {
      if (scratch_used == scratch.size()) scratch.emplace_back();
      s = &scratch[scratch_used++];
      s->assign(start, bs);
    }
    while (true) {
      if (q >= c.end) return PR::kNeedMore;
      char ch = *q;
      if (ch == '"') break;
      if (ch != '\\') {
        if (s) s->push_back(ch);
        ++q;
        continue;
      }
      if (q + 1 >= c.end) return PR::kNeedMore;
      char e = q[1];
      q += 2;
      switch (e) {
        case '"':
          if (s) s->push_back('"');
          break;
        case '\\':
          if (s) s->push_back('\\');
          break;
        case '/':
          if (s) s->push_back('/');
          break;
        case 'b':
          if (s) s->push_back('\b');
          break;
        case 'f':
          if (s) s->push_back('\f');
          break;
        case 'n':
          if (s) s->push_back('\n');
          break;
        case 'r':
          if (s) s->push_back('\r');
          break;
        case 't':
          if (s) s->push_back('\t');
          break;
        case 'u': {
          if (c.end - q < 4) return PR::kNeedMore;
          uint32_t cp = 0;
          for (int k = 0; k < 4; ++k) {
            int h = hexval(q[k]);
            if (h < 0) return fail(q + k, "invalid \\u escape in string");
            cp = cp * 16 + static_cast<uint32_t>(h);
          }
          q += 4;
          if (cp >= 0xD800 && cp < 0xDC00) {
            // High surrogate: pair with a following \uDC00-\uDFFF if present.
            if (c.end - q < 6) {
              // Could be a pair split by the buffer end; ask for more unless at true end.
              if (c.end - q < 6 && (c.end - q == 0 || q[0] == '\\')) return PR::kNeedMore;
            }
            if (c.end - q >= 6 && q[0] == '\\' && q[1] == 'u') {
              uint32_t lo = 0;
              bool ok = true;
              for (int k = 0; k < 4; ++k) {
                int h = hexval(q[2 + k]);
                if (h < 0) {
                  ok = false;
                  break;
                }
                lo = lo * 16 + static_cast<uint32_t>(h);
              }
              if (ok && lo >= 0xDC00 && lo < 0xE000) {
                cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
                q += 6;
              } else {
                cp = 0xFFFD;
              }
            } else {
              cp = 0xFFFD;
            }
          } else if (cp >= 0xDC00 && cp < 0xE000) {
            cp = 0xFFFD;  // lone low surrogate
          }
          if (s) put_utf8(*s, cp);
          break;
        }
        default:
          return fail(q - 1, "invalid escape in string");
      }
    }
    if (out) *out = s ? std::string_view(*s) : std::string_view();
    c.p = q + 1;
    return PR::kOk;
  }

  PR number(Cur& c, std::string_view* out) {
    const char* s = c.p;
    const char* q = s;
    while (q < c.end) {
      char ch = *q;
      if ((ch >= '0' && ch <= '9') || ch == '-' || ch == '+' || ch == '.' || ch == 'e' ||
          ch == 'E') {
        ++q;
      } else {
        break;
      }
    }
    if (q == c.end) return PR::kNeedMore;  // the number may continue in the next chunk
    // Validate the JSON number grammar loosely (parse_scaled does the rest).
    if (q == s) return fail(s, "invalid value");
    const char* d = s;
    if (*d == '-') ++d;
    if (d == q || !(*d >= '0' && *d <= '9')) return fail(s, "invalid number");
    if (out) *out = std::string_view(s, static_cast<size_t>(q - s));
    c.p = q;
    return PR::kOk;
  }

  PR literal(Cur& c) {
    static constexpr std::string_view kLits[] = {"true", "false", "null"};
    for (std::string_view lit : kLits) {
      if (*c.p != lit[0]) continue;
      size_t avail = static_cast<size_t>(c.end - c.p);
      if (avail < lit.size()) {
        if (std::string_view(c.p, avail) == lit.substr(0, avail)) return PR::kNeedMore;
        return fail(c.p, "invalid literal");
      }
      if (std::string_view(c.p, lit.size()) != lit) return fail(c.p, "invalid literal");
      c.p += lit.size();
      return PR::kOk;
    }
    return fail(c.p, "invalid value");
  }

  // Any value; c.p at its first byte (not whitespace).
  PR skip_value(Cur& c, int depth) {
    if (depth > kMaxDepth) return fail(c.p, "JSON nested too deeply");
    char ch = *c.p;
    if (ch == '"') return string(c, nullptr, false);
    if (ch == '{' || ch == '[') {
      const char close = ch == '{' ? '}' : ']';
      ++c.p;
      PR r = skip_ws(c);
      if (r != PR::kOk) return r;
      if (*c.p == close) {
        ++c.p;
        return PR::kOk;
      }
      for (;;) {
        if (close == '}') {
          if (*c.p != '"') return fail(c.p, "expected a string key");
          if ((r = string(c, nullptr, false)) != PR::kOk) return r;
          if ((r = skip_ws(c)) != PR::kOk) return r;
          if (*c.p != ':') return fail(c.p, "expected ':' after key");
          ++c.p;
          if ((r = skip_ws(c)) != PR::kOk) return r;
        }
        if ((r = skip_value(c, depth + 1)) != PR::kOk) return r;
        if ((r = skip_ws(c)) != PR::kOk) return r;
        if (*c.p == ',') {
          ++c.p;
          if ((r = skip_ws(c)) != PR::kOk) return r;
          continue;
        }
        if (*c.p == close) {
          ++c.p;
          return PR::kOk;
        }
        return fail(
            c.p, close == '}' ? "expected ',' or '}' in object" : "expected ',' or ']' in array");
      }
    }
    if (ch == '-' || (ch >= '0' && ch <= '9')) return number(c, nullptr);
    return literal(c);
  }

  // Reads a scalar into `v` (strings decoded, numbers as text); containers are skipped.
  PR value(Cur& c, Val* v) {
    char ch = *c.p;
    if (ch == '"') {
      v->type = VType::kString;
      return string(c, &v->text, true);
    }
    if (ch == '-' || (ch >= '0' && ch <= '9')) {
      v->type = VType::kNumber;
      return number(c, &v->text);
    }
    v->type = VType::kOther;
    return skip_value(c, 1);
  }

  // Iterates an object's members; `on_member(key, cur)` must consume the value.
  template <typename F>
  PR object(Cur& c, F&& on_member) {
    ++c.p;  // '{'
    PR r = skip_ws(c);
    if (r != PR::kOk) return r;
    if (*c.p == '}') {
      ++c.p;
      return PR::kOk;
    }
    for (;;) {
      if (*c.p != '"') return fail(c.p, "expected a string key");
      std::string_view key;
      if ((r = string(c, &key, true)) != PR::kOk) return r;
      if ((r = skip_ws(c)) != PR::kOk) return r;
      if (*c.p != ':') return fail(c.p, "expected ':' after key");
      ++c.p;
      if ((r = skip_ws(c)) != PR::kOk) return r;
      if ((r = on_member(key, c)) != PR::kOk) return r;
      if ((r = skip_ws(c)) != PR::kOk) return r;
      if (*c.p == ',') {
        ++c.p;
        if ((r = skip_ws(c)) != PR::kOk) return r;
        continue;
      }
      if (*c.p == '}') {
        ++c.p;
        return PR::kOk;
      }
      return fail(c.p, "expected ',' or '}' in object");
    }
  }
};

// ---------------------------------------------------------------------------------------------
// One trace event, as read.

struct RawEvent {
  Val ph, cat, name, ts, dur, pid, tid, id, bp;
  bool args_is_object = false;
  bool has_args = false;
  Val device, stream, correlation, bytes, collective, graph_id;
  void clear() { *this = RawEvent(); }
};

enum class CatKind : uint8_t {
  kUnknown,
  kIgnored,
  kKernel,
  kMemcpy,
  kMemset,
  kRuntime,
  kUserAnnotation,
  kCpuOp,
  kFlow,
  kCudaSync,          // when a host or stream waited: only for KinetoImportOptions::on_cuda_sync
  kOtherAccelerator,  // another accelerator's activity (MTIA, XPU, HPU, ...): not supported
};

// Kineto's activity categories of accelerators other than CUDA GPUs (libkineto ActivityType
// names: mtia_runtime, mtia_ccp_events, mtia_insight, xpu_runtime, xpu_driver, hpu_op,
// privateuse1_runtime, glow_runtime, and vendor forks' mlu_* / gcu_*).
bool is_other_accelerator_cat(std::string_view cat) {
  for (std::string_view p : {"mtia_", "xpu_", "hpu_", "mlu_", "gcu_", "privateuse1_", "glow_"}) {
    if (starts_with(cat, p)) return true;
  }
  return false;
}

CatKind classify_cat(std::string_view cat) {
  if (cat == "kernel" || cat == "Kernel") return CatKind::kKernel;
  if (cat == "cuda_runtime" || cat == "cuda_driver" || cat == "Runtime") return CatKind::kRuntime;
  if (cat == "cpu_op" || cat == "Operator") return CatKind::kCpuOp;
  if (cat == "gpu_memcpy" || cat == "Memcpy") return CatKind::kMemcpy;
  if (cat == "gpu_memset" || cat == "Memset") return CatKind::kMemset;
  if (cat == "user_annotation") return CatKind::kUserAnnotation;
  if (cat == "ac2g" || cat == "async_cpu_to_gpu") return CatKind::kFlow;
  if (cat == "cuda_sync") return CatKind::kCudaSync;
  static constexpr std::string_view kIgnored[] = {
      "gpu_user_annotation", "python_function", "fwdbwd", "Trace", "cpu_instant_event",
      "cuda_profiler_range", "overhead",        "Python", "Mark",  "gpu_op",
      "ProfilerStep",
  };
  for (std::string_view k : kIgnored) {
    if (cat == k) return CatKind::kIgnored;
  }
  if (is_other_accelerator_cat(cat)) return CatKind::kOtherAccelerator;
  return CatKind::kUnknown;
}

HostApiKind classify_api(std::string_view n) {
  if (starts_with(n, "cudaLaunchKernel") || starts_with(n, "cuLaunchKernel") ||
      starts_with(n, "cudaLaunchCooperativeKernel") ||
      starts_with(n, "cuLaunchCooperativeKernel") || starts_with(n, "cudaGraphLaunch") ||
      starts_with(n, "cuGraphLaunch"))
    return HostApiKind::kLaunch;
  if (starts_with(n, "cudaMemcpy") || starts_with(n, "cudaMemset") || starts_with(n, "cuMemcpy") ||
      starts_with(n, "cuMemset"))
    return HostApiKind::kCopy;
  // Blocking syncs: the calls that make the host wait for the GPU (cudaDeviceSynchronize,
  // cudaStreamSynchronize, cudaEventSynchronize, cuCtxSynchronize, ...).  cudaStreamWaitEvent /
  // cuStreamWaitEvent are not: they make a stream wait on the device and return at once
  // (cuda_runtime_api.h: "performed efficiently on the device").
  if (n.find("Synchronize") != std::string_view::npos) return HostApiKind::kSync;
  return HostApiKind::kOther;
}

CopyDir copy_dir_from_name(std::string_view n) {
  if (n.find("HtoD") != std::string_view::npos) return CopyDir::kH2D;
  if (n.find("DtoH") != std::string_view::npos) return CopyDir::kD2H;
  if (n.find("DtoD") != std::string_view::npos) return CopyDir::kD2D;
  if (n.find("PtoP") != std::string_view::npos) return CopyDir::kP2P;
  if (n.find("HtoH") != std::string_view::npos) return CopyDir::kH2H;
  return CopyDir::kNone;
}

// "ProfilerStep#12" (also "ProfilerStep #12", as HTA's regex allows) -> 12; -1 if no number.
bool profiler_step_number(std::string_view n, int64_t* number) {
  if (!starts_with(n, "ProfilerStep")) return false;
  size_t i = 12;
  while (i < n.size() && n[i] == ' ') ++i;
  *number = -1;
  if (i < n.size() && n[i] == '#') {
    ++i;
    while (i < n.size() && n[i] == ' ') ++i;
    size_t j = i;
    while (j < n.size() && n[j] >= '0' && n[j] <= '9') ++j;
    int64_t v = 0;
    if (j > i && j - i <= 18 && parse_int(n.substr(i, j - i), &v)) *number = v;
  }
  return true;
}

bool is_data_range(std::string_view n) {
  return starts_with(n, "enumerate(DataLoader)#") || starts_with(n, "enumerate(DataPipe)#");
}

// ---------------------------------------------------------------------------------------------

struct FlowKey {
  int64_t pid, tid, ts;
  bool operator==(const FlowKey& o) const { return pid == o.pid && tid == o.tid && ts == o.ts; }
};
struct FlowKeyHash {
  size_t operator()(const FlowKey& k) const {
    uint64_t h = static_cast<uint64_t>(k.ts) * 0x9E3779B97F4A7C15ull;
    h ^= static_cast<uint64_t>(k.pid) + 0x7F4A7C159E3779B9ull + (h << 6) + (h >> 2);
    h ^= static_cast<uint64_t>(k.tid) + 0x1234567ull + (h << 6) + (h >> 2);
    return static_cast<size_t>(h);
  }
};

class Importer {
 public:
  Importer(ByteSource& src, NameTable& names, EventSink& sink, Stats& stats,
           const KinetoImportOptions& opts)
      : src_(src), names_(names), sink_(sink), stats_(stats), opts_(opts) {
    // Small inputs (tests, the fuzzer) get a small buffer; it grows on demand.
    size_t initial = kChunkBytes;
    const uint64_t total = src_.raw_total();
    if (total > 0 && total < kChunkBytes) {
      initial = std::max<size_t>(4096, static_cast<size_t>(total) * (src_.compressed() ? 4 : 2));
      initial = std::min(initial, kChunkBytes);
    }
    buf_.resize(initial);
    show_progress_ = opts_.progress && ::isatty(STDERR_FILENO);
  }

  Status run(RunMetadata* meta);

 private:
  // Buffer management -------------------------------------------------------------------------
  // Moves [pos_, len_) to the front and reads more.  False at end of data.
  Status refill(bool* more) {
    *more = false;
    if (pos_ > 0) {
      std::memmove(buf_.data(), buf_.data() + pos_, len_ - pos_);
      base_ += pos_;
      len_ -= pos_;
      pos_ = 0;
    }
    if (eof_) return Status::Ok();
    if (len_ >= buf_.size() / 2) {
      // The value being parsed fills half the buffer: grow (a single huge event).
      if (buf_.size() >= kMaxValueBytes) {
        return Status::Error("a single JSON value starting at byte offset " +
                             std::to_string(base_) + " is larger than " +
                             std::to_string(kMaxValueBytes >> 20) + " MiB (event index " +
                             std::to_string(event_index_) + "); not a Kineto trace?");
      }
      buf_.resize(std::min(buf_.size() * 2, kMaxValueBytes));
    }
    while (len_ < buf_.size()) {
      size_t got = 0;
      GPUACCT_RETURN_IF_ERROR(src_.read(buf_.data() + len_, buf_.size() - len_, &got));
      if (got == 0) {
        eof_ = true;
        break;
      }
      len_ += got;
      *more = true;
      if (len_ >= buf_.size() / 2) break;  // enough for now; keep reads chunk-sized
    }
    progress(false);
    return Status::Ok();
  }

  uint64_t offset_of(const char* p) const { return base_ + static_cast<uint64_t>(p - buf_.data()); }

  Status syntax_error(const char* what_prefix = nullptr) {
    std::string msg = "invalid JSON at byte offset " + std::to_string(offset_of(scan_.err.at));
    if (src_.compressed()) msg += " (of the decompressed text)";
    msg += ": ";
    msg += what_prefix ? what_prefix : "";
    msg += scan_.err.what;
    if (in_events_) msg += " (in traceEvents element " + std::to_string(event_index_) + ")";
    return Status::Error(msg);
  }

  Status truncated_error(const char* where) {
    std::string msg = "unexpected end of input at byte offset " + std::to_string(base_ + len_);
    if (src_.compressed()) msg += " (of the decompressed text)";
    msg += " while reading ";
    msg += where;
    if (in_events_) msg += " (traceEvents element " + std::to_string(event_index_) + ")";
    msg += ": the file is truncated or not a complete JSON document";
    return Status::Error(msg);
  }

  // Runs `attempt` on the buffered text from pos_, reading more until it completes.
  template <typename F>
  Status with_refill(const char* what, F&& attempt) {
    for (;;) {
      Cur c{buf_.data() + pos_, buf_.data() + len_};
      scan_.scratch_used = 0;
      PR r = c.p < c.end ? attempt(c) : PR::kNeedMore;
      if (r == PR::kOk) {
        pos_ = static_cast<size_t>(c.p - buf_.data());
        return Status::Ok();
      }
      if (r == PR::kSyntax) return syntax_error();
      bool more = false;
      GPUACCT_RETURN_IF_ERROR(refill(&more));
      if (!more) return truncated_error(what);
    }
  }

  // Skips whitespace across chunks; *at_end when the input ends.
  Status next_nonws(bool* at_end) {
    *at_end = false;
    for (;;) {
      while (pos_ < len_ && is_ws(buf_[pos_])) ++pos_;
      if (pos_ < len_) return Status::Ok();
      bool more = false;
      GPUACCT_RETURN_IF_ERROR(refill(&more));
      if (!more && pos_ >= len_) {
        *at_end = true;
        return Status::Ok();
      }
    }
  }

  void progress(bool final) {
    if (!show_progress_) return;
    const auto now = std::chrono::steady_clock::now();
    if (!final && now - last_progress_ < std::chrono::milliseconds(250)) return;
    last_progress_ = now;
    const double mib = 1024.0 * 1024.0;
    const uint64_t done = src_.raw_consumed(), total = src_.raw_total();
    if (total > 0) {
      std::fprintf(stderr, "\rgpuacct: reading trace %.1f / %.1f MiB (%3.0f%%), %llu events",
                   static_cast<double>(done) / mib, static_cast<double>(total) / mib,
                   100.0 * static_cast<double>(done) / static_cast<double>(total),
                   static_cast<unsigned long long>(event_index_));
    } else {
      std::fprintf(stderr, "\rgpuacct: reading trace %.1f MiB", static_cast<double>(done) / mib);
    }
    if (final) std::fputc('\n', stderr);
    std::fflush(stderr);
  }

  // Parsing ----------------------------------------------------------------------------------
  Status parse_top_object();
  Status parse_events_array();
  Status parse_small_json(const char* what, nlohmann::json* out);
  PR parse_event(Cur& c);
  PR parse_args(Cur& c);
  void handle_event();
  void map_x_event(CatKind kind);
  void handle_flow();
  void emit_gpu(GpuOp op, const FlowKey& key, bool need_corr);
  void emit_api(HostApiCall call, const FlowKey& key, bool need_corr);
  void emit_cuda_sync(int64_t ts, int64_t end, std::string_view name, int64_t pid, bool pid_ok);
  void skip_event() { stats_.add(Stat::importer_events_skipped); }
  void apply_metadata(const std::string& key, const nlohmann::json& v, RunMetadata* meta);
  // Counts another accelerator's events by category; at most kMaxAcceleratorCategories names
  // are kept (crafted input could invent endless ones), the rest are counted together.
  void count_other_accelerator(std::string_view cat) {
    constexpr size_t kMaxAcceleratorCategories = 32;
    auto it = other_accelerator_.find(std::string(cat));
    if (it == other_accelerator_.end()) {
      const bool room = other_accelerator_.size() < kMaxAcceleratorCategories;
      it = other_accelerator_.emplace(room ? std::string(cat) : "(other categories)", 0).first;
    }
    ++it->second;
  }
  void flush_pending();

  ByteSource& src_;
  NameTable& names_;
  EventSink& sink_;
  Stats& stats_;
  KinetoImportOptions opts_;
  bool show_progress_ = false;
  std::chrono::steady_clock::time_point last_progress_{};

  std::vector<char> buf_;
  size_t pos_ = 0, len_ = 0;
  uint64_t base_ = 0;
  bool eof_ = false;

  Scanner scan_;
  RawEvent ev_;
  uint64_t event_index_ = 0;
  bool in_events_ = false;
  bool saw_events_ = false;
  uint64_t object_events_ = 0;
  int64_t host_pid_ = 0;
  bool need_flows_ = false;
  RunMetadata* meta_ = nullptr;

  // ac2g fallback: recent flows by (pid, tid, ts), and events waiting for their flow.
  std::unordered_map<FlowKey, uint64_t, FlowKeyHash> flows_;
  std::deque<FlowKey> flow_order_;
  struct Pending {
    bool is_gpu;
    GpuOp op;
    HostApiCall call;
  };
  std::unordered_map<FlowKey, Pending, FlowKeyHash> pending_;
  std::deque<FlowKey> pending_order_;
  std::unordered_map<std::string, int64_t> other_accelerator_;
};

PR Importer::parse_args(Cur& c) {
  return scan_.object(c, [&](std::string_view key, Cur& cc) -> PR {
    Val* dst = nullptr;
    switch (key.size()) {
      case 5:
        if (key == "bytes") dst = &ev_.bytes;
        break;
      case 6:
        if (key == "device")
          dst = &ev_.device;
        else if (key == "stream")
          dst = &ev_.stream;
        break;
      case 8:
        if (key == "graph id") dst = &ev_.graph_id;
        break;
      case 11:
        if (key == "correlation") dst = &ev_.correlation;
        break;
      case 15:
        if (key == "Collective name") dst = &ev_.collective;
        break;
      default:
        break;
    }
    if (dst) return scan_.value(cc, dst);
    return scan_.skip_value(cc, 2);
  });
}

PR Importer::parse_event(Cur& c) {
  ev_.clear();
  return scan_.object(c, [&](std::string_view key, Cur& cc) -> PR {
    Val* dst = nullptr;
    switch (key.size()) {
      case 2:
        if (key == "ph")
          dst = &ev_.ph;
        else if (key == "ts")
          dst = &ev_.ts;
        else if (key == "id")
          dst = &ev_.id;
        else if (key == "bp")
          dst = &ev_.bp;
        break;
      case 3:
        if (key == "cat")
          dst = &ev_.cat;
        else if (key == "dur")
          dst = &ev_.dur;
        else if (key == "pid")
          dst = &ev_.pid;
        else if (key == "tid")
          dst = &ev_.tid;
        break;
      case 4:
        if (key == "name")
          dst = &ev_.name;
        else if (key == "args") {
          ev_.has_args = true;
          if (*cc.p == '{') {
            ev_.args_is_object = true;
            return parse_args(cc);
          }
          return scan_.skip_value(cc, 1);
        }
        break;
      default:
        break;
    }
    if (dst) return scan_.value(cc, dst);
    return scan_.skip_value(cc, 1);
  });
}

bool num_i64(const Val& v, int64_t* out) {
  return v.type == VType::kNumber && parse_int(v.text, out);
}

void Importer::handle_flow() {
  // ac2g flow: id = correlation; 's' sits on the runtime call, 'f' on the GPU op.  Only needed
  // once an event without args.correlation has been seen (Kineto writes a flow right after
  // its event, so the event waits in pending_ for it); otherwise flows cost nothing.
  if (!need_flows_) return;
  int64_t id = 0, pid = 0, tid = 0, ts = 0;
  bool id_ok = num_i64(ev_.id, &id);
  if (!id_ok && ev_.id.type == VType::kString) id_ok = parse_int(ev_.id.text, &id);
  if (!id_ok || id < 0 || !num_i64(ev_.pid, &pid) || !num_i64(ev_.tid, &tid) ||
      ev_.ts.type != VType::kNumber || !parse_us_to_ns(ev_.ts.text, &ts)) {
    return;  // flows only help the fallback; a broken one is not worth a counter
  }
  FlowKey key{pid, tid, ts};
  auto it = pending_.find(key);
  if (it != pending_.end()) {
    Pending p = it->second;
    pending_.erase(it);
    if (p.is_gpu) {
      p.op.correlation_id = static_cast<uint64_t>(id);
      sink_.on_gpu_op(p.op);
    } else {
      p.call.correlation_id = static_cast<uint64_t>(id);
      sink_.on_api_call(p.call);
    }
    return;
  }
  if (flows_.emplace(key, static_cast<uint64_t>(id)).second) {
    flow_order_.push_back(key);
    if (flow_order_.size() > kFlowMemory) {
      flows_.erase(flow_order_.front());
      flow_order_.pop_front();
    }
  }
}

void Importer::emit_gpu(GpuOp op, const FlowKey& key, bool need_corr) {
  if (need_corr) {
    need_flows_ = true;
    auto it = flows_.find(key);
    if (it != flows_.end()) {
      op.correlation_id = it->second;
    } else {
      Pending p{true, op, {}};
      if (pending_.emplace(key, p).second) {
        pending_order_.push_back(key);
        while (pending_order_.size() > kMaxPending) {
          auto old = pending_.find(pending_order_.front());
          pending_order_.pop_front();
          if (old == pending_.end()) continue;
          if (old->second.is_gpu)
            sink_.on_gpu_op(old->second.op);
          else
            sink_.on_api_call(old->second.call);
          pending_.erase(old);
        }
        return;
      }
    }
  }
  sink_.on_gpu_op(op);
}

void Importer::emit_api(HostApiCall call, const FlowKey& key, bool need_corr) {
  if (need_corr) {
    need_flows_ = true;
    auto it = flows_.find(key);
    if (it != flows_.end()) {
      call.correlation_id = it->second;
    } else {
      Pending p{false, {}, call};
      if (pending_.emplace(key, p).second) {
        pending_order_.push_back(key);
        while (pending_order_.size() > kMaxPending) {
          auto old = pending_.find(pending_order_.front());
          pending_order_.pop_front();
          if (old == pending_.end()) continue;
          if (old->second.is_gpu)
            sink_.on_gpu_op(old->second.op);
          else
            sink_.on_api_call(old->second.call);
          pending_.erase(old);
        }
        return;
      }
    }
  }
  sink_.on_api_call(call);
}

void Importer::flush_pending() {
  for (const FlowKey& k : pending_order_) {
    auto it = pending_.find(k);
    if (it == pending_.end()) continue;
    if (it->second.is_gpu)
      sink_.on_gpu_op(it->second.op);
    else
      sink_.on_api_call(it->second.call);
    pending_.erase(it);
  }
  pending_order_.clear();
}

void Importer::map_x_event(CatKind kind) {
  // Ordinary CPU operators (most of a trace) matter only when they are steps or data waits.
  if (kind == CatKind::kCpuOp) {
    if (ev_.name.type != VType::kString) return;
    int64_t n = 0;
    if (!profiler_step_number(ev_.name.text, &n) && !is_data_range(ev_.name.text)) return;
  }
  // Common fields: name, ts, dur.
  if (ev_.name.type != VType::kString || ev_.ts.type != VType::kNumber ||
      ev_.dur.type != VType::kNumber) {
    skip_event();
    return;
  }
  int64_t ts = 0, end = 0;
  if (!parse_span_ns(ev_.ts.text, ev_.dur.text, &ts, &end)) {
    skip_event();
    return;
  }
  const std::string_view name = ev_.name.text;
  int64_t pid = -1, tid = -1;
  const bool pid_ok = num_i64(ev_.pid, &pid);
  const bool tid_ok = num_i64(ev_.tid, &tid);

  switch (kind) {
    case CatKind::kKernel:
    case CatKind::kMemcpy:
    case CatKind::kMemset: {
      int64_t device = -1, stream = -1, corr = -1, bytes = 0, graph = 0;
      if (!num_i64(ev_.device, &device)) {
        if (ev_.device.type != VType::kNone || !pid_ok) {
          skip_event();
          return;
        }
        device = pid;
      }
      if (!num_i64(ev_.stream, &stream)) {
        if (ev_.stream.type != VType::kNone || !tid_ok) {
          skip_event();
          return;
        }
        stream = tid;
      }
      if (device < 0 || device > 0xFFFF || stream < 0 || stream > 0xFFFFFFFFll) {
        skip_event();
        return;
      }
      const bool has_corr = num_i64(ev_.correlation, &corr) && corr >= 0;
      if (ev_.correlation.type != VType::kNone && !has_corr) {
        skip_event();
        return;
      }
      if (ev_.bytes.type != VType::kNone && (!num_i64(ev_.bytes, &bytes) || bytes < 0)) {
        skip_event();
        return;
      }
      if (num_i64(ev_.graph_id, &graph) && (graph < 0 || graph > 0xFFFFFFFFll)) graph = 0;
      GpuOp op;
      op.start = ts;
      op.end = end;
      op.correlation_id = has_corr ? static_cast<uint64_t>(corr) : 0;
      op.bytes = static_cast<uint64_t>(bytes);
      op.stream = static_cast<uint32_t>(stream);
      op.graph_id = static_cast<uint32_t>(graph);
      op.name = names_.intern(name);
      op.device = static_cast<uint16_t>(device);
      if (kind == CatKind::kKernel) {
        op.kind = GpuOpKind::kKernel;
        op.bytes = 0;
        op.collective = classify_collective(name);
        if (ev_.collective.type == VType::kString) {
          CollectiveType byname = classify_collective_name(ev_.collective.text);
          if (byname != CollectiveType::kNone &&
              (op.collective == CollectiveType::kNone || op.collective == CollectiveType::kOther ||
               byname != CollectiveType::kOther))
            op.collective = byname;
        }
      } else if (kind == CatKind::kMemcpy) {
        op.kind = GpuOpKind::kMemcpy;
        op.copy_dir = copy_dir_from_name(name);
        if (name.find("Pageable") != std::string_view::npos) op.flags |= kGpuOpPageable;
      } else {
        op.kind = GpuOpKind::kMemset;
      }
      emit_gpu(op, FlowKey{pid, tid, ts}, !has_corr && pid_ok && tid_ok);
      return;
    }
    case CatKind::kCudaSync:
      emit_cuda_sync(ts, end, name, pid, pid_ok);
      return;
    case CatKind::kRuntime: {
      int64_t corr = -1;
      const bool has_corr = num_i64(ev_.correlation, &corr) && corr >= 0;
      if (ev_.correlation.type != VType::kNone && !has_corr) {
        skip_event();
        return;
      }
      if (host_pid_ == 0 && pid_ok) host_pid_ = pid;
      HostApiCall call;
      call.start = ts;
      call.end = end;
      call.correlation_id = has_corr ? static_cast<uint64_t>(corr) : 0;
      call.thread = tid_ok ? static_cast<uint32_t>(static_cast<uint64_t>(tid)) : 0;
      call.name = names_.intern(name);
      call.kind = classify_api(name);
      emit_api(call, FlowKey{pid, tid, ts}, !has_corr && pid_ok && tid_ok);
      return;
    }
    case CatKind::kUserAnnotation:
    case CatKind::kCpuOp: {
      HostRange r;
      int64_t number = -1;
      if (profiler_step_number(name, &number)) {
        r.kind = RangeKind::kStep;
        r.number = number;
      } else if (is_data_range(name)) {
        r.kind = RangeKind::kData;
      } else if (kind == CatKind::kUserAnnotation) {
        r.kind = RangeKind::kUser;
      } else {
        return;  // ordinary operators are not ranges gpuacct uses
      }
      r.start = ts;
      r.end = end;
      r.thread = tid_ok ? static_cast<uint32_t>(static_cast<uint64_t>(tid)) : 0;
      r.name = names_.intern(name);
      sink_.on_range(r);
      return;
    }
    default:
      return;
  }
}

// A cuda_sync row with a stream, to KinetoImportOptions::on_cuda_sync (the caller checked it
// is set).  HTA's GPU rows are the events with a stream: Context / Event Sync (stream -1) are
// not.
void Importer::emit_cuda_sync(int64_t ts, int64_t end, std::string_view name, int64_t pid,
                              bool pid_ok) {
  int64_t stream = -1, device = -1, corr = -1;
  if (!num_i64(ev_.stream, &stream) || stream < 0 || stream > 0xFFFFFFFFll) return;
  if (!num_i64(ev_.device, &device) && !(ev_.device.type == VType::kNone && pid_ok)) {
    skip_event();
    return;
  }
  if (ev_.device.type == VType::kNone) device = pid;
  if (device < 0 || device > 0xFFFF) {
    skip_event();
    return;
  }
  GpuOp row;
  row.start = ts;
  row.end = end;
  row.correlation_id =
      num_i64(ev_.correlation, &corr) && corr > 0 ? static_cast<uint64_t>(corr) : 0;
  row.stream = static_cast<uint32_t>(stream);
  row.device = static_cast<uint16_t>(device);
  row.name = names_.intern(name);
  opts_.on_cuda_sync(row);
}

void Importer::handle_event() {
  ++event_index_;
  std::string_view ph = ev_.ph.type == VType::kString ? ev_.ph.text : std::string_view();
  CatKind kind = CatKind::kIgnored;
  if (ev_.cat.type == VType::kString) {
    kind = classify_cat(ev_.cat.text);
  } else if (ev_.cat.type != VType::kNone) {
    skip_event();  // a cat that is not a string
    return;
  }
  if (kind == CatKind::kUnknown) {
    stats_.add(Stat::importer_unknown_categories);
    return;
  }
  if (kind == CatKind::kOtherAccelerator) {
    stats_.add(Stat::importer_unknown_categories);  // not handled either, and named below
    count_other_accelerator(ev_.cat.text);
    return;
  }
  if (ev_.ph.type == VType::kNone) {
    // Events without a phase are meaningless in Chrome traces; count the ones we would use.
    if (kind != CatKind::kIgnored) skip_event();
    return;
  }
  if (ev_.ph.type != VType::kString) {
    skip_event();
    return;
  }
  if (kind == CatKind::kFlow) {
    if (ph == "s" || ph == "f" || ph == "t") handle_flow();
    return;
  }
  if (ph != "X" || kind == CatKind::kIgnored) return;
  if (kind == CatKind::kCudaSync && !opts_.on_cuda_sync) return;
  map_x_event(kind);
}

Status Importer::parse_small_json(const char* what, nlohmann::json* out) {
  size_t start = 0;
  Status st = with_refill(what, [&](Cur& c) -> PR {
    start = static_cast<size_t>(c.p - buf_.data());
    return scan_.skip_value(c, 1);
  });
  if (!st.ok()) return st;
  *out = nlohmann::json::parse(buf_.data() + start, buf_.data() + pos_, nullptr, false);
  return Status::Ok();
}

void Importer::apply_metadata(const std::string& key, const nlohmann::json& v, RunMetadata* meta) {
  auto get_int = [](const nlohmann::json& o, const char* k, int64_t dflt) -> int64_t {
    auto it = o.find(k);
    if (it == o.end()) return dflt;
    if (it->is_number_integer()) return it->get<int64_t>();
    if (it->is_number_unsigned()) return static_cast<int64_t>(it->get<uint64_t>());
    if (it->is_number_float()) {
      const double d = it->get<double>();
      // Only integral values in range (a cast of anything else is undefined behaviour).
      if (!(d >= -9.2e18 && d <= 9.2e18) || d != std::floor(d)) return dflt;
      return static_cast<int64_t>(d);
    }
    return dflt;
  };
  auto get_i32 = [&](const nlohmann::json& o, const char* k) -> int {
    const int64_t x = get_int(o, k, 0);
    return x >= 0 && x <= std::numeric_limits<int>::max() ? static_cast<int>(x) : 0;
  };
  if (key == "distributedInfo" && v.is_object()) {
    int64_t rank = get_int(v, "rank", -1);
    int64_t ws = get_int(v, "world_size", 0);
    if (rank >= 0 && rank <= std::numeric_limits<int>::max()) meta->rank = static_cast<int>(rank);
    if (ws >= 0 && ws <= std::numeric_limits<int>::max()) meta->world_size = static_cast<int>(ws);
  } else if (key == "deviceProperties" && v.is_array()) {
    for (const auto& d : v) {
      if (!d.is_object()) continue;
      DeviceInfo info;
      info.id = get_i32(d, "id");
      auto n = d.find("name");
      if (n != d.end() && n->is_string()) info.name = n->get<std::string>();
      info.sm_count = get_i32(d, "numSms");
      info.compute_major = get_i32(d, "computeMajor");
      info.compute_minor = get_i32(d, "computeMinor");
      int64_t mem = get_int(d, "totalGlobalMem", 0);
      info.total_memory = mem > 0 ? static_cast<uint64_t>(mem) : 0;
      meta->devices.push_back(std::move(info));
    }
  }
}

Status Importer::parse_events_array() {
  // pos_ is at '['.
  ++pos_;
  in_events_ = true;
  saw_events_ = true;
  bool first = true;
  for (;;) {
    bool at_end = false;
    GPUACCT_RETURN_IF_ERROR(next_nonws(&at_end));
    if (at_end) return truncated_error("the traceEvents array");
    char ch = buf_[pos_];
    if (ch == ']') {
      ++pos_;
      in_events_ = false;
      return Status::Ok();
    }
    if (!first) {
      if (ch != ',') {
        scan_.err = {buf_.data() + pos_, "expected ',' or ']' between trace events"};
        return syntax_error();
      }
      ++pos_;
      GPUACCT_RETURN_IF_ERROR(next_nonws(&at_end));
      if (at_end) return truncated_error("the traceEvents array");
      ch = buf_[pos_];
    }
    first = false;
    if (ch == '{') {
      GPUACCT_RETURN_IF_ERROR(with_refill("a trace event", [&](Cur& c) { return parse_event(c); }));
      ++object_events_;
      handle_event();
    } else {
      GPUACCT_RETURN_IF_ERROR(
          with_refill("a trace event", [&](Cur& c) { return scan_.skip_value(c, 1); }));
      ++event_index_;
      skip_event();  // an element that is not an object
    }
  }
}

Status Importer::parse_top_object() {
  // pos_ at '{'.
  ++pos_;
  bool first = true;
  RunMetadata* meta = meta_;
  for (;;) {
    bool at_end = false;
    GPUACCT_RETURN_IF_ERROR(next_nonws(&at_end));
    if (at_end) return truncated_error("the top-level object");
    char ch = buf_[pos_];
    if (ch == '}') {
      ++pos_;
      return Status::Ok();
    }
    if (!first) {
      if (ch != ',') {
        scan_.err = {buf_.data() + pos_, "expected ',' or '}' in the top-level object"};
        return syntax_error();
      }
      ++pos_;
      GPUACCT_RETURN_IF_ERROR(next_nonws(&at_end));
      if (at_end) return truncated_error("the top-level object");
    }
    first = false;
    std::string key;
    GPUACCT_RETURN_IF_ERROR(with_refill("a key", [&](Cur& c) -> PR {
      if (*c.p != '"') return scan_.fail(c.p, "expected a string key");
      std::string_view k;
      PR r = scan_.string(c, &k, true);
      if (r != PR::kOk) return r;
      if ((r = skip_ws(c)) != PR::kOk) return r;
      if (*c.p != ':') return scan_.fail(c.p, "expected ':' after key");
      ++c.p;
      key.assign(k);
      return PR::kOk;
    }));
    GPUACCT_RETURN_IF_ERROR(next_nonws(&at_end));
    if (at_end) return truncated_error("a top-level value");
    if (key == "traceEvents") {
      if (buf_[pos_] != '[') {
        return Status::Error("not a Kineto trace: \"traceEvents\" at byte offset " +
                             std::to_string(base_ + pos_) + " is not an array");
      }
      GPUACCT_RETURN_IF_ERROR(parse_events_array());
    } else if (key == "distributedInfo" || key == "deviceProperties") {
      nlohmann::json v;
      GPUACCT_RETURN_IF_ERROR(parse_small_json("a top-level value", &v));
      apply_metadata(key, v, meta);
    } else {
      GPUACCT_RETURN_IF_ERROR(
          with_refill("a top-level value", [&](Cur& c) { return scan_.skip_value(c, 1); }));
    }
  }
}

Status Importer::run(RunMetadata* meta) {
  meta_ = meta;
  bool at_end = false;
  GPUACCT_RETURN_IF_ERROR(next_nonws(&at_end));
  if (at_end) {
    return Status::Error(base_ + len_ == 0 ? "empty input: not a Kineto trace (0 bytes)"
                                           : "input holds only whitespace: not a Kineto trace");
  }
  // UTF-8 byte order mark.
  if (len_ - pos_ >= 3 && std::memcmp(buf_.data() + pos_, "\xEF\xBB\xBF", 3) == 0) {
    pos_ += 3;
    GPUACCT_RETURN_IF_ERROR(next_nonws(&at_end));
    if (at_end) return Status::Error("input holds only a byte order mark: not a Kineto trace");
  }
  const char ch = buf_[pos_];
  if (ch == '{') {
    GPUACCT_RETURN_IF_ERROR(parse_top_object());
  } else if (ch == '[') {
    // Chrome's "JSON array format": the file is the event list itself.
    GPUACCT_RETURN_IF_ERROR(parse_events_array());
    if (object_events_ == 0 && event_index_ > 0) {
      return Status::Error("not a Kineto trace: a JSON array without a single event object");
    }
  } else {
    return Status::Error(
        "not a Kineto trace: expected a JSON object with \"traceEvents\", found byte 0x" +
        [&] {
          char hex[8];
          std::snprintf(hex, sizeof(hex), "%02x", static_cast<unsigned char>(ch));
          return std::string(hex);
        }() +
        " at byte offset " + std::to_string(base_ + pos_));
  }
  GPUACCT_RETURN_IF_ERROR(next_nonws(&at_end));
  if (!at_end) {
    return Status::Error("unexpected data after the end of the JSON document at byte offset " +
                         std::to_string(base_ + pos_));
  }
  if (!saw_events_) {
    return Status::Error("not a Kineto trace: the top-level object has no \"traceEvents\" array (" +
                         std::to_string(base_ + pos_) + " bytes read)");
  }
  flush_pending();
  progress(true);
  meta->pid = host_pid_;
  meta->other_accelerator_events.assign(other_accelerator_.begin(), other_accelerator_.end());
  std::sort(meta->other_accelerator_events.begin(), meta->other_accelerator_events.end(),
            [](const auto& a, const auto& b) {
              return a.second != b.second ? a.second > b.second : a.first < b.first;
            });
  return Status::Ok();
}

StatusOr<RunMetadata> run_import(ByteSource& src, const std::string& path, NameTable& names,
                                 EventSink& sink, Stats& stats, const KinetoImportOptions& opts) {
  RunMetadata meta;
  meta.source = "kineto";
  meta.source_path = path;
  Importer imp(src, names, sink, stats, opts);
  Status st = imp.run(&meta);
  if (!st.ok()) {
    if (!path.empty()) return Status::Error(path + ": " + st.message());
    return st;
  }
  return meta;
}

}  // namespace

bool parse_us_to_ns(std::string_view text, int64_t* out_ns) {
  return parse_scaled(text, 3, out_ns, nullptr);
}

StatusOr<RunMetadata> import_kineto_trace(const std::string& path, NameTable& names,
                                          EventSink& sink, Stats& stats,
                                          const KinetoImportOptions& opts) {
  auto src = open_byte_source(path);
  if (!src.ok()) return src.status();
  return run_import(*src.value(), path, names, sink, stats, opts);
}

StatusOr<RunMetadata> import_kineto_buffer(std::string_view data, NameTable& names, EventSink& sink,
                                           Stats& stats, const KinetoImportOptions& opts) {
  auto src = memory_byte_source(data);
  return run_import(*src, "", names, sink, stats, opts);
}

bool looks_like_kineto_trace(const std::string& path) {
  auto src = open_byte_source(path);
  if (!src.ok()) return false;
  if (src.value()->compressed()) return true;
  char buf[256];
  size_t got = 0;
  if (!src.value()->read(buf, sizeof(buf), &got).ok()) return false;
  size_t i = 0;
  if (got >= 3 && std::memcmp(buf, "\xEF\xBB\xBF", 3) == 0) i = 3;
  while (i < got && is_ws(buf[i])) ++i;
  return i < got && (buf[i] == '{' || buf[i] == '[');
}

}  // namespace gpuacct
