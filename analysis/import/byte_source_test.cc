// Byte sources: both gzip decoders and the background thread give the same bytes and the same
// errors as the plain zlib reader on one thread.
#include "analysis/import/gzip_for_tests.h"
#include "analysis/import/byte_source.h"

#include <gtest/gtest.h>
#include <zlib.h>

#include <random>
#include <string>
#include <vector>

#include "analysis/import/prefetch_source.h"

namespace gpuacct {
namespace {

using testing_support::gzip;

// Text that compresses like a trace but not to nothing: ~`n` bytes.
std::string trace_like(size_t n) {
  std::mt19937_64 rng(7);
  std::string s;
  while (s.size() < n) {
    s += "{\"ph\": \"X\", \"ts\": " + std::to_string(rng() % 100000000) + ".";
    s += std::to_string(rng() % 1000) + ", \"name\": \"k" + std::to_string(rng() % 97) + "\"},\n";
  }
  return s;
}

struct ReadAll {
  std::string bytes;
  std::string error;  // empty: read to the end
};

// Reads in odd-sized pieces (the importer's reads vary too).
ReadAll read_all(ByteSource& src) {
  ReadAll r;
  std::vector<char> buf(70001);
  for (size_t i = 0;; ++i) {
    size_t got = 0;
    Status st = src.read(buf.data(), 1 + (i * 7919) % buf.size(), &got);
    if (!st.ok()) {
      r.error = st.message();
      return r;
    }
    if (got == 0) return r;
    r.bytes.append(buf.data(), got);
  }
}

// Reads as json_scan::Stream does from a source that lends its memory: mostly lend(), with a
// carry taken from the end of the span lent before (it may lie in the block being given back)
// and now and then a read() in between.  Each span's carry must sit right before it, intact.
ReadAll lend_all(ByteSource& src, std::string* carry_errors) {
  ReadAll r;
  std::mt19937_64 rng(3);
  const size_t headroom = src.lend_headroom();
  std::string_view last;  // the span lent before, with its carry
  std::vector<char> buf(4097);
  for (size_t i = 0;; ++i) {
    size_t got = 0;
    if (headroom == 0 || i % 5 == 4) {
      Status st = src.read(buf.data(), buf.size(), &got);
      if (!st.ok()) r.error = st.message();
      if (!st.ok() || got == 0) return r;
      r.bytes.append(buf.data(), got);
      last = {};
      continue;
    }
    const size_t carry_bytes = std::min<size_t>(last.size(), rng() % (headroom + 1));
    const std::string_view carry = last.substr(last.size() - carry_bytes);
    const std::string expected(carry);
    char* data = nullptr;
    Status st = src.lend(carry, &data, &got);
    if (!st.ok()) r.error = st.message();
    if (!st.ok() || got == 0) return r;
    if (std::string_view(data - carry_bytes, carry_bytes) != expected) {
      *carry_errors += "carry of " + std::to_string(carry_bytes) + " bytes changed at span " +
                       std::to_string(i) + "\n";
    }
    r.bytes.append(data, got);
    last = std::string_view(data - carry_bytes, carry_bytes + got);
  }
}

struct Variant {
  const char* name;
  ByteSourceOptions opts;
};

std::vector<Variant> variants() {
  ByteSourceOptions zlib_one;
  zlib_one.decoder = GzipDecoder::kZlib;
  zlib_one.background_min_bytes = UINT64_MAX;
  ByteSourceOptions fast_one;
  fast_one.background_min_bytes = UINT64_MAX;
  ByteSourceOptions zlib_bg;
  zlib_bg.decoder = GzipDecoder::kZlib;
  zlib_bg.background_min_bytes = 0;
  ByteSourceOptions fast_bg;
  fast_bg.background_min_bytes = 0;
  return {{"zlib", zlib_one}, {"fastest", fast_one}, {"zlib+thread", zlib_bg},
          {"fastest+thread", fast_bg}};
}

TEST(ByteSource, DecodersAndThreadGiveTheSameBytes) {
  const std::string text = trace_like(5 << 20);  // several of the thread's 1 MiB blocks
  const std::string half = text.substr(0, text.size() / 3);
  // Two members, then trailing garbage (ignored, as gzip(1) does).
  const std::string z = gzip(half, 1) + gzip(text.substr(half.size()), 9) + "junk";
  for (const Variant& v : variants()) {
    auto src = memory_byte_source(z, v.opts);
    ASSERT_TRUE(src->compressed());
    const ReadAll r = read_all(*src);
    EXPECT_EQ(r.error, "") << v.name;
    EXPECT_TRUE(r.bytes == text) << v.name << ": " << r.bytes.size() << " bytes";
    EXPECT_EQ(src->raw_consumed(), z.size()) << v.name;  // progress reaches 100%
    // Read in place (the thread lends its blocks; one thread has nothing to lend).
    auto lender = memory_byte_source(z, v.opts);
    EXPECT_EQ(lender->lend_headroom() > 0, v.opts.background_min_bytes == 0) << v.name;
    std::string carry_errors;
    const ReadAll lent = lend_all(*lender, &carry_errors);
    EXPECT_EQ(lent.error, "") << v.name;
    EXPECT_EQ(carry_errors, "") << v.name;
    EXPECT_TRUE(lent.bytes == text) << v.name << ": " << lent.bytes.size() << " bytes";
  }
}

TEST(ByteSource, TheFastestDecoderIsNamed) {
  const std::string z = gzip("{}");
  auto src = memory_byte_source(z);
  const std::string described = gzip_decoder_description();
  EXPECT_EQ(described.rfind(src->decoder(), 0), 0u) << described << " vs " << src->decoder();
#if GPUACCT_EXPECT_ISAL
  EXPECT_STREQ(src->decoder(), "isa-l");
#endif
  ByteSourceOptions zlib;
  zlib.decoder = GzipDecoder::kZlib;
  EXPECT_STREQ(memory_byte_source(z, zlib)->decoder(), "zlib");
  EXPECT_STREQ(memory_byte_source("{}")->decoder(), "none");
}

TEST(ByteSource, TruncationIsTheSameErrorEverywhere) {
  const std::string text = trace_like(3 << 20);
  const std::string z = gzip(text);
  for (size_t cut : {z.size() / 2, z.size() - 4, size_t{5}}) {
    for (const Variant& v : variants()) {
      auto src = memory_byte_source(std::string_view(z).substr(0, cut), v.opts);
      const ReadAll r = read_all(*src);
      EXPECT_EQ(r.error.rfind("truncated gzip stream: input ended at compressed byte offset ", 0),
                0u)
          << v.name << " cut " << cut << ": " << r.error;
      // Everything before the cut that the decoder could produce came through first.
      EXPECT_LE(r.bytes.size(), text.size()) << v.name;
      EXPECT_TRUE(text.compare(0, r.bytes.size(), r.bytes) == 0) << v.name;
      // In place: the same bytes, then the same error.
      auto lender = memory_byte_source(std::string_view(z).substr(0, cut), v.opts);
      std::string carry_errors;
      const ReadAll lent = lend_all(*lender, &carry_errors);
      EXPECT_EQ(lent.error, r.error) << v.name << " cut " << cut;
      EXPECT_EQ(carry_errors, "") << v.name;
      EXPECT_TRUE(lent.bytes == r.bytes) << v.name << " cut " << cut;
    }
  }
}

TEST(ByteSource, CorruptionIsTheSameErrorEverywhere) {
  const std::string text = trace_like(3 << 20);
  std::string z = gzip(text);
  // Flip bytes in the middle of the deflate data: the decoders may notice at different bytes,
  // but each says "corrupt gzip data" with an offset, after delivering only correct bytes.
  for (size_t i = z.size() / 2; i < z.size() / 2 + 64; ++i) z[i] = static_cast<char>(z[i] ^ 0x5a);
  for (const Variant& v : variants()) {
    auto src = memory_byte_source(z, v.opts);
    const ReadAll r = read_all(*src);
    EXPECT_EQ(r.error.rfind("corrupt gzip data at compressed byte offset ", 0), 0u)
        << v.name << ": " << r.error;
    EXPECT_LT(r.bytes.size(), text.size()) << v.name;
    if (v.opts.background_min_bytes == 0) {
      // The thread's error stays: a reader that asks again is not told "end of input".
      char buf[16];
      size_t got = 1;
      Status again = src->read(buf, sizeof(buf), &got);
      EXPECT_EQ(again.message(), r.error) << v.name;
      EXPECT_EQ(got, 0u) << v.name;
      // In place: the same bytes and error, and the error again after it.
      auto lender = memory_byte_source(z, v.opts);
      std::string carry_errors;
      const ReadAll lent = lend_all(*lender, &carry_errors);
      EXPECT_EQ(lent.error, r.error) << v.name;
      EXPECT_EQ(carry_errors, "") << v.name;
      EXPECT_TRUE(lent.bytes == r.bytes) << v.name;
      char* data = buf;
      EXPECT_EQ(lender->lend({}, &data, &got).message(), r.error) << v.name;
      EXPECT_EQ(got, 0u) << v.name;
    }
  }
  // A broken CRC-32 in the trailer: all the bytes, then the error.
  std::string crc = gzip(text);
  crc[crc.size() - 6] = static_cast<char>(crc[crc.size() - 6] ^ 1);
  for (const Variant& v : variants()) {
    auto src = memory_byte_source(crc, v.opts);
    const ReadAll r = read_all(*src);
    EXPECT_NE(r.error.find("corrupt gzip data"), std::string::npos) << v.name << ": " << r.error;
    EXPECT_NE(r.error.find("incorrect data check"), std::string::npos) << v.name << ": " << r.error;
  }
}

TEST(ByteSource, AbandonedThreadedSourceStops) {
  // The reader stops after one read while the thread waits for a free block: destruction must
  // not hang or crash.
  const std::string z = gzip(trace_like(8 << 20), 1);
  ByteSourceOptions bg;
  bg.background_min_bytes = 0;
  for (int i = 0; i < 20; ++i) {
    auto src = memory_byte_source(z, bg);
    char buf[100];
    size_t got = 0;
    ASSERT_TRUE(src->read(buf, sizeof(buf), &got).ok());
    EXPECT_EQ(got, sizeof(buf));
  }
}

}  // namespace
}  // namespace gpuacct
