// Jinja tokenizer (jinja_lexer.cc): template text and tags, with the whitespace rules transformers
// renders chat templates under (trim_blocks, lstrip_blocks, `-` / `+` modifiers).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace st::jinja {

struct Token {
  enum class Type { kText, kVarBegin, kVarEnd, kBlockBegin, kBlockEnd, kName, kString, kInt, kFloat, kOp, kEof };
  Type type = Type::kEof;
  std::string text;  // text, name, operator, or the string literal's value (escapes decoded)
  int64_t i = 0;
  double f = 0;
  int line = 1, col = 1;
};

// Throws jinja::Error (with line and column) on an unterminated tag, comment or string, or a
// character that starts no token.
std::vector<Token> lex(const std::string& source);

}  // namespace st::jinja
