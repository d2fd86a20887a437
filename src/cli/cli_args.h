// Flag parsing for subcommands: `--name value`, `--name=value`, bare `--switch`, positionals.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "core/status.h"

namespace st {

struct FlagSpec {
  const char* name;          // without the dashes: "out"
  bool takes_value = true;   // false: a switch (--force)
};

struct ParsedArgs {
  std::vector<std::string> positional;
  std::map<std::string, std::string> flags;  // switches map to "true"
  bool has(const std::string& name) const { return flags.count(name) != 0; }
  std::string get(const std::string& name, const std::string& def = "") const;
};

// InvalidArgument for an unknown flag (with a suggestion), a missing value, a repeated flag.
StatusOr<ParsedArgs> parse_flags(const std::vector<std::string>& args, const std::vector<FlagSpec>& specs);

// Strict numbers for flag values; errors name the flag.
StatusOr<uint64_t> flag_u64(const ParsedArgs& a, const std::string& name, uint64_t def);

}  // namespace st
