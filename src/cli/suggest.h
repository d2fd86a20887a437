// "Did you mean" helpers for unknown keys, options and subcommands.
#pragma once

#include <string>
#include <vector>

namespace st {

// Levenshtein distance (insert, delete, substitute all cost 1).
size_t edit_distance(const std::string& a, const std::string& b);

// The candidate nearest to `word` ("" when there are no candidates). Ties keep the earlier one.
std::string closest_match(const std::string& word, const std::vector<std::string>& candidates);

// " (did you mean 'x'?)" when a candidate is within about a third of the word's length, else "".
std::string did_you_mean(const std::string& word, const std::vector<std::string>& candidates,
                         const std::string& prefix = "");

}  // namespace st
