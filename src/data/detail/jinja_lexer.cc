#include "data/detail/jinja_lexer.h"

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>

#include "data/detail/jinja_value.h"

namespace st::jinja {
namespace {

bool is_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v'; }
bool is_name_start(char c) { return std::isalpha(static_cast<unsigned char>(c)) || c == '_'; }
bool is_name_char(char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; }

// Note [jinja newlines]: jinja2's lexer joins the source's lines with "\n" (so "\r\n" and "\r"
// become "\n") and, without keep_trailing_newline, drops one trailing newline.
std::string normalize_newlines(const std::string& src) {
  std::string out;
  out.reserve(src.size());
  for (size_t k = 0; k < src.size(); ++k) {
    if (src[k] == '\r') {
      out += '\n';
      if (k + 1 < src.size() && src[k + 1] == '\n') ++k;
    } else {
      out += src[k];
    }
  }
  if (!out.empty() && out.back() == '\n') out.pop_back();
  return out;
}

void append_utf8(uint32_t cp, std::string* out) {
  if (cp < 0x80) {
    *out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    *out += static_cast<char>(0xc0 | (cp >> 6));
    *out += static_cast<char>(0x80 | (cp & 0x3f));
  } else if (cp < 0x10000) {
    *out += static_cast<char>(0xe0 | (cp >> 12));
    *out += static_cast<char>(0x80 | ((cp >> 6) & 0x3f));
    *out += static_cast<char>(0x80 | (cp & 0x3f));
  } else {
    *out += static_cast<char>(0xf0 | (cp >> 18));
    *out += static_cast<char>(0x80 | ((cp >> 12) & 0x3f));
    *out += static_cast<char>(0x80 | ((cp >> 6) & 0x3f));
    *out += static_cast<char>(0x80 | (cp & 0x3f));
  }
}

class Lexer {
 public:
  explicit Lexer(const std::string& src) : src_(normalize_newlines(src)) {
    line_starts_.push_back(0);
    for (size_t k = 0; k < src_.size(); ++k)
      if (src_[k] == '\n') line_starts_.push_back(k + 1);
  }

  std::vector<Token> run() {
    bool line_starting = true;  // the previous tag's match ended with a newline
    while (pos_ < src_.size()) {
      const size_t start = find_tag(pos_);
      std::string text = src_.substr(pos_, start - pos_);
      if (start == src_.size()) {
        emit_text(std::move(text), pos_);
        break;
      }
      const char kind = src_[start + 1];  // '{', '%' or '#'
      const char mod = start + 2 < src_.size() ? src_[start + 2] : 0;
      if (mod == '-') {
        text.erase(text.find_last_not_of(" \t\n\r\f\v") + 1);
      } else if (mod != '+' && kind != '{') {
        lstrip_block(&text, line_starting);
      }
      emit_text(std::move(text), pos_);
      const size_t body = start + 2 + (mod == '-' || mod == '+' ? 1 : 0);
      size_t end;
      if (kind == '#') end = comment(start, body);
      else if (kind == '%' && raw_block(start, body, &end)) {}
      else end = tag(kind, start, body);
      line_starting = end > 0 && src_[end - 1] == '\n';
      pos_ = end;
    }
    push(Token::Type::kEof, "", src_.size());
    return std::move(out_);
  }

 private:
  [[noreturn]] void error(size_t at, const std::string& msg) {
    Error e{msg};
    where(at, &e.line, &e.col);
    throw e;
  }

  void where(size_t at, int* line, int* col) const {
    const size_t l = static_cast<size_t>(std::upper_bound(line_starts_.begin(), line_starts_.end(), at) - line_starts_.begin()) - 1;
    *line = static_cast<int>(l + 1);
    *col = static_cast<int>(at - line_starts_[l] + 1);
  }

  void push(Token::Type t, std::string text, size_t at) {
    Token tok;
    tok.type = t;
    tok.text = std::move(text);
    where(at, &tok.line, &tok.col);
    out_.push_back(std::move(tok));
  }

  void emit_text(std::string text, size_t at) {
    if (!text.empty()) push(Token::Type::kText, std::move(text), at);
  }

  size_t find_tag(size_t from) const {
    for (size_t k = from; k + 1 < src_.size(); ++k)
      if (src_[k] == '{' && (src_[k + 1] == '{' || src_[k + 1] == '%' || src_[k + 1] == '#')) return k;
    return src_.size();
  }

  // lstrip_blocks: spaces and tabs between a line's start and a block or comment tag go.
  static void lstrip_block(std::string* text, bool line_starting) {
    const size_t nl = text->rfind('\n');
    const size_t l = nl == std::string::npos ? 0 : nl + 1;
    if (l == 0 && !line_starting) return;
    if (text->find_first_not_of(" \t\f\v\r", l) == std::string::npos) text->erase(l);
  }

