// The `streamtune` command line: table-based subcommand dispatch. Only cli/ may exit the process.
//
// Adding a subcommand: write src/cli/cmd_<name>.cc defining `const CommandSpec kCmd<Name>` (name,
// one-line summary, full usage text, run function), then add one `extern` line and one table
// entry in commands.cc. `streamtune <name> --help` / `-h` prints the usage text without calling
// run; everything else after the name is passed to run.
#pragma once

#include <string>
#include <vector>

#include "core/status.h"

namespace st {

constexpr int kExitOk = 0;
constexpr int kExitRuntime = 1;  // the work failed (I/O, training diverged, ...)
constexpr int kExitUsage = 2;    // the user asked for something invalid (flags, config)

struct CommandSpec {
  const char* name;     // "init-model"
  const char* summary;  // one line for `streamtune --help`
  const char* usage;    // full text for `streamtune <name> --help`; nullptr: run() handles --help
  // Receives the arguments after the subcommand name; returns the exit status.
  int (*run)(const std::vector<std::string>& args);
};

// Print "streamtune: error: <msg>" to stderr and return kExitUsage / kExitRuntime.
// usage_error also points at `streamtune <cmd> --help`.
int usage_error(const CommandSpec& cmd, const std::string& msg);
int runtime_error(const Status& s);

// Returns the process exit status (0 ok, 1 runtime error, 2 usage error).
int cli_main(int argc, char** argv);

}  // namespace st
