#include "cli/commands.h"

#include <cstdio>
#include <cstring>
#include <string>

#include "backend/backend.h"

namespace st {

int cli_main(int argc, char** argv) {
  if (argc >= 2 && (std::strcmp(argv[1], "--version") == 0 || std::strcmp(argv[1], "version") == 0)) {
    std::printf("streamtune %s\nbackends: %s\n", ST_VERSION, compiled_backends().c_str());
    return 0;
  }
  std::fprintf(stderr, "usage: streamtune <command> [args]\n");
  return 2;
}

}  // namespace st
