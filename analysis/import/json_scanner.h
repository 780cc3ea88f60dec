// A JSON scanner for streaming readers (the Kineto importer): no DOM, no allocation per value.
//
//   Scanner   reads one value at a cursor over a buffer that may end mid-value: kNeedMore
//             says "read more and retry from the same place"; strings come back as views
//             into the buffer (or, with escapes, into per-value scratch), numbers as their
//             text; containers are walked (object()) or skipped (skip_value()), nesting
//             limited to kMaxDepth.
//   Stream    the buffer over a ByteSource: reads in chunks, grows for one large value (up
//             to a limit), and retries a scan until it completes (with_refill).  Errors are
//             worded by the owner (StreamErrors), who knows what is being read.
//   Numbers   exact decimal -> integer conversion (no binary floating point):
//             parse_scaled() = round(value * 10^scale), half away from zero.
//
// The hot paths (string fast path, object walk) are inline here: the importer calls them for
// every key of every event.
#pragma once

#include <cstdint>
#include <cstring>
#include <deque>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

#include "analysis/import/byte_source.h"
#include "analysis/model/status.h"

namespace gpuacct::json_scan {

inline constexpr int kMaxDepth = 128;  // nesting limit (stack safety)

// ---- numbers --------------------------------------------------------------------------------

// 128-bit integers (GCC/Clang): wide enough to add two timestamps held at 1e-9 ns resolution.
__extension__ typedef __int128 Int128;

// round(value * 10^scale) as int64, exactly, half away from zero; false on a syntax error or
// overflow (at most 19 integer digits).  `exact` (optional): no non-zero digit was rounded
// away.  Accepts exponents ("1.5e3").
bool parse_scaled(std::string_view text, int scale, int64_t* out, bool* exact = nullptr);
// The same into 128 bits, with at most `max_digits` (<= 37) integer digits.
bool parse_scaled_wide(std::string_view text, int scale, int max_digits, Int128* out);
// A JSON integer (no fraction left after rounding) into int64.
bool parse_integer(std::string_view text, int64_t* out);

// The fast path of parse_scaled, for the shape nearly every trace number has: "-?d+(.d*)?" with
// at most `scale` decimals and at most 18 digits before scaling (0 <= scale <= 18).  True with
// the exact value (what parse_scaled gives, nothing rounded); false means "not that shape",
// not "invalid": the caller then asks parse_scaled, which also judges the syntax.
inline bool parse_scaled_simple(std::string_view text, int scale, int64_t* out) {
  const char* p = text.data();
  const char* const end = p + text.size();
  const bool negative = p < end && *p == '-';
  if (negative) ++p;
  auto digit = [](char ch) { return static_cast<unsigned>(ch) - '0' <= 9u; };
  if (p == end || !digit(*p)) return false;
  uint64_t v = 0;
  int int_digits = 0, decimals = 0;
  for (; p < end && digit(*p) && int_digits <= 18; ++p, ++int_digits)
    v = v * 10 + static_cast<uint64_t>(*p - '0');
  if (p < end && *p == '.') {
    for (++p; p < end && digit(*p) && decimals <= scale; ++p, ++decimals)
      v = v * 10 + static_cast<uint64_t>(*p - '0');
  }
  if (p != end || decimals > scale || int_digits + scale > 18) return false;
  for (int k = decimals; k < scale; ++k) v *= 10;  // < 10^18: no overflow
  *out = negative ? -static_cast<int64_t>(v) : static_cast<int64_t>(v);
  return true;
}

// ---- scanning -------------------------------------------------------------------------------

enum class Result : uint8_t { kOk, kNeedMore, kSyntax };

struct Cursor {
  const char* p;
  const char* end;
};

inline bool is_ws(char c) {
  // One compare and one bit test instead of four compares: ' ', '\t', '\n', '\r' are the bits
  // 32, 9, 10 and 13 of the mask (every byte of a trace is tested at least once).
  const auto u = static_cast<unsigned char>(c);
  return u <= ' ' && ((0x100002600ull >> u) & 1u) != 0;
}

// Bytes that may appear in a JSON number's text (the grammar is checked after the scan).
inline bool is_number_char(char c) {
  struct Table {
    bool v[256] = {};
    constexpr Table() {
      for (int d = '0'; d <= '9'; ++d) v[d] = true;
      v[static_cast<unsigned char>('-')] = v[static_cast<unsigned char>('+')] = true;
      v[static_cast<unsigned char>('.')] = true;
      v[static_cast<unsigned char>('e')] = v[static_cast<unsigned char>('E')] = true;
    }
  };
  static constexpr Table kTable{};
  return kTable.v[static_cast<unsigned char>(c)];
}

// The first '"' or '\\' at or after `p`, or `end`: the bytewise reference of string_stop.
inline const char* string_stop_bytewise(const char* p, const char* end) {
  while (p < end && *p != '"' && *p != '\\') ++p;
  return p;
}

// The same, sixteen bytes at a time (SSE2), then eight (SWAR), then bytewise: the kernel names
// of a trace are hundreds of bytes long.  Any other byte (control bytes, bytes that are not
// UTF-8) is string content, as in the bytewise scan.
[[gnu::always_inline]] inline const char* string_stop(const char* q, const char* end) {
#if defined(__SSE2__)
  const __m128i quote16 = _mm_set1_epi8('"'), slash16 = _mm_set1_epi8('\\');
  while (end - q >= 16) {
    const __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(q));
    const int hit = _mm_movemask_epi8(
        _mm_or_si128(_mm_cmpeq_epi8(v, quote16), _mm_cmpeq_epi8(v, slash16)));
    if (hit != 0) return q + __builtin_ctz(static_cast<unsigned>(hit));
    q += 16;
  }
#endif
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
  constexpr uint64_t kOnes = 0x0101010101010101ull, kHigh = 0x8080808080808080ull;
  constexpr uint64_t kQuote = kOnes * '"', kSlash = kOnes * '\\';
  while (end - q >= 8) {
    uint64_t w;
    std::memcpy(&w, q, 8);
    const uint64_t a = w ^ kQuote, b = w ^ kSlash;
    const uint64_t hit = ((a - kOnes) & ~a & kHigh) | ((b - kOnes) & ~b & kHigh);
    if (hit) {
      // The lowest flagged byte is the first match (borrows only run upwards); little-endian.
      return q + __builtin_ctzll(hit) / 8;
    }
    q += 8;
  }
#endif
  return string_stop_bytewise(q, end);
}

