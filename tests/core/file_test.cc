// core/file.h as hostile input meets it: paths that are not regular files, endless devices, and
// path_is_within, the guard every command uses before it replaces an output.
#include "core/file.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <string>

namespace st {
namespace {

namespace fs = std::filesystem;

std::string temp_dir() {
  std::string t = ::testing::TempDir() + "/st_file_test_XXXXXX";
  EXPECT_NE(mkdtemp(t.data()), nullptr);
  return t;
}

// A FIFO used to block the opener forever (a dataset path given as one); a directory or a device
// mapped as an empty file.
TEST(File, MappedFileRefusesWhatIsNotARegularFile) {
  const std::string d = temp_dir();
  const std::string fifo = d + "/fifo";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  for (const std::string& p : {fifo, d, std::string("/dev/zero"), std::string("/dev/null")}) {
    StatusOr<MappedFile> m = MappedFile::open(p);
    ASSERT_FALSE(m.ok()) << p;
    EXPECT_NE(m.status().message().find(p + ": not a regular file"), std::string::npos) << m.status().to_string();
  }
  ASSERT_TRUE(write_file_atomic(d + "/f", "abc").ok());
  StatusOr<MappedFile> f = MappedFile::open(d + "/f");
  ASSERT_TRUE(f.ok());
  EXPECT_EQ(f->size(), 3u);
  fs::remove_all(d);
}

TEST(File, ReadWholeStopsOnAnEndlessDevice) {
  StatusOr<std::string> z = read_file_to_string("/dev/zero");
  ASSERT_FALSE(z.ok());
  EXPECT_NE(z.status().message().find("/dev/zero: larger than 1024 MiB"), std::string::npos) << z.status().to_string();
}

TEST(File, PathIsWithin) {
  const std::string d = temp_dir();
  fs::create_directories(d + "/a/b");
  fs::create_directory_symlink(d + "/a", d + "/link");
  EXPECT_TRUE(path_is_within(d + "/a/b", d + "/a"));
  EXPECT_TRUE(path_is_within(d + "/a/b/", d + "/a/"));
  EXPECT_TRUE(path_is_within(d + "/a", d + "/a"));
  EXPECT_TRUE(path_is_within(d + "/a/b/not_yet/file", d + "/a"));  // need not exist
  EXPECT_TRUE(path_is_within(d + "/link/b", d + "/a"));            // through a symlink
  EXPECT_TRUE(path_is_within(d + "/a/b/../b", d + "/a/b"));
  EXPECT_FALSE(path_is_within(d + "/a", d + "/a/b"));
  EXPECT_FALSE(path_is_within(d + "/ab", d + "/a"));  // a prefix of the name is not a parent
  EXPECT_FALSE(path_is_within(d + "/a/b/..", d + "/a/b"));
  fs::remove_all(d);
}

}  // namespace
}  // namespace st
