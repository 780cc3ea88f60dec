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
  std::string at(const std::string& name) const { return (dir_ / name).string(); }
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

// ---- the library's own outputs in a directory others may write to (OutputPolicy) -------------

// Where an attacker points a planted link: a file of ours outside the output directory.
class SharedDir : public FileIo {
 protected:
  void SetUp() override {
    FileIo::SetUp();
    victim_ = (dir_.parent_path() / (dir_.filename().string() + "_victim.txt")).string();
    std::ofstream(victim_) << "precious";
  }
  void TearDown() override {
    std::remove(victim_.c_str());
    FileIo::TearDown();
  }
  std::string victim_;
};

// A link planted at the final name (fs.protected_symlinks off, a sticky /tmp): the library
// never writes through it, leaves it, and writes under a fresh name, said in one line.  Before,
// the name was resolved with realpath and the report renamed onto the victim.
TEST_F(SharedDir, ALinkAtTheFinalNameIsNotFollowed) {
  fs::create_symlink(victim_, at("report.json"));
  OutputPlace place;
  ASSERT_EQ(
      message(write_file_atomic(at("report.json"), "{}\n", OutputPolicy::kOwnFilesOnly, &place)),
      "ok");
  EXPECT_EQ(read(victim_), "precious");
  EXPECT_TRUE(fs::is_symlink(at("report.json"))) << "the planted link is left as it is";
  EXPECT_EQ(place.path, at("report-1.json"));
  EXPECT_EQ(read(at("report-1.json")), "{}\n");
  EXPECT_EQ(place.note, at("report.json") +
                            " is a symbolic link (not followed or written: another user may have "
                            "put it there); writing " +
                            at("report-1.json") + " instead");
  EXPECT_TRUE(others({"report.json", "report-1.json"}).empty());
  // The user's own path (`-o PATH`) still follows it: their choice.
  ASSERT_EQ(message(write_file_atomic(at("report.json"), "mine")), "ok");
  EXPECT_EQ(read(victim_), "mine");
}

// A link planted at the temporary name: O_CREAT | O_EXCL | O_NOFOLLOW never writes through it,
// under either policy; it is removed (the link, not the file it names) and the name reused.
TEST_F(SharedDir, ALinkAtTheTemporaryNameIsNotFollowed) {
  for (OutputPolicy policy : {OutputPolicy::kOwnFilesOnly, OutputPolicy::kUserPath}) {
    fs::create_symlink(victim_, at("r.json.tmp." + std::to_string(::getpid())));
    ASSERT_EQ(message(write_file_atomic(at("r.json"), "report", policy)), "ok");
    EXPECT_EQ(read(victim_), "precious");
    EXPECT_EQ(read(at("r.json")), "report");
    EXPECT_TRUE(others({"r.json"}).empty());
    fs::remove(at("r.json"));
  }
}

// A file another user owns (as root here: one chowned to nobody) is neither replaced nor
// written into: a fresh name.  Without root, a root-owned file stands for it (it cannot be
// planted in our directory): it is left untouched.
TEST_F(SharedDir, AnotherUsersFileIsLeftAlone) {
  if (::geteuid() == 0) {
    std::ofstream(at("theirs.json")) << "theirs";
    ASSERT_EQ(::chown(at("theirs.json").c_str(), 65534, 65534), 0);
    OutputPlace place;
    ASSERT_EQ(
        message(write_file_atomic(at("theirs.json"), "ours", OutputPolicy::kOwnFilesOnly, &place)),
        "ok");
    EXPECT_EQ(read(at("theirs.json")), "theirs");
    EXPECT_EQ(read(at("theirs-1.json")), "ours");
    EXPECT_NE(place.note.find("is owned by another user (uid 65534)"), std::string::npos)
        << place.note;
    // The stream, written in place: opened without O_TRUNC, checked, never emptied.
    std::ofstream(at("s.steps.jsonl")) << "their lines\n";
    ASSERT_EQ(::chown(at("s.steps.jsonl").c_str(), 65534, 65534), 0);
    const int fd = open_in_place(at("s.steps.jsonl"), OutputPolicy::kOwnFilesOnly, &place);
    ASSERT_GE(fd, 0);
    ::close(fd);
    EXPECT_EQ(read(at("s.steps.jsonl")), "their lines\n");
    EXPECT_EQ(place.path, at("s-1.steps.jsonl"));
  } else {
    struct stat st {};
    ASSERT_EQ(::stat("/etc/passwd", &st), 0);
    const std::string before = read("/etc/passwd");
    OutputPlace place;
    EXPECT_FALSE(write_file_atomic("/etc/passwd", "x", OutputPolicy::kOwnFilesOnly, &place).ok());
    EXPECT_LT(open_in_place("/etc/passwd", OutputPolicy::kOwnFilesOnly, &place), 0);
    EXPECT_EQ(read("/etc/passwd"), before);
  }
}

