// RangeReader: reads byte ranges of store files. The seam for fault injection (tests wrap it to
// fail or truncate reads of a chosen file) and for O_DIRECT.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "core/status.h"

namespace st {

class RangeReader {
 public:
  virtual ~RangeReader() = default;
  // Reads exactly `len` bytes at file offset `offset` of `path` into host memory `dst`.
  // `dst` must be kStoreIoAlign-aligned with room for round_up(len, kStoreIoAlign) bytes and
  // `offset` kStoreIoAlign-aligned (O_DIRECT may read up to that rounded length, stopping at
  // EOF). IOError naming the file if the OS refuses; Corruption naming it on a short read.
  // Thread-safe.
  virtual Status read(const std::string& path, uint64_t offset, size_t len, void* dst) = 0;
};

enum class IoMode { kDirect, kBuffered };  // kDirect falls back to buffered where unsupported

std::unique_ptr<RangeReader> make_file_reader(IoMode mode = IoMode::kDirect);

uint64_t round_up_io(uint64_t v);  // to a multiple of kStoreIoAlign

}  // namespace st