  // After a closing delimiter ending at `after`: `-` strips all whitespace, otherwise
  // trim_blocks removes one newline after a block or comment tag (not after `+`).
  size_t after_close(size_t after, char mod, bool block) const {
    if (mod == '-') {
      while (after < src_.size() && is_space(src_[after])) ++after;
    } else if (mod != '+' && block && after < src_.size() && src_[after] == '\n') {
      ++after;
    }
    return after;
  }

  size_t comment(size_t start, size_t body) {
    const size_t e = src_.find("#}", body);
    if (e == std::string::npos) error(start, "unterminated comment (missing '#}')");
    const char mod = e > body && (src_[e - 1] == '-' || src_[e - 1] == '+') ? src_[e - 1] : 0;
    return after_close(e + 2, mod, true);
  }

  // {% raw %}...{% endraw %}: the text between is output as it is.
  bool raw_block(size_t start, size_t body, size_t* end) {
    size_t k = skip_ws(body);
    if (src_.compare(k, 3, "raw") != 0 || (k + 3 < src_.size() && is_name_char(src_[k + 3]))) return false;
    size_t close;
    char mod;
    if (!block_close(skip_ws(k + 3), &close, &mod)) error(start, "expected '%}' after 'raw'");
    const size_t content = after_close(close, mod, true);
    for (size_t s = src_.find("{%", content); s != std::string::npos; s = src_.find("{%", s + 2)) {
      const size_t m = s + 2 + (s + 2 < src_.size() && (src_[s + 2] == '-' || src_[s + 2] == '+') ? 1 : 0);
      const size_t w = skip_ws(m);
      if (src_.compare(w, 6, "endraw") != 0) continue;
      size_t c2;
      char mod2;
      if (!block_close(skip_ws(w + 6), &c2, &mod2)) continue;
      std::string text = src_.substr(content, s - content);
      if (m > s + 2 && src_[s + 2] == '-') text.erase(text.find_last_not_of(" \t\n\r\f\v") + 1);
      emit_text(std::move(text), content);
      *end = after_close(c2, mod2, true);
      return true;
    }
    error(start, "unterminated raw block (missing '{% endraw %}')");
  }

  size_t skip_ws(size_t k) const {
    while (k < src_.size() && is_space(src_[k])) ++k;
    return k;
  }

  // At k: "%}", "-%}" or "+%}"? Sets the position after it and the modifier.
  bool block_close(size_t k, size_t* after, char* mod) const {
    *mod = 0;
    if (k < src_.size() && (src_[k] == '-' || src_[k] == '+')) *mod = src_[k++];
    if (src_.compare(k, 2, "%}") != 0) return false;
    *after = k + 2;
    return true;
  }

  // A {{ }} or {% %} tag: its tokens up to the closing delimiter (which counts only outside
  // brackets, as in jinja2, so `{{ {'a': {'b': 1}} }}` works).
  size_t tag(char kind, size_t start, size_t body) {
    push(kind == '{' ? Token::Type::kVarBegin : Token::Type::kBlockBegin, "", start);
    const char close = kind == '{' ? '}' : '%';
    int depth = 0;
    size_t k = body;
    for (;;) {
      k = skip_ws(k);
      if (k >= src_.size()) error(start, kind == '{' ? "unterminated '{{' (missing '}}')" : "unterminated '{%' (missing '%}')");
      if (depth == 0) {
        size_t m = k;
        char mod = 0;
        if ((src_[m] == '-' || src_[m] == '+') && m + 1 < src_.size() && src_[m + 1] == close) mod = src_[m++];
        if (m + 1 < src_.size() && src_[m] == close && src_[m + 1] == '}') {
          push(kind == '{' ? Token::Type::kVarEnd : Token::Type::kBlockEnd, "", k);
          return after_close(m + 2, mod, kind == '%');
        }
      }
      k = token(k, &depth);
    }
  }

  size_t token(size_t k, int* depth) {
    const char c = src_[k];
    if (is_name_start(c)) {
      size_t e = k;
      while (e < src_.size() && is_name_char(src_[e])) ++e;
      push(Token::Type::kName, src_.substr(k, e - k), k);
      return e;
    }
    if (std::isdigit(static_cast<unsigned char>(c))) return number(k);
    if (c == '\'' || c == '"') return string(k);
    static const char* kOps[] = {"**", "//", "==", "!=", "<=", ">=", "+", "-", "*", "/", "%", "~", "<", ">",
                                 "=", "(", ")", "[", "]", "{", "}", ",", ".", ":", "|"};
    for (const char* op : kOps) {
      const size_t n = std::strlen(op);
      if (src_.compare(k, n, op) != 0) continue;
      if (n == 1 && std::strchr("([{", op[0])) ++*depth;
      if (n == 1 && std::strchr(")]}", op[0])) {
        if (*depth == 0) error(k, std::string("unexpected '") + op + "'");
        --*depth;
      }
      push(Token::Type::kOp, op, k);
      return k + n;
    }
    error(k, std::string("unexpected character '") + c + "'");
  }

