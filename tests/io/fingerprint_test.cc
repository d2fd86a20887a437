#include "io/fingerprint.h"

#include <gtest/gtest.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <ctime>

#include "core/file.h"

namespace st {
namespace {

void set_mtime_ns(const std::string& path, int64_t sec, long nsec) {
  struct timespec ts[2] = {{sec, nsec}, {sec, nsec}};
  ASSERT_EQ(utimensat(AT_FDCWD, path.c_str(), ts, 0), 0);
}

TEST(Fingerprint, ChangesWithNameSizeAndMtime) {
  char tmpl[] = "/tmp/st_fp_test_XXXXXX";
  ASSERT_NE(mkdtemp(tmpl), nullptr);
  const std::string dir = tmpl, a = dir + "/a.safetensors", b = dir + "/b.safetensors";
  ASSERT_TRUE(write_file_atomic(a, "hello").ok());
  ASSERT_TRUE(write_file_atomic(b, "world").ok());
  set_mtime_ns(a, 1700000000, 5);
  set_mtime_ns(b, 1700000000, 5);
  auto f1 = source_fingerprint({a, b});
  ASSERT_TRUE(f1.ok()) << f1.status().to_string();
  EXPECT_EQ(f1->size(), 16u);
  EXPECT_EQ(*source_fingerprint({a, b}), *f1);  // stable
  EXPECT_NE(*source_fingerprint({b, a}), *f1);  // order matters
  EXPECT_NE(*source_fingerprint({a}), *f1);
  set_mtime_ns(a, 1700000000, 6);  // one nanosecond
  auto f2 = source_fingerprint({a, b});
  EXPECT_NE(*f2, *f1);
  ASSERT_TRUE(write_file_atomic(a, "hellO").ok());  // same size, same mtime: same fingerprint by design
  set_mtime_ns(a, 1700000000, 6);
  EXPECT_EQ(*source_fingerprint({a, b}), *f2);
  ASSERT_TRUE(write_file_atomic(a, "hello!").ok());  // size change
  set_mtime_ns(a, 1700000000, 6);
  EXPECT_NE(*source_fingerprint({a, b}), *f2);
  // Only the basename counts: the same file seen through another directory path matches.
  EXPECT_EQ(*source_fingerprint({dir + "/./a.safetensors"}), *source_fingerprint({a}));
  Status s = source_fingerprint({dir + "/missing"}).status();
  EXPECT_EQ(s.code(), StatusCode::kNotFound);
  EXPECT_NE(s.message().find("missing"), std::string::npos);
  ASSERT_EQ(std::system(("rm -rf " + dir).c_str()), 0);
}

}  // namespace
}  // namespace st
