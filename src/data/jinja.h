// A Jinja2 interpreter for HF chat templates: renders a tokenizer's `chat_template` exactly as
// transformers' apply_chat_template does -- jinja2's ImmutableSandboxedEnvironment with
// trim_blocks, lstrip_blocks and the loopcontrols extension, plus transformers' `tojson` filter
// (Python's json.dumps, ensure_ascii=False), `raise_exception(msg)`, `strftime_now(fmt)` and the
// {% generation %} tag. Values follow Python's semantics (truthiness, 1 == 1.0, "1.0" for floats,
// dicts in insertion order). What the interpreter does not support fails with a Status naming the
// template, line and column, never renders something else (the list: data/detail/jinja_eval.cc top).
//
// Templates and the data they render come from downloaded files: parsing and rendering are bounded
// (nesting depth, macro recursion, loop iterations, output and string size, list length, value
// depth, work done; data/detail/jinja_value.h, jinja_eval.h) and fail with a Status, not a crash.
#pragma once

#include <memory>
#include <string>

#include "core/json.h"
#include "core/status.h"

namespace st {

namespace jinja {
struct Program;
}

// Parsed once, rendered many times; render() is const and safe to call from several threads.
class JinjaTemplate {
 public:
  // Syntax errors: InvalidArgument "WHAT:LINE:COL: problem". `what` names the source in errors.
  static StatusOr<JinjaTemplate> parse(const std::string& source, const std::string& what);
  // `context`: the template's variables (messages, add_generation_prompt, bos_token, tools, ...),
  // an object. raise_exception(msg) -> InvalidArgument carrying msg; any other template error
  // (type error, undefined attribute, unsupported construct, a limit) -> InvalidArgument naming
  // line:column.
  StatusOr<std::string> render(const OrderedJson& context) const;
  const std::string& what() const;

 private:
  std::shared_ptr<const jinja::Program> prog_;
};

}  // namespace st
