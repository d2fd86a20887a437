// streamtune entry point: dispatches to cli/ subcommands.
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <exception>
#include <new>

#include "cli/commands.h"

int main(int argc, char** argv) {
  // The CPU backend's OpenMP threads spin-wait between parallel regions by default, which starves
  // the OpenBLAS and copy threads on small or busy machines (measured: a chat prompt took 23 s of
  // CPU with spinning, 1.5 s without). libgomp reads the policy when it is loaded, before main, so
  // set it and re-execute once. A user's own OMP_WAIT_POLICY is respected.
  if (std::getenv("OMP_WAIT_POLICY") == nullptr) {
    setenv("OMP_WAIT_POLICY", "passive", 1);
    execv("/proc/self/exe", argv);  // returns only on failure: carry on with the default policy
  }
  // The backstop for what no reader should let through: an allocation the input made too large
  // (a 100 MB record under a memory limit) or an exception a check missed ends with a message
  // and exit 1, never an abort.
  try {
    return st::cli_main(argc, argv);
  } catch (const std::bad_alloc&) {
    std::fprintf(stderr, "streamtune: error: out of memory (the input needs more than this machine gives)\n");
  } catch (const std::exception& e) {
    std::fprintf(stderr, "streamtune: error: %s\n", e.what());
  }
  return 1;
}
