// `streamtune tokenize --model M [--text-file F | --text S] [--no-special] [--decode]`
// Prints the token ids of the text (stdin when neither --text nor --text-file is given), space
// separated on one line, as HF `tokenizer.encode(text)` would (BOS added when the tokenizer's
// post-processor adds one, unless --no-special). --decode also prints the round trip on a second line.
// M is a model directory holding tokenizer.json or tokenizer.model, one of those files, or a GGUF file.
#include <cstdio>
#include <iostream>
#include <iterator>
#include <string>
#include <vector>

#include "cli/cli_args.h"
#include "cli/commands.h"
#include "core/file.h"
#include "data/model_tokenizer.h"
#include "data/tokenizer.h"

namespace st {

namespace {
constexpr const char* kTokenizeUsage =
    "usage: streamtune tokenize --model (DIR | tokenizer.json | tokenizer.model | model.gguf) [--text-file F | --text S] [--no-special] [--decode]\n";
}

// argv[0] is the subcommand name ("tokenize"); flags follow. Returns 0 ok, 1 runtime error, 2 usage.
int cmd_tokenize(int argc, char** argv) {
  std::vector<std::string> args(argv + (argc > 0 ? 1 : 0), argv + argc);
  for (const std::string& x : args) {
    if (x == "--help" || x == "-h") {
      std::printf("%s", kTokenizeUsage);
      return 0;
    }
  }
  StatusOr<ParsedArgs> a = parse_flags(args, {{"model"}, {"text-file"}, {"text"}, {"no-special", false}, {"decode", false}});
  if (!a.ok()) {
    std::fprintf(stderr, "tokenize: %s\n%s", a.status().message().c_str(), kTokenizeUsage);
    return 2;
  }
  if (!a->has("model") || !a->positional.empty() || (a->has("text") && a->has("text-file"))) {
    std::fprintf(stderr, "%s", kTokenizeUsage);
    return 2;
  }
  std::string model = a->get("model");
  if (!resolve_model_arg(&model)) return 1;
  const bool gguf = model.size() > 5 && model.compare(model.size() - 5, 5, ".gguf") == 0;
  StatusOr<Tokenizer> tok = (is_directory(model) || gguf) ? load_model_tokenizer(model) : Tokenizer::from_file(model);
  if (!tok.ok()) {
    return runtime_error(tok.status().with_context("tokenize: loading the tokenizer from " + model));
  }
  std::string text;
  if (a->has("text")) {
    text = a->get("text");
  } else if (a->has("text-file")) {
    StatusOr<std::string> t = read_file_to_string(a->get("text-file"));
    if (!t.ok()) {
      return runtime_error(t.status().with_context("tokenize"));
    }
    text = std::move(*t);
  } else {
    text.assign(std::istreambuf_iterator<char>(std::cin), std::istreambuf_iterator<char>());
  }
  std::vector<int32_t> ids = tok->encode(text, a->has("no-special") ? AddSpecial::kNo : AddSpecial::kYes);
  std::string line;
  for (size_t i = 0; i < ids.size(); ++i) {
    if (i) line += ' ';
    line += std::to_string(ids[i]);
  }
  std::printf("%s\n", line.c_str());
  if (a->has("decode")) std::printf("%s\n", tok->decode(ids).c_str());
  return 0;
}

}  // namespace st
