// streamtune entry point: dispatches to cli/ subcommands.
#include "cli/commands.h"

int main(int argc, char** argv) { return st::cli_main(argc, argv); }
