#include "analysis/model/collective_rows.h"

#include <unistd.h>

#include <ctime>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include <gtest/gtest.h>

namespace gpuacct {
namespace {

namespace fs = std::filesystem;

std::string read_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(in)), {});
}

class CollectiveRows : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("gpuacct_collective_rows_" + std::to_string(::getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string at(const std::string& name) const { return (dir_ / name).string(); }
  static void write(const std::string& path, const std::string& bytes) {
    std::ofstream(path, std::ios::binary) << bytes;
  }
  fs::path dir_;
};

// Values at the edges of each type, or anything.
template <typename Int>
Int extreme(std::mt19937_64& rng) {
  switch (rng() % 6) {
    case 0:
      return std::numeric_limits<Int>::min();
    case 1:
      return std::numeric_limits<Int>::max();
    case 2:
      return Int{0};
    case 3:
      return static_cast<Int>(-1);
    default:
      return static_cast<Int>(rng());
  }
}

void random_name(std::mt19937_64& rng, ShortName* name) {
  static constexpr char kAwkward[] = {',', '\n', '\r', '"', ' ', '#', '\xff', '\xc3', '\x80'};
  const size_t length = rng() % 16;  // 15 at most: the contract's limit
  for (size_t i = 0; i < length; ++i) {
    const uint64_t pick = rng() % 3;
    if (pick == 0) {
      name->text[i] = kAwkward[rng() % sizeof(kAwkward)];
    } else if (pick == 1) {
      name->text[i] = static_cast<char>(1 + rng() % 255);  // any byte but NUL
    } else {
      name->text[i] = static_cast<char>('a' + rng() % 26);
    }
  }
}

CollectiveRecord random_record(std::mt19937_64& rng) {
  CollectiveRecord r;
  r.comm_hash = extreme<uint64_t>(rng);
  r.seq = extreme<uint64_t>(rng);
  r.bytes = extreme<uint64_t>(rng);
  r.host_enqueue = extreme<int64_t>(rng);
  r.gpu_start = extreme<int64_t>(rng);
  r.gpu_end = extreme<int64_t>(rng);
  r.correlation_id = rng();  // not in the file
  r.step_index = extreme<int64_t>(rng);
  r.rank = extreme<int32_t>(rng);
  r.nranks = extreme<int32_t>(rng);
  r.stream = extreme<uint32_t>(rng);
  r.device = extreme<uint16_t>(rng);
  r.type = static_cast<CollectiveType>(rng() % 9);
  r.source = static_cast<CollectiveSource>(rng() % 4);
  r.kernel_ops = extreme<uint16_t>(rng);
  random_name(rng, &r.datatype);
  random_name(rng, &r.algo);
  random_name(rng, &r.proto);
  return r;
}

std::string name_of(const ShortName& n) { return std::string(n.text, strnlen(n.text, 16)); }

// What the file keeps of a name: [A-Za-z0-9_.+-], other bytes as '_'.
std::string sanitized(const ShortName& n) {
  std::string out = name_of(n);
  for (char& c : out) {
    const bool keep = (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
                      c == '_' || c == '.' || c == '+' || c == '-';
    if (!keep) c = '_';
  }
  return out;
}

void expect_same_row(const CollectiveRecord& want, const CollectiveRecord& got, size_t i) {
  SCOPED_TRACE("row " + std::to_string(i));
  EXPECT_EQ(got.comm_hash, want.comm_hash);
  EXPECT_EQ(got.seq, want.seq);
  EXPECT_EQ(got.bytes, want.bytes);
  EXPECT_EQ(got.host_enqueue, want.host_enqueue);
  EXPECT_EQ(got.gpu_start, want.gpu_start);
  EXPECT_EQ(got.gpu_end, want.gpu_end);
  EXPECT_EQ(got.correlation_id, 0u);
  EXPECT_EQ(got.step_index, want.step_index);
  EXPECT_EQ(got.rank, want.rank);
  EXPECT_EQ(got.nranks, want.nranks);
  EXPECT_EQ(got.stream, want.stream);
  EXPECT_EQ(got.device, want.device);
  EXPECT_EQ(got.type, want.type);
  EXPECT_EQ(got.source, want.source);
  EXPECT_EQ(got.kernel_ops, want.kernel_ops);
  EXPECT_EQ(name_of(got.datatype), sanitized(want.datatype));
  EXPECT_EQ(name_of(got.algo), sanitized(want.algo));
  EXPECT_EQ(name_of(got.proto), sanitized(want.proto));
}

CollectiveRowsHeader sample_header() {
  CollectiveRowsHeader h;
  h.metadata.rank = 3;
  h.metadata.world_size = 16;
  h.metadata.hostname = "node\xff-7";  // not UTF-8: written as \xFF
  h.metadata.pid = 4242;
  h.metadata.job_id = "job,42";
  h.metadata.source = "injected";
  h.identity = CollectiveSource::kKernelOrder;
  h.identity_note = "no NCCL profiler plugin events";
  return h;
}

std::vector<CollectiveRecord> random_records(size_t n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<CollectiveRecord> out;
  for (size_t i = 0; i < n; ++i) out.push_back(random_record(rng));
  return out;
}

// Writes `records` through the writer and returns the file's bytes.
std::string write_rows(const std::string& path, const std::vector<CollectiveRecord>& records,
                       int64_t lost = 0) {
  CollectiveRowWriter writer;
  EXPECT_TRUE(writer.open(path, sample_header()).ok());
  for (const auto& r : records) writer.append(r);
  writer.count_lost(lost);
  EXPECT_EQ(writer.rows(), static_cast<int64_t>(records.size()));
  const Status st = writer.finish();
  EXPECT_TRUE(st.ok()) << st.message();
  return read_bytes(path);
}

TEST_F(CollectiveRows, RandomRecordsRoundTripThroughFileAndBuffer) {
  // 20000 rows: several MiB, so the file reader crosses its chunk boundaries mid-line.
  const auto records = random_records(20000, 15);
  const std::string path = at("r.collectives.csv");
  const std::string bytes = write_rows(path, records, /*lost=*/3);
  EXPECT_FALSE(fs::exists(path + ".tmp." + std::to_string(::getpid())));

  for (const bool from_file : {true, false}) {
    SCOPED_TRACE(from_file ? "file" : "buffer");
    std::vector<CollectiveRecord> got;
    const auto on_row = [&](const CollectiveRecord& r) { got.push_back(r); };
    auto contents = from_file ? read_collective_rows(path, on_row)
                              : read_collective_rows_buffer(bytes, "mem", on_row);
    ASSERT_TRUE(contents.ok()) << contents.status().message();
    EXPECT_EQ(contents->rows_read, 20000);
    EXPECT_EQ(contents->rows_lost, 3);
    EXPECT_EQ(contents->bad_lines, 0);
    EXPECT_FALSE(contents->cut_off);
    const CollectiveRowsHeader& h = contents->header;
    EXPECT_EQ(h.metadata.rank, 3);
    EXPECT_EQ(h.metadata.world_size, 16);
    EXPECT_EQ(h.metadata.hostname, "node\\xFF-7");
    EXPECT_EQ(h.metadata.pid, 4242);
    EXPECT_EQ(h.metadata.job_id, "job,42");
    EXPECT_EQ(h.metadata.source, "injected");
    EXPECT_EQ(h.identity, CollectiveSource::kKernelOrder);
    EXPECT_EQ(h.identity_note, "no NCCL profiler plugin events");
    ASSERT_EQ(got.size(), records.size());
    for (size_t i = 0; i < got.size(); ++i) expect_same_row(records[i], got[i], i);
  }
}

TEST_F(CollectiveRows, RowLinesAreNeverQuotedAndHaveSeventeenFields) {
  std::mt19937_64 rng(7);
  for (int i = 0; i < 5000; ++i) {
    const std::string line = collective_row_csv(random_record(rng));
    ASSERT_EQ(line.find_first_of("\"\n\r"), std::string::npos) << line;
    EXPECT_EQ(std::count(line.begin(), line.end(), ','), 16) << line;
  }
  CollectiveRecord r;
  r.comm_hash = 0x9f2c0a11d2e4b7aaULL;
  r.seq = 120;
  r.step_index = 3;
  r.type = CollectiveType::kAllReduce;
  r.source = CollectiveSource::kNcclPlugin;
  std::strcpy(r.datatype.text, "bf16");
  EXPECT_EQ(collective_row_csv(r),
            "3,9f2c0a11d2e4b7aa,120,AllReduce,,bf16,,,,,0,0,0,0,0,nccl_plugin,");
  r.kernel_ops = 2;  // its kernel also ran another operation
  EXPECT_EQ(collective_row_csv(r),
            "3,9f2c0a11d2e4b7aa,120,AllReduce,,bf16,,,,,0,0,0,0,0,nccl_plugin,2");
}

// A file written before the kernel_ops column existed reads alike, kernel_ops unknown (0); a
// column line that is neither is refused.
TEST_F(CollectiveRows, FilesWithoutTheKernelOpsColumnStillRead) {
  const std::string old_file =
      "# gpuacct.collectives/1 {\"rank\":1,\"identity\":\"nccl_plugin\"}\n"
      "step_index,comm,seq,collective,bytes,datatype,algo,proto,rank,nranks,device,stream,"
      "host_enqueue_ns,gpu_start_ns,gpu_end_ns,source\n"
      "3,9f2c0a11d2e4b7aa,120,AllReduce,64,bf16,RING,LL,1,8,0,13,100,200,300,nccl_plugin\n"
      "# end {\"rows\":1,\"rows_lost\":0}\n";
  std::vector<CollectiveRecord> got;
  auto contents = read_collective_rows_buffer(old_file, "old",
                                              [&](const CollectiveRecord& r) { got.push_back(r); });
  ASSERT_TRUE(contents.ok()) << contents.status().message();
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(contents->bad_lines, 0);
  EXPECT_EQ(got[0].seq, 120u);
  EXPECT_EQ(got[0].gpu_end, 300);
  EXPECT_EQ(got[0].kernel_ops, 0);
  // A row of the new shape under the old column line is not one.
  std::string mixed = old_file;
  mixed.insert(
      mixed.find("# end"),
      "4,9f2c0a11d2e4b7aa,121,AllReduce,64,bf16,RING,LL,1,8,0,13,100,200,300,nccl_plugin,2\n");
  got.clear();
  contents = read_collective_rows_buffer(mixed, "mixed",
                                         [&](const CollectiveRecord& r) { got.push_back(r); });
  ASSERT_TRUE(contents.ok());
  EXPECT_EQ(got.size(), 1u);
  EXPECT_EQ(contents->bad_lines, 1);
  std::string other = old_file;
  other.replace(other.find(",source\n"), 8, ",source,extra\n");
  EXPECT_FALSE(read_collective_rows_buffer(other, "other", [](const CollectiveRecord&) {}).ok());
}

// A file cut at any byte (its writer killed): every whole row before the cut, cut_off, and the
// torn last line (if any) counted as bad -- never an error.
TEST_F(CollectiveRows, CutAnywhereGivesTheWholeRowsBeforeTheCut) {
  const auto records = random_records(300, 99);
  const std::string bytes = write_rows(at("c.csv"), records);
  const size_t body = bytes.find('\n', bytes.find('\n') + 1) + 1;  // after the column line
  const size_t trailer = bytes.rfind("# end ");
  std::mt19937_64 rng(5);
  for (int trial = 0; trial < 400; ++trial) {
    const size_t cut = body + rng() % (trailer - body);
    const std::string_view kept(bytes.data(), cut);
    const auto whole = static_cast<int64_t>(std::count(kept.begin() + static_cast<long>(body),
                                                       kept.end(), '\n'));
    const bool partial = kept.back() != '\n';
    std::vector<CollectiveRecord> got;
    auto contents = read_collective_rows_buffer(
        kept, "cut", [&](const CollectiveRecord& r) { got.push_back(r); });
    ASSERT_TRUE(contents.ok()) << contents.status().message();
    EXPECT_TRUE(contents->cut_off);
    EXPECT_EQ(contents->rows_read + contents->bad_lines, whole + (partial ? 1 : 0));
    EXPECT_GE(contents->rows_read, whole);
    ASSERT_LE(got.size(), records.size());
    for (size_t i = 0; i < got.size(); ++i) expect_same_row(records[i], got[i], i);
  }
  // The same through the file reader, cut inside the trailer.
  write(at("cut.csv"), bytes.substr(0, trailer + 9));
  auto contents = read_collective_rows(at("cut.csv"), [](const CollectiveRecord&) {});
  ASSERT_TRUE(contents.ok()) << contents.status().message();
  EXPECT_TRUE(contents->cut_off);
  EXPECT_EQ(contents->rows_read, 300);
  EXPECT_EQ(contents->bad_lines, 1);
}

TEST_F(CollectiveRows, GarbageLinesAreSkippedAndCounted) {
  const auto records = random_records(50, 3);
  const std::string bytes = write_rows(at("g.csv"), records);
  const std::vector<std::string> garbage = {
      "",
      "just words",
      "1,2,3",                                                              // too few fields
      "3,9f2c0a11d2e4b7aa,120,AllReduce,,bf16,,,,,0,0,0,0,0,nccl_plugin,x",  // too many
      "3,9f2c0a11d2e4b7aa,x,AllReduce,,bf16,,,,,0,0,0,0,0,nccl_plugin",      // seq not a number
      "3,19f2c0a11d2e4b7aa,1,AllReduce,,bf16,,,,,0,0,0,0,0,nccl_plugin",     // 17 hex digits
      "3,9f,1,AllRedux,,bf16,,,,,0,0,0,0,0,nccl_plugin",                     // unknown type
      "3,9f,1,AllReduce,,bf16,,,,,0,0,0,0,0,nccl",                           // unknown source
      "3,9f,1,AllReduce,,bf16 x,,,,,0,0,0,0,0,kineto",                       // bad name byte
      "3,9f,1,AllReduce,,0123456789abcdef,,,,,0,0,0,0,0,kineto",             // name too long
      "3,9f,1,AllReduce,,,,,2147483648,,0,0,0,0,0,kineto",                   // rank > int32
      "3,9f,1,AllReduce,,,,,,,65536,0,0,0,0,kineto",                         // device > uint16
      "3,9f,1,AllReduce,-1,,,,,,0,0,0,0,0,kineto",                           // negative bytes
      "# a comment",
      std::string("\x00\xff\x01,,,,", 7),
  };
  // Garbage after the column line and before each of the first rows, and after the trailer.
  std::string mixed;
  size_t pos = 0;
  for (int line = 0; line < 2; ++line) {
    const size_t nl = bytes.find('\n', pos) + 1;
    mixed.append(bytes, pos, nl - pos);
    pos = nl;
  }
  for (const std::string& g : garbage) {
    mixed += g + "\n";
    const size_t nl = bytes.find('\n', pos) + 1;
    mixed.append(bytes, pos, nl - pos);
    pos = nl;
  }
  mixed.append(bytes, pos, std::string::npos);
  mixed += "3,9f,1,AllReduce,,,,,,,0,0,0,0,0,kineto\n";  // a row after the trailer: not taken
  std::vector<CollectiveRecord> got;
  auto contents =
      read_collective_rows_buffer(mixed, "mixed", [&](const CollectiveRecord& r) { got.push_back(r); });
  ASSERT_TRUE(contents.ok()) << contents.status().message();
  EXPECT_EQ(contents->bad_lines, static_cast<int64_t>(garbage.size()) + 1);
  EXPECT_FALSE(contents->cut_off);
  ASSERT_EQ(got.size(), records.size());
  for (size_t i = 0; i < got.size(); ++i) expect_same_row(records[i], got[i], i);

  // A line over the reader's 1 MiB limit is skipped (memory stays bounded), the rest read.
  const size_t third_line = mixed.find('\n', mixed.find('\n') + 1) + 1;
  std::string overlong = mixed.substr(0, third_line) + std::string(3u << 20, '7') + "\n" +
                         mixed.substr(third_line);
  write(at("overlong.csv"), overlong);
  got.clear();
  contents = read_collective_rows(at("overlong.csv"),
                                  [&](const CollectiveRecord& r) { got.push_back(r); });
  ASSERT_TRUE(contents.ok()) << contents.status().message();
  EXPECT_EQ(contents->bad_lines, static_cast<int64_t>(garbage.size()) + 2);
  EXPECT_EQ(got.size(), records.size());
}

TEST_F(CollectiveRows, EmptyHeaderOnlyAndForeignFiles) {
  const auto none = [](const CollectiveRecord&) { ADD_FAILURE() << "no row expected"; };
  write(at("empty.csv"), "");
  auto c = read_collective_rows(at("empty.csv"), none);
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().message(), at("empty.csv") + ": empty file, not a collectives rows file");

  const std::string header = "# gpuacct.collectives/1 {\"rank\":1,\"identity\":\"kineto\"}\n";
  for (const bool from_file : {true, false}) {
    write(at("h.csv"), header);
    c = from_file ? read_collective_rows(at("h.csv"), none)
                  : read_collective_rows_buffer(header, "h", none);
    ASSERT_TRUE(c.ok()) << c.status().message();
    EXPECT_TRUE(c->cut_off);
    EXPECT_EQ(c->rows_read, 0);
    EXPECT_EQ(c->header.metadata.rank, 1);
    EXPECT_EQ(c->header.identity, CollectiveSource::kKineto);
  }
  // A finished file with no rows is not cut off.
  const std::string path = at("zero.csv");
  write_rows(path, {});
  c = read_collective_rows(path, none);
  ASSERT_TRUE(c.ok());
  EXPECT_FALSE(c->cut_off);
  EXPECT_EQ(c->bad_lines, 0);

  const auto error_of = [&](const std::string& bytes) {
    write(at("x.csv"), bytes);
    auto r = read_collective_rows(at("x.csv"), none);
    auto m = read_collective_rows_buffer(bytes, at("x.csv"), none);
    EXPECT_FALSE(r.ok());
    EXPECT_FALSE(m.ok());
    EXPECT_EQ(r.status().message(), m.status().message());
    return r.ok() ? std::string("ok") : r.status().message();
  };
  const std::string x = at("x.csv");
  const std::string not_rows = x + ": not a collectives rows file (it does not begin with "
                                   "'# gpuacct.collectives/1 {...}')";
  EXPECT_EQ(error_of("step_index,comm\n"), not_rows);
  EXPECT_EQ(error_of("{\"schema\": \"gpuacct.steps/1\"}\n"), not_rows);
  EXPECT_EQ(error_of(std::string(3u << 20, 'z')), not_rows);
  EXPECT_EQ(error_of("# gpuacct.collectives/2 {}\nstep_index\n"),
            x + ": collectives rows file of schema 'gpuacct.collectives/2'; this gpuacct reads "
                "gpuacct.collectives/1");
  EXPECT_EQ(error_of("# gpuacct.collectives/1 [1,2\n"),
            x + ": the header of a collectives rows file is not a JSON object");
  EXPECT_EQ(error_of("# gpuacct.collectives/1 {}\nstep_index,comm,seq\n"),
            x + ": its column line is not that of gpuacct.collectives/1 ('step_index,comm,seq')");
  EXPECT_EQ(error_of("# gpuacct.collectives/1 {}"), x + ": cut off inside its header line");
  EXPECT_NE(error_of("").find("empty file"), std::string::npos);

  write(at("dir_is_here"), "");
  fs::remove(at("dir_is_here"));
  fs::create_directory(at("dir_is_here"));
  c = read_collective_rows(at("dir_is_here"), none);
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().message(), at("dir_is_here") + ": is a directory, not a regular file");
}

