#include "core/json.h"

#include "core/file.h"

namespace st {

StatusOr<Json> parse_json(std::string_view text, const std::string& what) {
  try {
    return Json::parse(text.begin(), text.end());
  } catch (const Json::parse_error& e) {
    return Corruption(Str() << what << ": invalid JSON at byte " << e.byte << ": " << e.what());
  } catch (const std::exception& e) {
    return Corruption(Str() << what << ": invalid JSON: " << e.what());
  }
}

StatusOr<Json> read_json_file(const std::string& path) {
  ASSIGN_OR_RETURN(std::string text, read_file_to_string(path));
  return parse_json(text, path);
}

StatusOr<int64_t> json_int(const Json& j, const char* key, const std::string& what) {
  auto it = j.find(key);
  if (it == j.end()) return NotFound(Str() << what << ": missing key '" << key << "'");
  if (!it->is_number_integer()) return Corruption(Str() << what << ": key '" << key << "' is not an integer");
  return it->get<int64_t>();
}

StatusOr<double> json_number(const Json& j, const char* key, const std::string& what) {
  auto it = j.find(key);
  if (it == j.end()) return NotFound(Str() << what << ": missing key '" << key << "'");
  if (!it->is_number()) return Corruption(Str() << what << ": key '" << key << "' is not a number");
  return it->get<double>();
}

StatusOr<std::string> json_string(const Json& j, const char* key, const std::string& what) {
  auto it = j.find(key);
  if (it == j.end()) return NotFound(Str() << what << ": missing key '" << key << "'");
  if (!it->is_string()) return Corruption(Str() << what << ": key '" << key << "' is not a string");
  return it->get<std::string>();
}

}  // namespace st
