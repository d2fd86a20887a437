// The `streamtune` command line: subcommand dispatch. Only cli/ may exit the process.
#pragma once

namespace st {

// Returns the process exit status (0 ok, 1 runtime error, 2 usage error).
int cli_main(int argc, char** argv);

}  // namespace st