// The step stream is written in place, so a hard link (the file has another name: another
// user's, made with fs.protected_hardlinks off) or a planted FIFO are refused as well; a link is
// never followed; our own file is truncated and reused.
TEST_F(SharedDir, TheStreamOpensOnlyItsOwnFile) {
  fs::create_symlink(victim_, at("a.steps.jsonl"));
  fs::create_hard_link(victim_, at("b.steps.jsonl"));
  ASSERT_EQ(::mkfifo(at("c.steps.jsonl").c_str(), 0600), 0);
  std::ofstream(at("d.steps.jsonl")) << "an earlier run of ours\n";
  for (const char* name : {"a", "b", "c"}) {
    OutputPlace place;
    const std::string path = at(std::string(name) + ".steps.jsonl");
    const int fd = open_in_place(path, OutputPolicy::kOwnFilesOnly, &place);
    ASSERT_GE(fd, 0) << name;
    ASSERT_TRUE(write_fully(fd, "row\n", 4));
    ::close(fd);
    EXPECT_EQ(place.path, at(std::string(name) + "-1.steps.jsonl"));
    EXPECT_FALSE(place.note.empty());
    EXPECT_EQ(read(place.path), "row\n");
  }
  EXPECT_EQ(read(victim_), "precious");
  OutputPlace place;
  const int fd = open_in_place(at("d.steps.jsonl"), OutputPolicy::kOwnFilesOnly, &place);
  ASSERT_GE(fd, 0);
  ::close(fd);
  EXPECT_EQ(place.path, at("d.steps.jsonl"));
  EXPECT_TRUE(place.note.empty());
  EXPECT_EQ(read(at("d.steps.jsonl")), "");
}

// A directory planted at the stream's name (EISDIR), like any name we may not open, is left
// alone and the stream goes to a fresh name: it is not switched off.
TEST_F(SharedDir, AStreamNameWeCannotOpenGetsAFreshName) {
  fs::create_directory(at("e.steps.jsonl"));
  OutputPlace place;
  const int fd = open_in_place(at("e.steps.jsonl"), OutputPolicy::kOwnFilesOnly, &place);
  ASSERT_GE(fd, 0);
  ASSERT_TRUE(write_fully(fd, "row\n", 4));
  ::close(fd);
  EXPECT_EQ(place.path, at("e-1.steps.jsonl"));
  EXPECT_NE(place.note.find("directory"), std::string::npos) << place.note;
  EXPECT_TRUE(fs::is_directory(at("e.steps.jsonl")));
}

// Our own earlier file is replaced as before (permissions kept, no note), and a link planted
// between open() and commit() is replaced by the rename, never followed.
TEST_F(SharedDir, OurOwnFileIsReplacedAndALateLinkIsNotFollowed) {
  std::ofstream(at("r.json")) << "old";
  ASSERT_EQ(::chmod(at("r.json").c_str(), 0640), 0);
  OutputFile out;
  ASSERT_EQ(message(out.open(at("r.json"), OutputPolicy::kOwnFilesOnly)), "ok");
  EXPECT_EQ(out.path(), at("r.json"));
  EXPECT_TRUE(out.note().empty());
  fs::remove(at("r.json"));
  fs::create_symlink(victim_, at("r.json"));  // planted after the check
  ASSERT_EQ(message(out.write("new")), "ok");
  ASSERT_EQ(message(out.commit()), "ok");
  EXPECT_EQ(read(victim_), "precious");
  EXPECT_FALSE(fs::is_symlink(at("r.json")));
  EXPECT_EQ(read(at("r.json")), "new");
  EXPECT_EQ(fs::status(at("r.json")).permissions(), fs::perms(0640));
}

// Fresh names keep the extension readers look for; a directory full of planted names ends in
// an error, not in a write through one.
TEST_F(SharedDir, FreshNamesKeepTheExtension) {
  for (const auto& [name, fresh] :
       {std::pair<const char*, const char*>{"x.steps.jsonl", "x-1.steps.jsonl"},
        {"gpuacct_h.example.org_12_rank0.gpuacct", "gpuacct_h.example.org_12_rank0-1.gpuacct"},
        {"gpuacct_h_12_rank0.json", "gpuacct_h_12_rank0-1.json"},
        {"noext", "noext-1"}}) {
    fs::create_symlink(victim_, at(name));
    OutputPlace place;
    ASSERT_EQ(message(write_file_atomic(at(name), "x", OutputPolicy::kOwnFilesOnly, &place)), "ok");
    EXPECT_EQ(place.path, at(fresh));
  }
  // Past the first few, fresh names carry random bits: planting every predictable name does
  // not stop the output, nor redirect it.
  for (int n = 0; n < 100; ++n) {
    fs::create_symlink(victim_, at(n == 0 ? "f.json" : "f-" + std::to_string(n) + ".json"));
  }
  OutputPlace place;
  ASSERT_EQ(message(write_file_atomic(at("f.json"), "x", OutputPolicy::kOwnFilesOnly, &place)),
            "ok");
  const std::string chosen = fs::path(place.path).filename().string();
  EXPECT_EQ(chosen.rfind("f-4-", 0), 0u) << chosen;
  EXPECT_EQ(chosen.size(), std::string("f-4-0123456789abcdef.json").size()) << chosen;
  EXPECT_EQ(read(place.path), "x");
  EXPECT_EQ(read(victim_), "precious");
}

}  // namespace
}  // namespace gpuacct
