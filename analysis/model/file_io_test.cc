#include "analysis/model/file_io.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>

#include <gtest/gtest.h>

namespace gpuacct {
namespace {

namespace fs = std::filesystem;

// A fresh directory per test and process (tests of several build trees may share /tmp).
class FileIo : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("gpuacct_file_io_" + std::to_string(::getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string at(const char* name) const { return (dir_ / name).string(); }
  std::string read(const std::string& path) const {
    std::ifstream in(path, std::ios::binary);
    return std::string((std::istreambuf_iterator<char>(in)), {});
  }
  // Names in the directory other than `keep` (temporary files left behind).
  std::vector<std::string> others(std::initializer_list<const char*> keep) const {
    std::vector<std::string> out;
    for (const auto& e : fs::directory_iterator(dir_)) {
      const std::string n = e.path().filename().string();
      if (std::find(keep.begin(), keep.end(), n) == keep.end()) out.push_back(n);
    }
    return out;
  }
  fs::path dir_;
};

std::string message(const Status& st) {
  return st.ok() ? "ok" : st.message();
}

TEST_F(FileIo, InputCheckSaysWhatAPathIs) {
  std::ofstream(at("regular")) << "x";
  ASSERT_EQ(::mkfifo(at("fifo").c_str(), 0600), 0);
  fs::create_symlink(at("loop_b"), at("loop_a"));
  fs::create_symlink(at("loop_a"), at("loop_b"));
  fs::create_symlink(at("missing"), at("dangling"));
  fs::create_symlink(at("regular"), at("link"));

  EXPECT_EQ(message(check_input_file(at("regular"))), "ok");
  EXPECT_EQ(message(check_input_file(at("link"))), "ok");
  EXPECT_EQ(message(check_input_file(at("missing"))), at("missing") + ": no such file");
  EXPECT_EQ(message(check_input_file(dir_.string())),
            dir_.string() + ": is a directory, not a regular file");
  EXPECT_EQ(message(check_input_file(at("fifo"))),
            at("fifo") + ": is a named pipe (FIFO), not a regular file");
  EXPECT_EQ(message(check_input_file("/dev/zero")),
            "/dev/zero: is a character device, not a regular file");
  EXPECT_NE(message(check_input_file(at("loop_a"))).find("symbolic link loop"), std::string::npos);
  EXPECT_NE(message(check_input_file(at("dangling"))).find("symbolic link to a missing file"),
            std::string::npos);
}

TEST_F(FileIo, AtomicWriteReplacesARegularFileAndLeavesNoTemporary) {
  const std::string path = at("r.json");
  std::ofstream(path) << "old";
  ASSERT_EQ(::chmod(path.c_str(), 0640), 0);
  ASSERT_TRUE(write_file_atomic(path, "{}\n").ok());
  EXPECT_EQ(read(path), "{}\n");
  EXPECT_EQ(fs::status(path).permissions(), fs::perms(0640)) << "permissions kept";
  EXPECT_TRUE(others({"r.json"}).empty());
  EXPECT_NE(message(write_file_atomic(at("missing/x.json"), "x")).find("No such file"),
            std::string::npos);
}

TEST_F(FileIo, ASymlinkIsFollowedNotReplaced) {
  std::ofstream(at("real.json")) << "old";
  fs::create_symlink("real.json", at("link.json"));
  ASSERT_EQ(message(write_file_atomic(at("link.json"), "new")), "ok");
  EXPECT_TRUE(fs::is_symlink(at("link.json"))) << "the link was replaced by a file";
  EXPECT_EQ(read(at("real.json")), "new");
  EXPECT_TRUE(others({"real.json", "link.json"}).empty());
}

TEST_F(FileIo, ACharacterDeviceIsWrittenInPlace) {
  // As root a null device of our own (mknod 1,3) is the realistic victim; otherwise /dev/null
  // itself (nobody else can rename over it, but the write must still succeed in place).
  std::string dev = "/dev/null";
  if (::geteuid() == 0) {
    dev = at("null");
    ASSERT_EQ(::mknod(dev.c_str(), S_IFCHR | 0666, makedev(1, 3)), 0);
  }
  ASSERT_EQ(message(write_file_atomic(dev, std::string(100000, 'x'))), "ok");
  struct stat st {};
  ASSERT_EQ(::lstat(dev.c_str(), &st), 0);
  EXPECT_TRUE(S_ISCHR(st.st_mode)) << dev << " is no longer a character device";
  if (::geteuid() == 0) {
    EXPECT_TRUE(others({"null"}).empty());
  }
}

TEST_F(FileIo, ANamedPipeIsWrittenInPlaceAndOneNobodyReadsFails) {
  const std::string fifo = at("fifo");
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  // Nobody reads: an error at once, never a hang.
  EXPECT_NE(message(write_file_atomic(fifo, "x")).find("nobody reads"), std::string::npos);
  std::string got;
  std::thread reader([&] {
    const int fd = ::open(fifo.c_str(), O_RDONLY);
    char buf[4096];
    for (ssize_t n; (n = ::read(fd, buf, sizeof buf)) > 0;) got.append(buf, static_cast<size_t>(n));
    ::close(fd);
  });
  // The reader may not have opened yet: retry until it has.
  Status st;
  for (int i = 0; i < 500; ++i) {
    st = write_file_atomic(fifo, "through the pipe");
    if (st.ok() || st.message().find("nobody reads") == std::string::npos) break;
    ::usleep(2000);
  }
  reader.join();
  EXPECT_EQ(message(st), "ok");
  EXPECT_EQ(got, "through the pipe");
  struct stat s {};
  ASSERT_EQ(::lstat(fifo.c_str(), &s), 0);
  EXPECT_TRUE(S_ISFIFO(s.st_mode));
}

TEST_F(FileIo, DirectoriesLoopsAndDanglingLinksAreRefused) {
  fs::create_directories(at("d"));
  fs::create_symlink(at("loop_b"), at("loop_a"));
  fs::create_symlink(at("loop_a"), at("loop_b"));
  fs::create_symlink(at("nowhere"), at("dangling"));
  EXPECT_NE(message(write_file_atomic(at("d"), "x")).find("is a directory"), std::string::npos);
  EXPECT_NE(message(write_file_atomic(at("loop_a"), "x")).find("symbolic link loop"),
            std::string::npos);
  EXPECT_NE(message(write_file_atomic(at("dangling"), "x")).find("symbolic link to a missing"),
            std::string::npos);
  EXPECT_TRUE(fs::is_directory(at("d")));
  EXPECT_TRUE(fs::is_symlink(at("loop_a")) && fs::is_symlink(at("dangling")));
  EXPECT_FALSE(fs::exists(at("nowhere")));
  EXPECT_EQ(others({"d", "loop_a", "loop_b", "dangling"}).size(), 0u);
}

// A write that fails half-way (here: the file size limit, EFBIG, standing in for a full disk)
// leaves the old file as it was and no temporary file.
TEST_F(FileIo, AFailedWriteKeepsTheOldFileAndItsName) {
  const std::string path = at("report.json");
  std::ofstream(path) << "previous report";
  struct rlimit old {};
  ASSERT_EQ(::getrlimit(RLIMIT_FSIZE, &old), 0);
  auto* old_handler = ::signal(SIGXFSZ, SIG_IGN);
  struct rlimit small = old;
  small.rlim_cur = 100000;
  ASSERT_EQ(::setrlimit(RLIMIT_FSIZE, &small), 0);
  const Status st = write_file_atomic(path, std::string(300000, 'x'));
  OutputFile stream;
  Status st2 = stream.open(at("stream.bin"));
  for (int i = 0; i < 100 && st2.ok(); ++i) st2 = stream.write(std::string(5000, 'y'));
  const Status st3 = st2.ok() ? stream.commit() : st2;
  const Status after = stream.write("z");
  ::setrlimit(RLIMIT_FSIZE, &old);
  ::signal(SIGXFSZ, old_handler);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("File too large"), std::string::npos) << st.message();
  EXPECT_EQ(read(path), "previous report");
  EXPECT_FALSE(st3.ok());
  EXPECT_FALSE(after.ok()) << "a failure sticks";
  stream.abandon();
  EXPECT_FALSE(fs::exists(at("stream.bin")));
  EXPECT_TRUE(others({"report.json"}).empty());
}

}  // namespace
}  // namespace gpuacct
