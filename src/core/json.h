// JSON parsing for config.json, safetensors headers, tokenizer.json, JSONL. A thin wrapper
// over nlohmann::json (Debian: nlohmann-json3-dev) that turns parse exceptions into a Status
// naming the source and byte offset, so no exception crosses a module boundary.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

#include "core/status.h"

namespace st {

using Json = nlohmann::json;
// Keys keep file order (needed where order matters, e.g. writing adapter_config.json).
using OrderedJson = nlohmann::ordered_json;

// `what` names the source in errors ("config.json", "data.jsonl line 17").
StatusOr<Json> parse_json(std::string_view text, const std::string& what);
StatusOr<OrderedJson> parse_ordered_json(std::string_view text, const std::string& what);
// Python's json.dumps(v, ensure_ascii=False) -- separators ", " and ": ", keys in order, floats as
// Python's repr -- which is what a Jinja chat template's `tojson` writes (tool schemas, arguments).
std::string python_json_dumps(const OrderedJson& v);
// Python's repr(float): "1.0", "1e-05", "0.1", "nan", "inf".
std::string python_float_repr(double d);
StatusOr<Json> read_json_file(const std::string& path);

// Typed getters with errors naming the key and `what`.
StatusOr<int64_t> json_int(const Json& j, const char* key, const std::string& what);
StatusOr<double> json_number(const Json& j, const char* key, const std::string& what);
StatusOr<std::string> json_string(const Json& j, const char* key, const std::string& what);

}  // namespace st
