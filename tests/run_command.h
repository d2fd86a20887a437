// Test helper: runs a shell command, returns what it wrote on stdout (callers add 2>&1 to keep
// stderr) and its exit status in *rc (pclose's; -1 when it could not start). For the tests whose
// oracle is another program (HF tokenizers, jinja2, the gguf reader, fetch scripts).
#pragma once

#include <cstdio>
#include <string>

namespace st {

inline std::string run_command(const std::string& cmd, int* rc) {
  FILE* p = popen(cmd.c_str(), "r");
  if (p == nullptr) {
    *rc = -1;
    return "";
  }
  std::string out;
  char buf[65536];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, p)) > 0) out.append(buf, n);
  *rc = pclose(p);
  return out;
}

}  // namespace st
