// Shared by the dataset tests: a fixture tokenizer and scratch files.
#pragma once

#include <fstream>
#include <string>

#include <gtest/gtest.h>

#include "data/tokenizer.h"

namespace st::test {

// tests/fixtures/tokenizers/<name>/tokenizer.json.
inline Tokenizer load_fixture_tokenizer(const char* name) {
  auto t = Tokenizer::from_file(std::string(ST_SOURCE_DIR) + "/tests/fixtures/tokenizers/" + name + "/tokenizer.json");
  EXPECT_TRUE(t.ok()) << t.status().to_string();
  return *t;
}

// `body` written (bytes as given) to a file `name` in the test's temporary directory; its path.
// The test executables share that directory under ctest -j, so each names its files its own way.
inline std::string write_temp_file(const std::string& name, const std::string& body) {
  std::string p = ::testing::TempDir() + "/" + name;
  std::ofstream(p, std::ios::binary) << body;
  return p;
}

}  // namespace st::test