// Two bytes at `p` (the caller checked they are there) are `a` then `b`: one 16-bit compare
// (the separators Kineto writes between tokens: ": ", ", ").
inline bool two_bytes_are(const char* p, char a, char b) {
  const char want[2] = {a, b};
  uint16_t have, lit;
  std::memcpy(&have, p, 2);
  std::memcpy(&lit, want, 2);
  return have == lit;
}

// A member key as Kineto writes it, with the separator after it: `"name": ` (the key at most
// 11 bytes, without '"' or '\\'; the pattern at most 15).  match() recognises it in one
// 16-byte compare (SSE2; a memcmp elsewhere) instead of the string scan and colon() (~40 % of
// a trace's members are the eight keys of an event).
class KeyPattern {
 public:
  // At compile time only: a longer key (or one with '"' or '\\') does not compile.
  explicit consteval KeyPattern(std::string_view key) : key_(key) {
    if (key.size() > 11 || key.find_first_of("\"\\") != std::string_view::npos)
      throw "KeyPattern: a key of at most 11 bytes, without '\"' or '\\'";
    bytes_[0] = '"';
    for (size_t i = 0; i < key.size(); ++i) bytes_[1 + i] = key[i];
    bytes_[key.size() + 1] = '"';
    bytes_[key.size() + 2] = ':';
    bytes_[key.size() + 3] = ' ';
    len_ = static_cast<uint8_t>(key.size() + 4);
    mask_ = static_cast<uint16_t>((1u << len_) - 1);
  }

  std::string_view key() const { return key_; }

  // True, with c.p at the value, when the bytes at c.p are the pattern and then a byte that is
  // not blank: where string() and colon() would have left c.p, with the same key.  False, c.p
  // unmoved, otherwise (the caller reads the member in full).
  [[gnu::always_inline]] bool match(Cursor& c) const {
    if (c.end - c.p < 16) return false;  // one whole load, and the byte after the pattern
#if defined(__SSE2__)
    const __m128i have = _mm_loadu_si128(reinterpret_cast<const __m128i*>(c.p));
    const __m128i want = _mm_loadu_si128(reinterpret_cast<const __m128i*>(bytes_));
    const auto same = static_cast<unsigned>(_mm_movemask_epi8(_mm_cmpeq_epi8(have, want)));
    if ((same & mask_) != mask_) return false;
#else
    if (std::memcmp(c.p, bytes_, len_) != 0) return false;
#endif
    if (static_cast<unsigned char>(c.p[len_]) <= ' ') return false;
    c.p += len_;
    return true;
  }

 private:
  char bytes_[16] = {};
  std::string_view key_;
  uint8_t len_ = 0;
  uint16_t mask_ = 0;
};

