// Property tests of byte safety (issue 14, item 1): random byte strings -- all 256 byte values,
// truncated multi-byte sequences, overlongs, surrogates, code points above U+10FFFF, stray
// continuation bytes, control bytes -- through json_text and through every writer that turns
// them into text (report JSON, recording metadata and names, timeline, terminal summary, CSV,
// cross-rank JSON) never throw, always give valid UTF-8, and round-trip when the input was
// valid UTF-8.
#include "analysis/model/json_text.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include "analysis/accounting/step_accountant.h"
#include "analysis/import/recording.h"
#include "analysis/job/job_merge.h"
#include "analysis/job/rank_inputs.h"
#include "analysis/model/name_table.h"
#include "analysis/model/run_metadata.h"
#include "analysis/report/report.h"
#include "analysis/report/timeline_writer.h"

namespace gpuacct {
namespace {

using nlohmann::json;

// Well-formed UTF-8 after the Unicode Standard's table 3-7, written independently of
// json_text.cc: the oracle for is_valid_utf8.
bool reference_valid(std::string_view s) {
  size_t i = 0;
  auto in = [&](size_t k, int lo, int hi) {
    if (i + k >= s.size()) return false;
    const int b = static_cast<unsigned char>(s[i + k]);
    return b >= lo && b <= hi;
  };
  while (i < s.size()) {
    const int b = static_cast<unsigned char>(s[i]);
    size_t n = 0;
    if (b <= 0x7F) {
      n = 1;
    } else if (b >= 0xC2 && b <= 0xDF) {
      n = in(1, 0x80, 0xBF) ? 2 : 0;
    } else if (b == 0xE0) {
      n = in(1, 0xA0, 0xBF) && in(2, 0x80, 0xBF) ? 3 : 0;
    } else if ((b >= 0xE1 && b <= 0xEC) || b == 0xEE || b == 0xEF) {
      n = in(1, 0x80, 0xBF) && in(2, 0x80, 0xBF) ? 3 : 0;
    } else if (b == 0xED) {
      n = in(1, 0x80, 0x9F) && in(2, 0x80, 0xBF) ? 3 : 0;
    } else if (b == 0xF0) {
      n = in(1, 0x90, 0xBF) && in(2, 0x80, 0xBF) && in(3, 0x80, 0xBF) ? 4 : 0;
    } else if (b >= 0xF1 && b <= 0xF3) {
      n = in(1, 0x80, 0xBF) && in(2, 0x80, 0xBF) && in(3, 0x80, 0xBF) ? 4 : 0;
    } else if (b == 0xF4) {
      n = in(1, 0x80, 0x8F) && in(2, 0x80, 0xBF) && in(3, 0x80, 0xBF) ? 4 : 0;
    }
    if (n == 0) return false;
    i += n;
  }
  return true;
}

bool has_control_byte(std::string_view s) {
  for (char c : s) {
    const auto b = static_cast<unsigned char>(c);
    if ((b < 0x20 && c != '\n') || b == 0x7F) return true;
  }
  return false;
}

// Random strings built from pieces, each piece one of the troublesome kinds.
class ByteStrings {
 public:
  explicit ByteStrings(uint64_t seed) : rng_(seed) {}

  std::string next() {
    std::string s;
    const int pieces = pick(0, 8);
    for (int p = 0; p < pieces; ++p) add_piece(s);
    return s;
  }
  // Only valid UTF-8 (for the round-trip properties).
  std::string next_valid() {
    std::string s;
    const int pieces = pick(0, 8);
    for (int p = 0; p < pieces; ++p) append_code_point(s, random_scalar());
    return s;
  }

 private:
  int pick(int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng_); }
  char byte() { return static_cast<char>(pick(0, 255)); }

  uint32_t random_scalar() {
    static const uint32_t kEdges[] = {0x0,     0x1F,     0x22,   0x5C,   0x7F,   0x80,
                                      0x7FF,   0x800,    0xD7FF, 0xE000, 0xFFFD, 0xFFFF,
                                      0x10000, 0x10FFFF, 0xE9,   0x1F600};
    if (pick(0, 3) == 0) return kEdges[pick(0, static_cast<int>(std::size(kEdges)) - 1)];
    uint32_t cp = 0;
    do {
      cp = static_cast<uint32_t>(pick(0, 0x10FFFF));
    } while (cp >= 0xD800 && cp <= 0xDFFF);
    return cp;
  }
  static void append_code_point(std::string& s, uint32_t cp) {
    auto c = [](uint32_t v) { return static_cast<char>(v); };
    if (cp < 0x80) {
      s += c(cp);
    } else if (cp < 0x800) {
      s += c(0xC0 | (cp >> 6));
      s += c(0x80 | (cp & 0x3F));
    } else if (cp < 0x10000) {
      s += c(0xE0 | (cp >> 12));
      s += c(0x80 | ((cp >> 6) & 0x3F));
      s += c(0x80 | (cp & 0x3F));
    } else {
      s += c(0xF0 | (cp >> 18));
      s += c(0x80 | ((cp >> 12) & 0x3F));
      s += c(0x80 | ((cp >> 6) & 0x3F));
      s += c(0x80 | (cp & 0x3F));
    }
  }

