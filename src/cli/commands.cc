#include "cli/commands.h"

#include <cstdio>
#include <cstring>
#include <string>

#include "backend/backend.h"
#include "cli/suggest.h"

namespace st {

// One line per subcommand (defined in cmd_<name>.cc).
extern const CommandSpec kCmdTrain;
extern const CommandSpec kCmdEvaluate;
extern const CommandSpec kCmdInitModel;
extern const CommandSpec kCmdShard;
int cmd_tokenize(int argc, char** argv);
int cmd_generate(int argc, char** argv);
int cmd_merge(int argc, char** argv);
int cmd_bench(int argc, char** argv);
int cmd_logits(int argc, char** argv);

namespace {

// Adapts the argv-style commands (argv[0] = the subcommand name; they parse --help themselves).
template <int (*F)(int, char**), const char* kName>
int argv_command(const std::vector<std::string>& args) {
  std::vector<std::string> storage;
  storage.push_back(kName);
  storage.insert(storage.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (std::string& a : storage) argv.push_back(a.data());
  argv.push_back(nullptr);
  return F(static_cast<int>(storage.size()), argv.data());
}

constexpr char kTokenize[] = "tokenize";
constexpr char kGenerate[] = "generate";
constexpr char kMerge[] = "merge";
constexpr char kBench[] = "bench";
constexpr char kLogits[] = "logits";

const CommandSpec kCmdTokenize = {kTokenize, "print the token ids of a text (HF dir, tokenizer.json or .gguf)",
                                  nullptr, argv_command<cmd_tokenize, kTokenize>};
const CommandSpec kCmdGenerate = {kGenerate, "generate text with a KV cache (optionally with a LoRA adapter)",
                                  nullptr, argv_command<cmd_generate, kGenerate>};
const CommandSpec kCmdMerge = {kMerge, "merge a LoRA adapter into the base, writing an HF model",
                               nullptr, argv_command<cmd_merge, kMerge>};
const CommandSpec kCmdBench = {kBench, "benchmark training steps on synthetic tokens (tok/s, TFLOP/s, copy)",
                               nullptr, argv_command<cmd_bench, kBench>};
const CommandSpec kCmdLogits = {kLogits, "write full-sequence logits of token rows (parity checks vs HF/PEFT)",
                                nullptr, argv_command<cmd_logits, kLogits>};

// The dispatch table: order is the order of `streamtune --help`.
const CommandSpec* const kCommands[] = {
    &kCmdTrain,     &kCmdEvaluate, &kCmdGenerate, &kCmdMerge, &kCmdShard,
    &kCmdTokenize,  &kCmdBench,    &kCmdInitModel, &kCmdLogits,
};

void print_overview(std::FILE* to) {
  std::fprintf(to,
               "usage: streamtune <command> [args]\n"
               "       streamtune <command> --help\n"
               "       streamtune --version\n\ncommands:\n");
  for (const CommandSpec* c : kCommands) std::fprintf(to, "  %-12s %s\n", c->name, c->summary);
}

const CommandSpec* find_command(const std::string& name) {
  for (const CommandSpec* c : kCommands) {
    if (name == c->name) return c;
  }
  return nullptr;
}

int unknown_command(const std::string& name) {
  std::vector<std::string> names;
  for (const CommandSpec* c : kCommands) names.push_back(c->name);
  std::fprintf(stderr, "streamtune: error: unknown command '%s'%s\nsee 'streamtune --help'\n", name.c_str(),
               did_you_mean(name, names).c_str());
  return kExitUsage;
}

bool is_help(const std::string& a) { return a == "--help" || a == "-h"; }

}  // namespace

int usage_error(const CommandSpec& cmd, const std::string& msg) {
  std::fprintf(stderr, "streamtune: error: %s\nsee 'streamtune %s --help'\n", msg.c_str(), cmd.name);
  return kExitUsage;
}

int runtime_error(const Status& s) {
  std::fprintf(stderr, "streamtune: error: %s\n", s.message().c_str());
  return kExitRuntime;
}

int cli_main(int argc, char** argv) {
  if (argc < 2) {
    print_overview(stderr);
    return kExitUsage;
  }
  const std::string first = argv[1];
  if (first == "--version" || first == "version") {
    std::printf("streamtune %s\nbackends: %s\n", ST_VERSION, compiled_backends().c_str());
    return kExitOk;
  }
  if (is_help(first) || first == "help") {
    if (first == "help" && argc >= 3) {
      const CommandSpec* c = find_command(argv[2]);
      if (!c) return unknown_command(argv[2]);
      if (!c->usage) return c->run({"--help"});
      std::fputs(c->usage, stdout);
      return kExitOk;
    }
    print_overview(stdout);
    return kExitOk;
  }
  const CommandSpec* cmd = find_command(first);
  if (!cmd) {
    if (first.rfind("-", 0) == 0) {
      std::fprintf(stderr, "streamtune: error: unknown option '%s'\nsee 'streamtune --help'\n", first.c_str());
      return kExitUsage;
    }
    return unknown_command(first);
  }
  std::vector<std::string> args(argv + 2, argv + argc);
  for (const std::string& a : args) {
    if (is_help(a) && cmd->usage) {
      std::fputs(cmd->usage, stdout);
      return kExitOk;
    }
  }
  return cmd->run(args);
}

}  // namespace st