// A live writer killed after a flush leaves its rows in the temporary file: read as cut off.
TEST_F(CollectiveRows, FlushedRowsOfAKilledWriterAreReadCutOff) {
  const auto records = random_records(7, 21);
  CollectiveRowWriter writer;
  ASSERT_TRUE(writer.open(at("live.collectives.csv"), sample_header()).ok());
  for (const auto& r : records) writer.append(r);
  ASSERT_TRUE(writer.flush().ok());
  ASSERT_FALSE(writer.temp_path().empty());
  std::vector<CollectiveRecord> got;
  auto c = read_collective_rows(writer.temp_path(),
                                [&](const CollectiveRecord& r) { got.push_back(r); });
  ASSERT_TRUE(c.ok()) << c.status().message();
  EXPECT_TRUE(c->cut_off);
  EXPECT_EQ(c->bad_lines, 0);
  ASSERT_EQ(got.size(), records.size());
  for (size_t i = 0; i < got.size(); ++i) expect_same_row(records[i], got[i], i);
  EXPECT_FALSE(fs::exists(at("live.collectives.csv")));  // not committed
}

TEST_F(CollectiveRows, WriterRefusesADirectoryAndLeavesNothingBehind) {
  CollectiveRowWriter writer;
  const Status st = writer.open(dir_.string(), sample_header());
  EXPECT_FALSE(st.ok());
  writer.append(CollectiveRecord{});
  EXPECT_EQ(writer.rows(), 0);
  EXPECT_EQ(writer.rows_lost(), 1);
  EXPECT_FALSE(writer.finish().ok());
  EXPECT_TRUE(fs::is_empty(dir_));
}

