// GGUF v3 writer (formats.md §4): metadata then tensors, streamed, written atomically.
//
// The metadata is a list of (key, GgufValue) -- typically copied from an opened file (gguf.h
// GgufFile::find), so a rewritten model keeps its tokenizer, chat template and hyper-parameters
// byte for byte. Tensors are described first (name, type, ggml ne) and their bytes are produced
// one at a time by a callback, so a model need not fit in memory twice. The file goes to
// "path.tmp.<pid>", is fsync'd and renamed over `path`: a failure never leaves a half-written
// file under the final name.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "core/status.h"
#include "io/gguf.h"

namespace st {

struct GgufOutTensor {
  std::string name;
  GgmlType type = GgmlType::kF32;
  std::vector<int64_t> ne;  // ggml order (ne[0] contiguous)
  uint64_t nbytes = 0;      // must equal the type's size for ne
};

// The bytes a tensor of `type` and ggml shape `ne` takes; InvalidArgument when ne[0] is not a
// multiple of the block size.
StatusOr<uint64_t> ggml_nbytes(GgmlType type, const std::vector<int64_t>& ne);

// fill(i, buf) must leave exactly tensors[i].nbytes bytes in *buf.
using GgufFill = std::function<Status(size_t i, std::vector<uint8_t>* buf)>;
Status write_gguf(const std::string& path, const std::vector<std::pair<std::string, GgufValue>>& kv,
                  uint64_t alignment, const std::vector<GgufOutTensor>& tensors, const GgufFill& fill);

}  // namespace st
