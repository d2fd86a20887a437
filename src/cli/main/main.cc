// streamtune entry point: dispatches to cli/ subcommands.
#include <unistd.h>

#include <cstdlib>

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
  return st::cli_main(argc, argv);
}