  void add_piece(std::string& s) {
    switch (pick(0, 9)) {
      case 0:  // any bytes
        for (int k = pick(1, 6); k > 0; --k) s += byte();
        break;
      case 1: {  // a valid sequence cut short
        std::string cp;
        append_code_point(cp, static_cast<uint32_t>(pick(0x80, 0x10FFFF)));
        s += cp.substr(0, static_cast<size_t>(pick(1, static_cast<int>(cp.size()) - 1)));
        break;
      }
      case 2: {  // overlong encodings of ASCII and of U+07FF
        static const char* const kOverlong[] = {"\xC0\x80",         "\xC1\xBF",
                                                "\xE0\x80\xAF",     "\xE0\x9F\xBF",
                                                "\xF0\x80\x80\xAF", "\xF0\x8F\xBF\xBF"};
        s += kOverlong[pick(0, 5)];
        break;
      }
      case 3: {  // encoded surrogates (CESU-style)
        const uint32_t sur = static_cast<uint32_t>(pick(0xD800, 0xDFFF));
        s += static_cast<char>(0xED);
        s += static_cast<char>(0x80 | ((sur >> 6) & 0x3F));
        s += static_cast<char>(0x80 | (sur & 0x3F));
        break;
      }
      case 4:  // above U+10FFFF, and lead bytes that never start a sequence
        s += pick(0, 1) ? std::string("\xF4\x90\x80\x80")
                        : std::string(1, static_cast<char>(pick(0xF5, 0xFF)));
        break;
      case 5:  // stray continuation bytes
        for (int k = pick(1, 3); k > 0; --k) s += static_cast<char>(pick(0x80, 0xBF));
        break;
      case 6:  // control bytes, NUL, quote, backslash, an escape sequence
        s += std::string("\0\x1b[31m\"\\\n\t\x7f", 12).substr(static_cast<size_t>(pick(0, 11)));
        break;
      case 7:  // Latin-1 text
        s += "scen\xE9narios";
        break;
      default:  // valid text
        append_code_point(s, random_scalar());
    }
  }