// Inlined everywhere: called for every key and value of every event.
[[gnu::always_inline]] inline Result skip_ws(Cursor& c) {
  // Kineto puts no blank or a single space between tokens: decided without the loop.  (A byte
  // above ' ' is never blank.)
  if (c.end - c.p >= 2) {
    if (static_cast<unsigned char>(c.p[0]) > ' ') return Result::kOk;
    if (c.p[0] == ' ' && static_cast<unsigned char>(c.p[1]) > ' ') {
      ++c.p;
      return Result::kOk;
    }
  }
  while (c.p < c.end && is_ws(*c.p)) ++c.p;
  return c.p < c.end ? Result::kOk : Result::kNeedMore;
}

struct SyntaxError {
  const char* at = nullptr;
  const char* what = "";
};

// A scalar read from the input: strings are views into the buffer or into the scanner's
// scratch (valid until the next reset_scratch()).
enum class ValueType : uint8_t { kNone, kString, kNumber, kOther };
struct Value {
  ValueType type = ValueType::kNone;
  std::string_view text;  // string contents (decoded) or number text
};

class Scanner {
 public:
  SyntaxError err;

  // Forgets the decoded strings of the previous value (their views die).
  void reset_scratch() { scratch_used_ = 0; }

  Result fail(const char* at, const char* what) {
    err.at = at;
    err.what = what;
    return Result::kSyntax;
  }

  // c.p at the opening quote.  `decode`: produce the text (else only skip).
  [[gnu::always_inline]] Result string(Cursor& c, std::string_view* out, bool decode) {
    const char* start = c.p + 1;
    const char* q = string_stop(start, c.end);
    if (q >= c.end) return Result::kNeedMore;
    return string_end(c, out, decode, start, q);
  }

  // string() found the closing quote or the first escape at `q`.
  [[gnu::always_inline]] Result string_end(Cursor& c, std::string_view* out, bool decode,
                                           const char* start, const char* q) {
    if (*q == '"') {
      if (out) *out = std::string_view(start, static_cast<size_t>(q - start));
      c.p = q + 1;
      return Result::kOk;
    }
    return string_with_escapes(c, out, decode, start, q);
  }

  [[gnu::always_inline]] Result number(Cursor& c, std::string_view* out) {
    const char* s = c.p;
    // Bytewise: a 16-byte SSE2 version took fewer instructions but more time (the position
    // it computes feeds the next load, where this loop's branches are predicted past;
    // docs/kineto_import.md, *Third pass*).
    const char* q = s;
    while (q < c.end && is_number_char(*q)) ++q;
    if (q == c.end) return Result::kNeedMore;  // the number may continue in the next chunk
    // Validate the JSON number grammar loosely (parse_scaled does the rest).
    if (q == s) return fail(s, "invalid value");
    const char* d = s;
    if (*d == '-') ++d;
    if (d == q || !(*d >= '0' && *d <= '9')) return fail(s, "invalid number");
    if (out) *out = std::string_view(s, static_cast<size_t>(q - s));
    c.p = q;
    return Result::kOk;
  }

  Result literal(Cursor& c) {
    static constexpr std::string_view kLits[] = {"true", "false", "null"};
    for (std::string_view lit : kLits) {
      if (*c.p != lit[0]) continue;
      size_t avail = static_cast<size_t>(c.end - c.p);
      if (avail < lit.size()) {
        if (std::string_view(c.p, avail) == lit.substr(0, avail)) return Result::kNeedMore;
        return fail(c.p, "invalid literal");
      }
      if (std::string_view(c.p, lit.size()) != lit) return fail(c.p, "invalid literal");
      c.p += lit.size();
      return Result::kOk;
    }
    return fail(c.p, "invalid value");
  }

  // skip_value() with its scalar cases inline (most skipped values are numbers or strings).
  [[gnu::always_inline]] Result skip_value_inline(Cursor& c, int depth) {
    const char ch = *c.p;
    if (ch == '"') return string(c, nullptr, false);
    if (ch == '-' || (ch >= '0' && ch <= '9')) return number(c, nullptr);
    return skip_value(c, depth);
  }

