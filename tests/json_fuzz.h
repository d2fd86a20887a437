// JSON-shape fuzzing for the readers of JSON files (tokenizer.json, config.json, adapter_config.json,
// ...): one node of a valid document replaced by a value of another type, or removed.
#pragma once

#include <iterator>
#include <random>
#include <string>
#include <vector>

#include "core/json.h"

namespace st::testing_util {

inline const std::vector<Json>& hostile_values() {
  static const std::vector<Json> v = {
      Json(),          Json(true),        Json(-1),   Json(0),       Json(4294967296LL), Json(-4294967296LL),
      Json(1.5),       Json(1e300),       Json("x"),  Json(""),      Json::array(),      Json::object(),
      Json::array({Json()}), Json{{"type", 5}}, Json{{"type", "Sequence"}}, Json::array({"a", "b", "c"})};
  return v;
}

// A random node of `j` (walking down while a coin says so), replaced by a hostile value or
// removed from its parent.
inline void mutate(Json& j, std::mt19937& rng) {
  Json* node = &j;
  Json* parent = nullptr;
  std::string key;
  size_t index = 0;
  while ((node->is_object() || node->is_array()) && !node->empty() && (parent == nullptr || rng() % 4 != 0)) {
    parent = node;
    if (node->is_object()) {
      auto it = node->begin();
      std::advance(it, static_cast<long>(rng() % node->size()));
      key = it.key();
      node = &it.value();
    } else {
      index = rng() % node->size();
      node = &(*node)[index];
    }
  }
  if (parent != nullptr && rng() % 5 == 0) {
    if (parent->is_object()) parent->erase(key);
    else parent->erase(index);
    return;
  }
  *node = hostile_values()[rng() % hostile_values().size()];
}

}  // namespace st::testing_util
