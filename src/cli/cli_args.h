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

// --model (and --adapter: a PEFT adapter repo) given as a Hugging Face Hub id that is not a local
// path: replaced by its snapshot in the local Hugging Face cache (io/hf_cache.h), with a note on
// stderr. An id the cache lacks is printed as an error and false returned (the command exits 1).
bool resolve_model_flag(ParsedArgs* a);
// The same for a model path given as an argument.
bool resolve_model_arg(std::string* path);

// Strict numbers for flag values; errors name the flag.
StatusOr<uint64_t> flag_u64(const ParsedArgs& a, const std::string& name, uint64_t def);

}  // namespace st