  // Any value; c.p at its first byte (not whitespace).
  Result skip_value(Cursor& c, int depth) {
    if (depth > kMaxDepth) return fail(c.p, "JSON nested too deeply");
    char ch = *c.p;
    if (ch == '"') return string(c, nullptr, false);
    if (ch == '{' || ch == '[') {
      const char close = ch == '{' ? '}' : ']';
      ++c.p;
      Result r = skip_ws(c);
      if (r != Result::kOk) return r;
      if (*c.p == close) {
        ++c.p;
        return Result::kOk;
      }
      for (;;) {
        if (close == '}') {
          if (*c.p != '"') return fail(c.p, "expected a string key");
          if ((r = string(c, nullptr, false)) != Result::kOk) return r;
          if ((r = colon(c)) != Result::kOk) return r;
        }
        if ((r = skip_value_inline(c, depth + 1)) != Result::kOk) return r;
        if (close == '}' ? next_key(c) : next_element(c)) continue;
        if ((r = skip_ws(c)) != Result::kOk) return r;
        if (*c.p == ',') {
          ++c.p;
          if ((r = skip_ws(c)) != Result::kOk) return r;
          continue;
        }
        if (*c.p == close) {
          ++c.p;
          return Result::kOk;
        }
        return fail(
            c.p, close == '}' ? "expected ',' or '}' in object" : "expected ',' or ']' in array");
      }
    }
    if (ch == '-' || (ch >= '0' && ch <= '9')) return number(c, nullptr);
    return literal(c);
  }

  // After a key: the ':' and the blanks around it, c.p then at the value.  Kineto writes
  // `"key": value`; that shape is one 16-bit compare and one byte test, and takes the same
  // steps the general path below would.
  [[gnu::always_inline]] Result colon(Cursor& c) {
    if (c.end - c.p >= 3 && two_bytes_are(c.p, ':', ' ') &&
        static_cast<unsigned char>(c.p[2]) > ' ') {
      c.p += 2;
      return Result::kOk;
    }
    Result r = skip_ws(c);
    if (r != Result::kOk) return r;
    if (*c.p != ':') return fail(c.p, "expected ':' after key");
    ++c.p;
    return skip_ws(c);
  }

  // After a member's value: true with c.p at the next key's quote when `, "` follows (what
  // Kineto writes; the general path would end at the same byte); false, c.p unmoved, for
  // anything else, which the caller's general path then reads.
  [[gnu::always_inline]] static bool next_key(Cursor& c) {
    if (c.end - c.p >= 3 && two_bytes_are(c.p, ',', ' ') && c.p[2] == '"') {
      c.p += 2;
      return true;
    }
    return false;
  }

  // The same between array elements: `, ` and a byte that is not blank.  The element itself
  // is judged by the caller (skip_value_inline).
  [[gnu::always_inline]] static bool next_element(Cursor& c) {
    if (c.end - c.p >= 3 && two_bytes_are(c.p, ',', ' ') &&
        static_cast<unsigned char>(c.p[2]) > ' ') {
      c.p += 2;
      return true;
    }
    return false;
  }

  // Reads a scalar into `v` (strings decoded, numbers as text); containers are skipped.
  [[gnu::always_inline]] Result value(Cursor& c, Value* v) {
    char ch = *c.p;
    if (ch == '"') {
      v->type = ValueType::kString;
      return string(c, &v->text, true);
    }
    if (ch == '-' || (ch >= '0' && ch <= '9')) {
      v->type = ValueType::kNumber;
      return number(c, &v->text);
    }
    v->type = ValueType::kOther;
    return skip_value(c, 1);
  }

  // Iterates an object's members; `on_member(key, cur)` must consume the value.
  template <typename F>
  Result object(Cursor& c, F&& on_member) {
    return object(c, [](Cursor&, std::string_view*) { return false; }, on_member);
  }

  // The same, asking `guess(cur, &key)` first at each member (cur.p at its opening quote): true
  // when it recognised the key and its ':' (KeyPattern::match), cur.p then at the value; false
  // to have the key read in full.
  template <typename G, typename F>
  Result object(Cursor& c, G&& guess, F&& on_member) {
    ++c.p;  // '{'
    Result r = skip_ws(c);
    if (r != Result::kOk) return r;
    if (*c.p == '}') {
      ++c.p;
      return Result::kOk;
    }
    for (;;) {
      if (*c.p != '"') return fail(c.p, "expected a string key");
      std::string_view key;
      if (!guess(c, &key)) {
        if ((r = string(c, &key, true)) != Result::kOk) return r;
        if ((r = colon(c)) != Result::kOk) return r;
      }
      if ((r = on_member(key, c)) != Result::kOk) return r;
      if (next_key(c)) continue;
      if ((r = skip_ws(c)) != Result::kOk) return r;
      if (*c.p == ',') {
        ++c.p;
        if ((r = skip_ws(c)) != Result::kOk) return r;
        continue;
      }
      if (*c.p == '}') {
        ++c.p;
        return Result::kOk;
      }
      return fail(c.p, "expected ',' or '}' in object");
    }
  }

