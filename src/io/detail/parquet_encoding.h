// Parquet value and level encodings over one decompressed page buffer: the RLE / bit-packed
// hybrid (levels, dictionary indices, RLE booleans), PLAIN, DELTA_BINARY_PACKED,
// DELTA_LENGTH_BYTE_ARRAY, DELTA_BYTE_ARRAY and BYTE_STREAM_SPLIT.
//
// Every decoder is told how many values it must produce (`count`, already capped by the caller)
// and fails with Corruption, without context, when the bytes run out or contradict themselves;
// outputs grow only as values are really decoded.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"

namespace st::parquet {

// Decoded values of one column chunk, by physical type: BOOLEAN / INT32 / INT64 / INT96 (as
// nanoseconds since the epoch) in `ints`, FLOAT / DOUBLE in `reals`, BYTE_ARRAY /
// FIXED_LEN_BYTE_ARRAY stored as `bytes` cut at `ends` (entry k is bytes[ends[k-1], ends[k])).
// A dictionary-encoded byte-array chunk keeps its dictionary as the first stored entries and
// refers to them (by_ref: value i is entry refs[i]) instead of copying: a few bytes of RLE
// indices cannot make it copy one long string millions of times.
struct Values {
  int32_t type = 0;
  std::vector<int64_t> ints;
  std::vector<double> reals;
  std::vector<uint64_t> ends;
  std::string bytes;
  bool by_ref = false;
  std::vector<uint32_t> refs;

  size_t size() const;
  size_t stored() const { return ends.size(); }
  std::string_view stored_str(size_t k) const {
    const uint64_t b = k ? ends[k - 1] : 0;
    return std::string_view(bytes).substr(b, ends[k] - b);
  }
  std::string_view str(size_t i) const { return stored_str(by_ref ? refs[i] : i); }
  // Appends value i of `dict` (numeric types; i < dict.size() checked by the caller).
  void append_from(const Values& dict, size_t i);
  void clear();
};

// Bounded byte cursor.
struct Span {
  const uint8_t* p = nullptr;
  size_t n = 0;
  size_t left(size_t pos) const { return pos <= n ? n - pos : 0; }
};

// RLE / bit-packed hybrid (no length prefix): appends exactly `count` values of `bit_width`
// (0..32) bits to *out, each checked <= max_value. *used (optional) = bytes consumed.
Status decode_hybrid(Span in, int bit_width, size_t count, uint32_t max_value, std::vector<uint32_t>* out,
                     size_t* used = nullptr);
// The same into 8-bit levels.
Status decode_levels(Span in, int bit_width, size_t count, int max_level, std::vector<uint8_t>* out);
// Bits needed to store values 0..max_value.
int bit_width_of(uint32_t max_value);

// Values of `type` (type_length for FIXED_LEN_BYTE_ARRAY) in `encoding`, `count` of them,
// appended to *out. Dictionary encodings are handled by the caller (decode_hybrid + append_from).
Status decode_values(int32_t type, int32_t type_length, int32_t encoding, Span in, size_t count, Values* out);

}  // namespace st::parquet
