// io/hf_cache.h: Hub ids, the cache's layout and a card's data_files globs (the end-to-end runs are
// tests/cli/hf_cache_test.sh).
#include "io/hf_cache.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

namespace st {
namespace {

TEST(HfCache, HubIds) {
  for (const char* id : {"Qwen/Qwen2.5-0.5B", "HuggingFaceTB/SmolLM2-135M-Instruct", "teknium/OpenHermes-2.5", "a/b"})
    EXPECT_TRUE(looks_like_hub_id(id)) << id;
  for (const char* p : {"model", "/abs/path", "./m/x", "a/b/c", "../up", "a/.hidden", "a/", "/b", "a b/c", "~/m"})
    EXPECT_FALSE(looks_like_hub_id(p)) << p;
}

TEST(HfCache, CacheDirFollowsTheEnvironment) {
  ::setenv("HF_HUB_CACHE", "/x/hub", 1);
  EXPECT_EQ(hf_hub_cache_dir(), "/x/hub");
  ::unsetenv("HF_HUB_CACHE");
  ::unsetenv("HUGGINGFACE_HUB_CACHE");
  ::setenv("HF_HOME", "/y", 1);
  EXPECT_EQ(hf_hub_cache_dir(), "/y/hub");
  ::unsetenv("HF_HOME");
  ::setenv("XDG_CACHE_HOME", "/z", 1);
  EXPECT_EQ(hf_hub_cache_dir(), "/z/huggingface/hub");
  ::unsetenv("XDG_CACHE_HOME");
}

TEST(HfCache, Globs) {
  EXPECT_TRUE(hub_glob_match("data/train-*", "data/train-00000-of-00002.parquet"));
  EXPECT_FALSE(hub_glob_match("data/train-*", "data/test-00000-of-00001.parquet"));
  EXPECT_FALSE(hub_glob_match("*.jsonl", "sub/a.jsonl"));  // '*' stays in its component
  EXPECT_TRUE(hub_glob_match("**/*.jsonl", "a.jsonl"));     // "**/": zero directories too
  EXPECT_TRUE(hub_glob_match("**/*.jsonl", "x/y/a.jsonl"));
  EXPECT_TRUE(hub_glob_match("data/**", "data/x/y.parquet"));
  EXPECT_TRUE(hub_glob_match("d?ta/*", "data/a"));
  EXPECT_FALSE(hub_glob_match("d?ta/*", "d/ta/a"));
  EXPECT_TRUE(hub_glob_match("train.jsonl", "train.jsonl"));
  EXPECT_FALSE(hub_glob_match("train.jsonl", "train.jsonl.gz"));
  // A hostile pattern: stars that backtracking would explore exponentially, answered at once.
  std::string pat, path(3000, 'a');
  for (int i = 0; i < 1500; ++i) pat += "*a";
  EXPECT_FALSE(hub_glob_match(pat + "b", path));
  EXPECT_TRUE(hub_glob_match(pat, path));
}

// data_files: plain paths as given (relative to the root or absolute), globs walked from their
// literal prefix, matches in path order, each file once, hidden entries and non-dataset files
// skipped; a missing path and an empty match refused naming the pattern.
TEST(HfCache, DataFiles) {
  namespace fs = std::filesystem;
  const fs::path root = fs::temp_directory_path() / ("st_data_files_" + std::to_string(::getpid()));
  fs::remove_all(root);
  for (const char* f : {"a/train-1.jsonl", "a/train-0.jsonl", "a/b/train-2.csv", "a/README.md", "a/.cache/train-9.jsonl",
                        "c.parquet"}) {
    fs::create_directories((root / f).parent_path());
    std::ofstream(root / f) << "x";
  }
  auto names = [&](const std::vector<std::string>& pats) -> std::vector<std::string> {
    auto r = resolve_data_files(root.string(), pats, "t");
    EXPECT_TRUE(r.ok()) << r.status().message();
    std::vector<std::string> out;
    if (r.ok())
      for (const std::string& f : *r) out.push_back(fs::path(f).lexically_relative(root).generic_string());
    return out;
  };
  EXPECT_EQ(names({"a/**"}), (std::vector<std::string>{"a/b/train-2.csv", "a/train-0.jsonl", "a/train-1.jsonl"}));
  EXPECT_EQ(names({"a/train-*"}), (std::vector<std::string>{"a/train-0.jsonl", "a/train-1.jsonl"}));
  EXPECT_EQ(names({"c.parquet", "a/train-?.jsonl", "a/train-1.jsonl"}),
            (std::vector<std::string>{"c.parquet", "a/train-0.jsonl", "a/train-1.jsonl"}));
  EXPECT_EQ(names({(root / "a/train-1.jsonl").string()}), (std::vector<std::string>{"a/train-1.jsonl"}));
  for (const char* bad : {"a/nope.jsonl", "a/zz-*", "nodir/*.jsonl", "a"}) {
    auto r = resolve_data_files(root.string(), {bad}, "t");
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_NE(r.status().message().find(std::string("data_files '") + bad + "'"), std::string::npos) << r.status().message();
  }
  fs::remove_all(root);
}

}  // namespace
}  // namespace st
