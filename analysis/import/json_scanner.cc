#include "analysis/import/json_scanner.h"

#include <algorithm>
#include <limits>

namespace gpuacct::json_scan {

// ---- numbers --------------------------------------------------------------------------------

namespace {

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

}  // namespace

// At most 19 integer digits: fits in uint64 (< 1.8e19) even after rounding up.
bool parse_scaled(std::string_view t, int scale, int64_t* out, bool* exact) {
  if (scale >= 0 && scale <= 18 && parse_scaled_simple(t, scale, out)) {
    if (exact) *exact = true;
    return true;
  }
  uint64_t v = 0;
  bool neg = false;
  if (!parse_scaled_digits(t, scale, 19, &v, &neg, exact)) return false;
  if (v > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) return false;
  *out = neg ? -static_cast<int64_t>(v) : static_cast<int64_t>(v);
  return true;
}

bool parse_scaled_wide(std::string_view t, int scale, int max_digits, Int128* out) {
  UInt128 v = 0;
  bool neg = false;
  if (!parse_scaled_digits(t, scale, std::min(max_digits, 37), &v, &neg, nullptr)) return false;
  *out = neg ? -static_cast<Int128>(v) : static_cast<Int128>(v);
  return true;
}

bool parse_integer(std::string_view t, int64_t* out) {
  // Fast path for what nearly every pid, tid, device, stream and correlation is: a JSON
  // integer of at most 18 digits (no leading zero, no fraction), whose value is exact.
  const bool negative = !t.empty() && t[0] == '-';
  const std::string_view digits = t.substr(negative ? 1 : 0);
  if (!digits.empty() && digits.size() <= 18 && (digits[0] != '0' || digits.size() == 1)) {
    int64_t v = 0;
    bool all_digits = true;
    for (const char ch : digits) {
      all_digits = all_digits && ch >= '0' && ch <= '9';
      v = v * 10 + (ch - '0');
    }
    if (all_digits) {
      *out = negative ? -v : v;
      return true;
    }
  }
  bool exact = false;
  return parse_scaled(t, 0, out, &exact) && exact;
}

// ---- the string slow path -------------------------------------------------------------------

void Scanner::put_utf8(std::string& s, uint32_t cp) {
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

int Scanner::hexval(char ch) {
  if (ch >= '0' && ch <= '9') return ch - '0';
  if (ch >= 'a' && ch <= 'f') return ch - 'a' + 10;
  if (ch >= 'A' && ch <= 'F') return ch - 'A' + 10;
  return -1;
}

Result Scanner::string_with_escapes(Cursor& c, std::string_view* out, bool decode,
                                    const char* start, const char* q) {
  std::string* s = nullptr;
  if (decode) {
    if (scratch_used_ == scratch_.size()) scratch_.emplace_back();
    s = &scratch_[scratch_used_++];
    s->assign(start, q);
  }
  while (true) {
    if (q >= c.end) return Result::kNeedMore;
    char ch = *q;
    if (ch == '"') break;
    if (ch != '\\') {
      if (s) s->push_back(ch);
      ++q;
      continue;
    }
    if (q + 1 >= c.end) return Result::kNeedMore;
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
        if (c.end - q < 4) return Result::kNeedMore;
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
            if (c.end - q < 6 && (c.end - q == 0 || q[0] == '\\')) return Result::kNeedMore;
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
  return Result::kOk;
}

// ---- the stream -----------------------------------------------------------------------------

Stream::Stream(ByteSource& src, StreamErrors& errors, size_t max_value_bytes)
    : src_(src),
      errors_(errors),
      max_value_bytes_(max_value_bytes),
      lend_headroom_(src.lend_headroom()) {
  // Small inputs (tests, the fuzzer) get a small buffer; it grows on demand.
  constexpr size_t kChunkBytes = size_t{1} << 20;  // read granularity
  initial_bytes_ = kChunkBytes;
  const uint64_t total = src_.raw_total();
  if (total > 0 && total < kChunkBytes) {
    const size_t expected = static_cast<size_t>(total) * (src_.compressed() ? 4 : 2);
    initial_bytes_ = std::min(std::max<size_t>(4096, expected), kChunkBytes);
  }
}

Status Stream::refill(bool* more) {
  *more = false;
  base_ += pos_;  // what was read is forgotten; the kept bytes start data_
  data_ += pos_;
  len_ -= pos_;
  pos_ = 0;
  if (eof_) return Status::Ok();
  // In place while the kept bytes fit the headroom and stay clear of the value size limit
  // (a value is never refused for its size on this path, so small limits take the other).
  if (lend_headroom_ > 0 && len_ <= lend_headroom_ && len_ < max_value_bytes_ / 2) {
    char* lent = nullptr;
    size_t got = 0;
    GPUACCT_RETURN_IF_ERROR(src_.lend(std::string_view(data_, len_), &lent, &got));
    if (got == 0) {
      eof_ = true;  // data_ (the span lent before) stays valid
    } else {
      data_ = lent - len_;
      in_buf_ = false;
      len_ += got;
      *more = true;
    }
    if (on_read_) on_read_();
    return Status::Ok();
  }
  // The kept bytes go to the front of buf_ before it may be reallocated (a lent span stays
  // valid until the next read).
  if (in_buf_ && data_ != buf_.data()) std::memmove(buf_.data(), data_, len_);
  // The value being parsed fills half the buffer or more (a single huge value; or, from a
  // lent span, up to a block and its headroom): grow until it fills less than half.
  size_t want = std::max(buf_.size(), initial_bytes_);
  while (len_ >= want / 2) {
    if (want >= max_value_bytes_) return errors_.oversize(base_, max_value_bytes_);
    want = std::min(want * 2, max_value_bytes_);
  }
  if (want != buf_.size()) buf_.resize(want);
  if (!in_buf_) std::memcpy(buf_.data(), data_, len_);
  data_ = buf_.data();
  in_buf_ = true;
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
  if (on_read_) on_read_();
  return Status::Ok();
}

Status Stream::next_nonws_refill(bool* at_end) {
  *at_end = false;
  for (;;) {
    while (pos_ < len_ && is_ws(data_[pos_])) ++pos_;
    if (pos_ < len_) return Status::Ok();
    bool more = false;
    GPUACCT_RETURN_IF_ERROR(refill(&more));
    if (!more && pos_ >= len_) {
      *at_end = true;
      return Status::Ok();
    }
  }
}

Status Stream::read_raw_value(const char* what, std::string_view* bytes) {
  size_t start = 0;
  GPUACCT_RETURN_IF_ERROR(with_refill(what, [&](Cursor& c) {
    start = static_cast<size_t>(c.p - data_);
    return scan_.skip_value(c, 1);
  }));
  *bytes = std::string_view(data_ + start, pos_ - start);
  return Status::Ok();
}

}  // namespace gpuacct::json_scan