// Not a timing assertion (machines differ): prints the rate, which the reader is designed for
// (>= 5 M rows/s on one core, docs/job_view.md).
TEST_F(CollectiveRows, ReadRate) {
  // Rows as a real run writes them (times since the epoch, a few communicators).
  std::vector<CollectiveRecord> records(1000);
  for (size_t i = 0; i < records.size(); ++i) {
    CollectiveRecord& r = records[i];
    r.step_index = static_cast<int64_t>(i / 40);
    r.comm_hash = 0x9f2c0a11d2e4b7aaULL + i % 3;
    r.seq = 100000 + i;
    r.bytes = 67108864;
    r.type = CollectiveType::kAllReduce;
    std::strcpy(r.datatype.text, "bf16");
    std::strcpy(r.algo.text, "RING");
    std::strcpy(r.proto.text, "SIMPLE");
    r.rank = 5;
    r.nranks = 64;
    r.stream = 13;
    r.host_enqueue = 1764600000000000000 + static_cast<int64_t>(i) * 1000000;
    r.gpu_start = r.host_enqueue + 20000;
    r.gpu_end = r.gpu_start + 500000;
    r.source = CollectiveSource::kNcclPlugin;
  }
  CollectiveRowWriter writer;
  ASSERT_TRUE(writer.open(at("rate.csv"), sample_header()).ok());
  for (int i = 0; i < 1000; ++i)
    for (const auto& r : records) writer.append(r);
  ASSERT_TRUE(writer.finish().ok());
  int64_t seen = 0;
  // CPU time of this thread: the rate of one core, whatever else the machine runs.
  const auto cpu_seconds = [] {
    timespec t{};
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
    return static_cast<double>(t.tv_sec) + static_cast<double>(t.tv_nsec) * 1e-9;
  };
  const double t0 = cpu_seconds();
  auto c = read_collective_rows(at("rate.csv"), [&](const CollectiveRecord& r) {
    seen += static_cast<int64_t>(r.seq & 1);
  });
  const double s = cpu_seconds() - t0;
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->rows_read, 1000000);
  EXPECT_GE(seen, 0);
  std::printf("read %lld rows in %.3f s of CPU: %.2f M rows/s\n", static_cast<long long>(c->rows_read),
              s, static_cast<double>(c->rows_read) / s / 1e6);
}

}  // namespace
}  // namespace gpuacct