  std::mt19937_64 rng_;
};

constexpr int kStrings = 20000;

TEST(JsonText, IsValidUtf8AgreesWithTheStandardsTable) {
  ByteStrings gen(1);
  for (int i = 0; i < kStrings; ++i) {
    const std::string s = i % 2 ? gen.next() : gen.next_valid();
    ASSERT_EQ(is_valid_utf8(s), reference_valid(s)) << testing::PrintToString(s);
  }
  for (int b = 0; b < 256; ++b) {  // every single byte
    const std::string s(1, static_cast<char>(b));
    EXPECT_EQ(is_valid_utf8(s), b < 0x80) << b;
  }
}

TEST(JsonText, SafeTextIsValidIdempotentAndKeepsValidInput) {
  ByteStrings gen(2);
  for (int i = 0; i < kStrings; ++i) {
    const std::string s = gen.next();
    const std::string safe = json_safe_utf8(s);
    ASSERT_TRUE(reference_valid(safe)) << testing::PrintToString(s);
    EXPECT_EQ(json_safe_utf8(safe), safe);
    if (reference_valid(s)) {
      EXPECT_EQ(safe, s);
    }
    const std::string term = terminal_text(s);
    EXPECT_TRUE(reference_valid(term));
    EXPECT_FALSE(has_control_byte(term) || term.find('\n') != std::string::npos);
    for (size_t n = 0; n <= safe.size(); ++n) {
      ASSERT_TRUE(reference_valid(utf8_prefix(safe, n)));
      ASSERT_LE(utf8_prefix(safe, n).size(), n);
    }
  }
  EXPECT_EQ(json_safe_utf8(std::string("a\xFF"
                                       "b\xC3",
                                       4)),
            "a\\xFFb\\xC3");
  EXPECT_EQ(json_safe_utf8("\xED\xA0\x80"), "\\xED\\xA0\\x80");  // a surrogate
  EXPECT_EQ(json_safe_utf8("\xC0\x80"), "\\xC0\\x80");           // an overlong NUL
  EXPECT_EQ(utf8_prefix("caf\xC3\xA9", 4), "caf");
}

// A valid name cut at any byte (the hot path truncates names to a fixed size) stays valid
// text once the cut character is dropped, and loses nothing else.
TEST(JsonText, ACutValidNameStaysValidWithoutItsCutCharacter) {
  ByteStrings gen(6);
  for (int i = 0; i < kStrings / 4; ++i) {
    const std::string s = gen.next_valid();
    for (size_t n = 0; n <= s.size(); ++n) {
      const std::string_view cut = utf8_without_cut_character(std::string_view(s).substr(0, n));
      ASSERT_TRUE(reference_valid(cut)) << testing::PrintToString(s) << " cut at " << n;
      ASSERT_EQ(cut, utf8_prefix(s, n));  // the longest valid prefix
    }
  }
  EXPECT_EQ(utf8_without_cut_character("caf\xC3"), "caf");
  EXPECT_EQ(utf8_without_cut_character("\xF0\x9F\x98"), "");
  EXPECT_EQ(utf8_without_cut_character("ok\xFF"), "ok\xFF");  // not a cut: left to escaping
}

// dump_json: strings and keys nobody made safe still serialise, in the same spelling; valid
// text round-trips through dump_json and a strict parser.
TEST(JsonText, DumpJsonNeverThrowsOnStringsAndRoundTripsValidText) {
  ByteStrings gen(3);
  for (int i = 0; i < kStrings; ++i) {
    const std::string s = i % 2 ? gen.next() : gen.next_valid();
    json j = {{"name", s}, {"list", json::array({s, 1, nullptr})}, {"nested", {{s, s}}}};
    std::string text;
    ASSERT_NO_THROW(text = dump_json(j));
    ASSERT_TRUE(reference_valid(text));
    const json back = json::parse(text);
    EXPECT_EQ(back["name"], json_safe_utf8(s));
    EXPECT_EQ(back["list"][0], json_safe_utf8(s));
    EXPECT_EQ(back["nested"][json_safe_utf8(s)], json_safe_utf8(s));
    if (reference_valid(s)) {
      EXPECT_EQ(back["name"].get<std::string>(), s);
    }
    std::string lit;
    append_json_string(lit, s);
    EXPECT_EQ(json::parse(lit).get<std::string>(), json_safe_utf8(s));
  }
}

TEST(NameTable, InternedTextIsSafeAndTheSameNameGetsTheSameId) {
  ByteStrings gen(4);
  NameTable names;
  for (int i = 0; i < kStrings; ++i) {
    const std::string s = gen.next();
    const NameId id = names.intern(s);
    ASSERT_TRUE(reference_valid(names.text(id)));
    EXPECT_EQ(names.text(id), json_safe_utf8(s));
    EXPECT_EQ(names.intern(s), id);
    EXPECT_EQ(names.intern(json_safe_utf8(s)), id);  // read back from a report: the same name
  }
}

// ---- every writer --------------------------------------------------------------------------

RunMetadata random_metadata(ByteStrings& gen, bool valid) {
  auto str = [&] { return valid ? gen.next_valid() : gen.next(); };
  RunMetadata m;
  m.source = str();
  m.source_path = str();
  m.hostname = str();
  m.command = str();
  m.gpuacct_version = str();
  m.pid = 7;
  m.rank = 1;
  m.world_size = 2;
  DeviceInfo d;
  d.name = str();
  d.compute_major = 9;
  m.devices.push_back(d);
  m.other_accelerator_events.emplace_back(str() + "x", 3);  // "x": never empty
  return m;
}

// Two steps whose kernels, ranges and calls carry names made of the random bytes.
void account_named_events(ByteStrings& gen, NameTable& names, EventSink& sink) {
  EventBatch b;
  for (int i = 0; i < 2; ++i) {
    const TimeNs t0 = 1'000'000 + i * 1'000'000;
    b.ranges.push_back({t0, t0 + 1'000'000, i, 1, names.intern(gen.next()), RangeKind::kStep, {}});
    b.ranges.push_back({t0, t0 + 200'000, -1, 1, names.intern(gen.next()), RangeKind::kData, {}});
    HostApiCall call;
    call.start = t0 + 250'000;
    call.end = t0 + 260'000;
    call.correlation_id = static_cast<uint64_t>(i) + 1;
    call.thread = 1;
    call.name = names.intern(gen.next());
    call.kind = HostApiKind::kLaunch;
    b.api_calls.push_back(call);
    GpuOp op;
    op.start = t0 + 300'000;
    op.end = t0 + 900'000;
    op.correlation_id = call.correlation_id;
    op.name = names.intern(gen.next());
    b.gpu_ops.push_back(op);
  }
  for (const auto& r : b.ranges) sink.on_range(r);
  for (const auto& c : b.api_calls) sink.on_api_call(c);
  for (const auto& o : b.gpu_ops) sink.on_gpu_op(o);
}

TEST(ByteSafety, EveryWriterGivesValidUtf8AndMetadataRoundTripsThroughARecording) {
  ByteStrings gen(5);
  char tmpl[] = "/tmp/gpuacct_json_text_test_XXXXXX";
  ASSERT_NE(mkdtemp(tmpl), nullptr);
  const std::string path = std::string(tmpl) + "/r.gpuacct";
  for (int i = 0; i < 300; ++i) {
    SCOPED_TRACE(i);
    const bool valid = i % 3 == 0;
    const RunMetadata meta = random_metadata(gen, valid);
    NameTable names;
    StepAccountant acc;
    TimelineWriter timeline(names);
    acc.set_row_sink([&](const StepRow& r) { timeline.on_step_row(r); });
    TeeSink tee({&acc, &timeline});
    account_named_events(gen, names, tee);
    acc.finish();
    // The report (JSON and terminal), the CSV, the timeline, the job view (JSON and terminal).
    const json report = build_report(acc, meta, names);
    const std::string text = dump_json(report, 2);
    ASSERT_TRUE(reference_valid(text));
    const json back = json::parse(text);
    EXPECT_EQ(back["run"]["command"], json_safe_utf8(meta.command));
    if (valid) {
      EXPECT_EQ(back["run"]["hostname"].get<std::string>(), meta.hostname);
    }
    const auto rendered = render_terminal_summary(back, /*color=*/false);
    ASSERT_TRUE(rendered.ok());
    const std::string& term = rendered.value();
    EXPECT_TRUE(reference_valid(term));
    EXPECT_FALSE(has_control_byte(term)) << term;
    EXPECT_TRUE(reference_valid(step_rows_csv(acc.rows())));
    timeline.set_metadata(meta);
    const std::string tl = timeline.to_json();
    ASSERT_TRUE(reference_valid(tl));
    EXPECT_TRUE(json::accept(tl));
    JobInputs job;
    check_job_ranks({rank_from_report(report, acc.rows(), meta.source_path, "x"),
                     rank_from_report(report, acc.rows(), meta.command, "x")},
                    &job);
    const JobView view = build_job_view(job);
    EXPECT_TRUE(reference_valid(dump_json(job_view_to_json(view))));
    EXPECT_TRUE(reference_valid(render_job_view(view)));
    // The recording: names and metadata read back as the report shows them.
    RecordingWriter w;
    ASSERT_TRUE(w.open(path).ok());
    ASSERT_TRUE(w.write_new_names(names).ok());
    ASSERT_TRUE(w.write_metadata(meta).ok());
    ASSERT_TRUE(w.close().ok());
    NameTable names2;
    StepAccountant sink;
    Stats stats;
    auto contents = read_recording(path, names2, sink, stats);
    ASSERT_TRUE(contents.ok()) << contents.status().message();
    const RunMetadata& m2 = contents->metadata;
    EXPECT_EQ(dump_json(run_metadata_to_json(m2)), dump_json(run_metadata_to_json(meta)));
    if (valid) {
      EXPECT_EQ(m2.command, meta.command);
      EXPECT_EQ(m2.hostname, meta.hostname);
      EXPECT_EQ(m2.devices.at(0).name, meta.devices[0].name);
      EXPECT_EQ(m2.other_accelerator_events, meta.other_accelerator_events);
    }
    ASSERT_EQ(names2.size(), names.size());
    for (NameId id = 0; id < names.size(); ++id) EXPECT_EQ(names2.text(id), names.text(id));
  }
  std::remove(path.c_str());
  rmdir(tmpl);
}

// Recordings written before run_metadata_to_json name the compute capability
// compute_major / compute_minor: still read.
TEST(ByteSafety, OlderRecordingsDeviceKeysStillRead) {
  const std::string dir = GPUACCT_SOURCE_DIR "/examples/data/sample.gpuacct";
  NameTable names;
  StepAccountant sink;
  Stats stats;
  auto contents = read_recording(dir, names, sink, stats);
  ASSERT_TRUE(contents.ok()) << contents.status().message();
  ASSERT_FALSE(contents->metadata.devices.empty());
  EXPECT_EQ(contents->metadata.devices[0].compute_major, 9);
  EXPECT_EQ(contents->metadata.devices[0].compute_minor, 0);
}

}  // namespace
}  // namespace gpuacct
