// UTF-8 validity as JSON and the tokenizers need it: well-formed sequences of 1-4 bytes, no
// overlong forms, no surrogates, nothing past U+10FFFF.
#pragma once

#include <string_view>

namespace st {

bool valid_utf8(std::string_view s);

}  // namespace st