  size_t number(size_t k) {
    size_t e = k;
    auto digits = [&] { while (e < src_.size() && std::isdigit(static_cast<unsigned char>(src_[e]))) ++e; };
    digits();
    bool is_float = false;
    if (e + 1 < src_.size() && src_[e] == '.' && std::isdigit(static_cast<unsigned char>(src_[e + 1]))) {
      ++e;
      digits();
      is_float = true;
    }
    if (e < src_.size() && (src_[e] == 'e' || src_[e] == 'E')) {
      size_t x = e + 1;
      if (x < src_.size() && (src_[x] == '+' || src_[x] == '-')) ++x;
      if (x < src_.size() && std::isdigit(static_cast<unsigned char>(src_[x]))) {
        e = x;
        digits();
        is_float = true;
      }
    }
    const std::string s = src_.substr(k, e - k);
    push(is_float ? Token::Type::kFloat : Token::Type::kInt, s, k);
    errno = 0;
    if (is_float) {
      out_.back().f = std::strtod(s.c_str(), nullptr);
    } else {
      out_.back().i = std::strtoll(s.c_str(), nullptr, 10);
      if (errno == ERANGE) error(k, "integer literal " + s + " does not fit in 64 bits (not supported)");
    }
    return e;
  }

  // A quoted string with Python's escapes (jinja2 decodes them with 'unicode-escape').
  size_t string(size_t k) {
    const char q = src_[k];
    std::string v;
    size_t e = k + 1;
    for (;; ++e) {
      if (e >= src_.size()) error(k, "unterminated string");
      if (src_[e] == q) break;
      if (src_[e] != '\\') {
        v += src_[e];
        continue;
      }
      if (++e >= src_.size()) error(k, "unterminated string");
      e = escape(e, &v);
    }
    push(Token::Type::kString, std::move(v), k);
    return e + 1;
  }

  // The escape whose letter is at e; returns the position of its last character.
  size_t escape(size_t e, std::string* v) {
    const char c = src_[e];
    switch (c) {
      case 'n': *v += '\n'; return e;
      case 't': *v += '\t'; return e;
      case 'r': *v += '\r'; return e;
      case 'b': *v += '\b'; return e;
      case 'f': *v += '\f'; return e;
      case 'v': *v += '\v'; return e;
      case 'a': *v += '\a'; return e;
      case '\\': case '\'': case '"': *v += c; return e;
      case '\n': return e;  // line continuation
      case 'x': return hex_escape(e, 2, v);
      case 'u': return hex_escape(e, 4, v);
      case 'U': return hex_escape(e, 8, v);
      case 'N': error(e, "\\N{...} escapes are not supported");
      default: break;
    }
    if (c >= '0' && c <= '7') {
      uint32_t cp = 0;
      size_t n = 0;
      for (; n < 3 && e + n < src_.size() && src_[e + n] >= '0' && src_[e + n] <= '7'; ++n) cp = cp * 8 + static_cast<uint32_t>(src_[e + n] - '0');
      append_utf8(cp, v);
      return e + n - 1;
    }
    *v += '\\';  // Python keeps unknown escapes as they are
    *v += c;
    return e;
  }

  size_t hex_escape(size_t e, size_t n, std::string* v) {
    uint32_t cp = 0;
    for (size_t d = 1; d <= n; ++d) {
      const char h = e + d < src_.size() ? src_[e + d] : 0;
      if (!std::isxdigit(static_cast<unsigned char>(h))) error(e, "truncated \\" + std::string(1, src_[e]) + " escape");
      cp = cp * 16 + static_cast<uint32_t>(std::isdigit(static_cast<unsigned char>(h)) ? h - '0' : std::tolower(h) - 'a' + 10);
    }
    if (cp > 0x10ffff) error(e, "escape outside the Unicode range");
    append_utf8(cp, v);
    return e + n;
  }

  std::string src_;
  std::vector<size_t> line_starts_;
  size_t pos_ = 0;
  std::vector<Token> out_;
};

}  // namespace

std::vector<Token> lex(const std::string& source) { return Lexer(source).run(); }

}  // namespace st::jinja
