// io/hf_cache.h: Hub ids, the cache's layout and a card's data_files globs (the end-to-end runs are
// tests/cli/hf_cache_test.sh).
#include "io/hf_cache.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <string>

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

}  // namespace
}  // namespace st
