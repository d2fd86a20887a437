// Batch driver for tools/tok/config_fuzz.py: loads one tokenizer.json and tokenizes many texts in
// one process (the `streamtune tokenize` CLI takes one text per call, far too slow for a fuzz).
//   tok_batch TOKENIZER_JSON TEXTS_JSON
// TEXTS_JSON is a JSON array of strings. Prints one JSON line: {"error": msg} when the tokenizer
// is refused, else {"ok": true} followed by one line per text: {"ids": [...], "dec": HEX} where
// HEX is the UTF-8 of decode(ids, skip_special=false), hex-encoded so that a decode that is not
// valid UTF-8 still travels (and shows up as a mismatch rather than a JSON error).
// Built by config_fuzz.py against the static libraries of a CMake build dir; not part of the
// CMake build (it is a test tool, and the repo's targets are all its own modules or tests).
#include <cstdio>
#include <string>
#include <vector>

#include "core/file.h"
#include "core/json.h"
#include "data/tokenizer.h"

int main(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: tok_batch TOKENIZER_JSON TEXTS_JSON\n");
    return 2;
  }
  auto tok = st::Tokenizer::from_file(argv[1]);
  if (!tok.ok()) {
    std::printf("%s\n", st::Json({{"error", tok.status().to_string()}}).dump(-1, ' ', false, st::Json::error_handler_t::replace).c_str());
    return 0;
  }
  auto texts = st::read_json_file(argv[2]);
  if (!texts.ok() || !texts->is_array()) {
    std::fprintf(stderr, "tok_batch: bad texts file %s\n", argv[2]);
    return 2;
  }
  std::printf("{\"ok\": true}\n");
  static const char* kHex = "0123456789abcdef";
  for (const st::Json& t : *texts) {
    const std::string text = t.get<std::string>();
    std::vector<int32_t> ids = tok->encode(text, st::AddSpecial::kYes);
    const std::string dec = tok->decode(ids, st::SkipSpecial::kNo);
    std::string hex;
    for (unsigned char c : dec) {
      hex += kHex[c >> 4];
      hex += kHex[c & 15];
    }
    std::printf("%s\n", st::Json({{"ids", ids}, {"dec", hex}}).dump().c_str());
  }
  return 0;
}
