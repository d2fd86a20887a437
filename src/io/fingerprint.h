// Cheap identity of a set of source files (for the layer-store cache key): a change of any file's
// name, size or modification time changes the fingerprint. Contents are not read, so this is O(files).
#pragma once

#include <string>
#include <vector>

#include "core/status.h"

namespace st {

// 16 hex digits (64-bit FNV-1a) over each file's basename, size and mtime in nanoseconds, in the
// given order. NotFound / IOError naming the file if one cannot be stat'ed.
StatusOr<std::string> source_fingerprint(const std::vector<std::string>& files);

}  // namespace st