 private:
  // The slow path of string(): the string holds an escape at `q`.
  Result string_with_escapes(Cursor& c, std::string_view* out, bool decode, const char* start,
                             const char* q);
  static void put_utf8(std::string& s, uint32_t cp);
  static int hexval(char ch);

  std::deque<std::string> scratch_;  // decoded strings with escapes; stable addresses
  size_t scratch_used_ = 0;
};

// ---- the buffered stream --------------------------------------------------------------------

// The owner's wording of the stream's errors (it knows what is being read).
class StreamErrors {
 public:
  virtual ~StreamErrors() = default;
  // Invalid JSON at `offset` (of the decompressed text): scanner.err.what.
  virtual Status syntax(uint64_t offset, const char* what) = 0;
  // The input ended at `offset` while reading `what`.
  virtual Status truncated(uint64_t offset, const char* what) = 0;
  // One value starting at `offset` is larger than `limit` bytes.
  virtual Status oversize(uint64_t offset, size_t limit) = 0;
};

class Stream {
 public:
  // `max_value_bytes`: the largest single value (the buffer grows up to it).
  Stream(ByteSource& src, StreamErrors& errors, size_t max_value_bytes);

  Scanner& scanner() { return scan_; }
  bool compressed() const { return src_.compressed(); }
  // Called after every read from the source (progress reports).
  void on_read(std::function<void()> hook) { on_read_ = std::move(hook); }

  // The next byte (valid after next_nonws() found one) and the byte offsets of the input.
  char peek() const { return data_[pos_]; }
  void advance(size_t n = 1) { pos_ += n; }
  bool starts_with(std::string_view bytes) const {
    return len_ - pos_ >= bytes.size() &&
           std::memcmp(data_ + pos_, bytes.data(), bytes.size()) == 0;
  }
  uint64_t offset() const { return base_ + pos_; }      // of the next byte
  uint64_t end_offset() const { return base_ + len_; }  // of the end of what was read
  uint64_t offset_of(const char* p) const { return base_ + static_cast<uint64_t>(p - data_); }

  // Skips whitespace across chunks; *at_end when the input ends.  Inline for the common case
  // (called twice per trace event): the next non-blank byte is already buffered.
  Status next_nonws(bool* at_end) {
    while (pos_ < len_ && is_ws(data_[pos_])) ++pos_;
    if (pos_ < len_) {
      *at_end = false;
      return Status::Ok();
    }
    return next_nonws_refill(at_end);
  }

  // Runs `attempt(Cursor&)` on the buffered text from the next byte, reading more until it
  // completes; then consumes what it read.  `what` names the value for a truncation error.
  template <typename F>
  Status with_refill(const char* what, F&& attempt) {
    for (;;) {
      Cursor c{data_ + pos_, data_ + len_};
      scan_.reset_scratch();
      Result r = c.p < c.end ? attempt(c) : Result::kNeedMore;
      if (r == Result::kOk) {
        pos_ = static_cast<size_t>(c.p - data_);
        return Status::Ok();
      }
      if (r == Result::kSyntax) return errors_.syntax(offset_of(scan_.err.at), scan_.err.what);
      bool more = false;
      GPUACCT_RETURN_IF_ERROR(refill(&more));
      if (!more) return errors_.truncated(end_offset(), what);
    }
  }

  // Like with_refill(attempt = skip one value), returning the value's bytes (valid until the
  // next read).
  Status read_raw_value(const char* what, std::string_view* bytes);

  // A syntax error at the next byte.
  Status syntax_error_here(const char* what) { return errors_.syntax(offset(), what); }

 private:
  // Keeps [pos_, len_) (the value being read) and reads more after it; *more = false at the
  // end of the input.  From a source that lends its memory (a prefetched gzip input) the bytes
  // are read in place: the kept bytes go into the headroom before the next block.  Otherwise,
  // or when the kept bytes are too many for the headroom, they move to the front of buf_ and
  // the source copies into buf_ after them.
  Status refill(bool* more);
  Status next_nonws_refill(bool* at_end);

  ByteSource& src_;
  StreamErrors& errors_;
  size_t max_value_bytes_;
  std::function<void()> on_read_;
  Scanner scan_;
  size_t lend_headroom_;   // src_.lend_headroom(): 0 when it does not lend
  size_t initial_bytes_;   // buf_'s size once it is first needed (it grows from there)
  std::vector<char> buf_;  // the bytes, unless they are read in place (see refill)
  const char* data_ = "";  // the bytes being read: in buf_ or in the source's memory
  bool in_buf_ = false;    // data_ points into buf_
  size_t pos_ = 0, len_ = 0;
  uint64_t base_ = 0;  // input offset of data_[0]
  bool eof_ = false;
};

}  // namespace gpuacct::json_scan
