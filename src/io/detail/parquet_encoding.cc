#include "io/detail/parquet_encoding.h"

#include <cstring>

#include "io/detail/parquet_meta.h"

namespace st::parquet {
namespace {

// DELTA_BYTE_ARRAY rebuilds each value from a prefix of the one before, so a few bytes can
// describe very long values: its output is capped at this plus 64 times the page's bytes.
constexpr size_t kMaxDeltaBytesBase = size_t{256} << 20;

uint32_t le32(const uint8_t* p) { return p[0] | p[1] << 8 | p[2] << 16 | static_cast<uint32_t>(p[3]) << 24; }
uint64_t le64(const uint8_t* p) { return le32(p) | static_cast<uint64_t>(le32(p + 4)) << 32; }

bool read_uvarint(Span in, size_t* pos, uint64_t* v) {
  *v = 0;
  for (int shift = 0; shift < 64 && *pos < in.n; shift += 7) {
    const uint8_t b = in.p[(*pos)++];
    *v |= static_cast<uint64_t>(b & 0x7f) << shift;
    if (!(b & 0x80)) return true;
  }
  return false;
}

bool read_zigzag(Span in, size_t* pos, int64_t* v) {
  uint64_t u;
  if (!read_uvarint(in, pos, &u)) return false;
  *v = static_cast<int64_t>(u >> 1) ^ -static_cast<int64_t>(u & 1);
  return true;
}

// `w` (0..64) bits at bit offset `bit` of p, least significant bit first.
uint64_t read_bits(const uint8_t* p, uint64_t bit, int w) {
  if (w == 0) return 0;
  size_t byte = bit / 8;
  const int shift = static_cast<int>(bit % 8);
  uint64_t v = p[byte++] >> shift;
  for (int got = 8 - shift; got < w; got += 8) v |= static_cast<uint64_t>(p[byte++]) << got;
  return w < 64 ? v & ((uint64_t{1} << w) - 1) : v;
}

template <class T>
Status hybrid(Span in, int w, size_t count, uint32_t max_value, std::vector<T>* out, size_t* used) {
  if (w < 0 || w > 32) return Corruption(Str() << "bit width " << w << " is out of range (0..32)");
  const size_t value_bytes = (static_cast<size_t>(w) + 7) / 8;
  size_t pos = 0, need = count;
  const size_t start = out->size();
  auto short_of = [&]() {
    return Corruption(Str() << "RLE/bit-packed data ends after " << out->size() - start << " of " << count << " values");
  };
  while (need > 0) {
    uint64_t header;
    if (!read_uvarint(in, &pos, &header)) return short_of();
    if (header & 1) {  // bit-packed: (header >> 1) groups of 8 values
      const uint64_t groups = header >> 1;
      const size_t take = groups >= need / 8 + 1 ? need : static_cast<size_t>(groups * 8);
      const uint64_t run_bytes = groups > in.n ? UINT64_MAX : groups * static_cast<uint64_t>(w);
      const size_t take_bytes = (take * static_cast<size_t>(w) + 7) / 8;
      if (take_bytes > in.left(pos)) return short_of();
      uint64_t acc = 0;
      int bits = 0;
      const uint8_t* p = in.p + pos;
      const uint64_t mask = w == 32 ? 0xffffffffu : (uint64_t{1} << w) - 1;
      for (size_t i = 0; i < take; ++i) {
        while (bits < w) {
          acc |= static_cast<uint64_t>(*p++) << bits;
          bits += 8;
        }
        const uint64_t v = acc & mask;
        acc >>= w;
        bits -= w;
        if (v > max_value) return Corruption(Str() << "level " << v << " > the column's maximum " << max_value);
        out->push_back(static_cast<T>(v));
      }
      pos += run_bytes < in.left(pos) ? static_cast<size_t>(run_bytes) : in.left(pos);
      need -= take;
    } else {  // RLE: one value repeated (header >> 1) times
      if (value_bytes > in.left(pos)) return short_of();
      uint64_t v = 0;
      for (size_t b = 0; b < value_bytes; ++b) v |= static_cast<uint64_t>(in.p[pos + b]) << (8 * b);
      pos += value_bytes;
      if (v > max_value) return Corruption(Str() << "level " << v << " > the column's maximum " << max_value);
      const size_t take = (header >> 1) < need ? static_cast<size_t>(header >> 1) : need;
      out->insert(out->end(), take, static_cast<T>(v));
      need -= take;
    }
  }
  if (used) *used = pos;
  return Status::OK();
}

Status plain(int32_t type, int32_t type_length, Span in, size_t count, Values* out) {
  auto too_short = [&](size_t each) {
    return Corruption(Str() << "PLAIN " << physical_type_name(type) << ": " << count << " values need "
                            << (each ? std::to_string(each) + " bytes each, " : std::string()) << "the page holds " << in.n
                            << " bytes");
  };
  switch (type) {
    case kBoolean:
      if ((count + 7) / 8 > in.n) return too_short(0);
      for (size_t i = 0; i < count; ++i) out->ints.push_back((in.p[i / 8] >> (i % 8)) & 1);
      return Status::OK();
    case kInt32:
    case kFloat:
      if (count > in.n / 4) return too_short(4);
      for (size_t i = 0; i < count; ++i) {
        const uint32_t u = le32(in.p + 4 * i);
        if (type == kInt32) {
          out->ints.push_back(static_cast<int32_t>(u));
        } else {
          float f;
          std::memcpy(&f, &u, 4);
          out->reals.push_back(f);
        }
      }
      return Status::OK();
    case kInt64:
    case kDouble:
      if (count > in.n / 8) return too_short(8);
      for (size_t i = 0; i < count; ++i) {
        const uint64_t u = le64(in.p + 8 * i);
        if (type == kInt64) {
          out->ints.push_back(static_cast<int64_t>(u));
        } else {
          double d;
          std::memcpy(&d, &u, 8);
          out->reals.push_back(d);
        }
      }
      return Status::OK();
    case kInt96:  // 8 bytes of nanoseconds in the day, then a 4-byte Julian day number
      if (count > in.n / 12) return too_short(12);
      for (size_t i = 0; i < count; ++i) {
        const uint64_t nanos = le64(in.p + 12 * i);
        const int64_t day = static_cast<int32_t>(le32(in.p + 12 * i + 8));
        out->ints.push_back(static_cast<int64_t>(static_cast<uint64_t>(day - 2440588) * 86400000000000ull + nanos));
      }
      return Status::OK();
    case kByteArray: {
      if (count > in.n / 4) return too_short(4);
      size_t pos = 0;
      for (size_t i = 0; i < count; ++i) {
        if (in.left(pos) < 4) return too_short(4);
        const uint32_t len = le32(in.p + pos);
        pos += 4;
        if (len > in.left(pos))
          return Corruption(Str() << "PLAIN BYTE_ARRAY value " << i << " of " << len << " bytes, only " << in.left(pos) << " left");
        out->bytes.append(reinterpret_cast<const char*>(in.p + pos), len);
        out->ends.push_back(out->bytes.size());
        pos += len;
      }
      return Status::OK();
    }
    case kFixedLenByteArray: {
      if (type_length <= 0) return Corruption(Str() << "FIXED_LEN_BYTE_ARRAY of length " << type_length);
      const size_t len = static_cast<size_t>(type_length);
      if (count > in.n / len) return too_short(len);
      for (size_t i = 0; i < count; ++i) {
        out->bytes.append(reinterpret_cast<const char*>(in.p + i * len), len);
        out->ends.push_back(out->bytes.size());
      }
      return Status::OK();
    }
    default:
      return Corruption(Str() << "physical type " << type << " is unknown");
  }
}

// DELTA_BINARY_PACKED: exactly `count` values (the header must say so) into *out; *used = the
// bytes up to the end of the last miniblock that holds a value.
Status delta_binary(Span in, size_t count, bool is32, std::vector<int64_t>* out, size_t* used) {
  size_t pos = 0;
  uint64_t block, mbs, total;
  int64_t first;
  if (!read_uvarint(in, &pos, &block) || !read_uvarint(in, &pos, &mbs) || !read_uvarint(in, &pos, &total) ||
      !read_zigzag(in, &pos, &first))
    return Corruption("DELTA_BINARY_PACKED: truncated header");
  if (block == 0 || block % 128 != 0 || block > (1u << 20) || mbs == 0 || block % mbs != 0 || (block / mbs) % 32 != 0)
    return Corruption(Str() << "DELTA_BINARY_PACKED: block of " << block << " values in " << mbs << " miniblocks");
  if (total != count) return Corruption(Str() << "DELTA_BINARY_PACKED holds " << total << " values, the page has " << count);
  const size_t per_mb = static_cast<size_t>(block / mbs);
  uint64_t prev = static_cast<uint64_t>(first);
  if (count > 0) out->push_back(is32 ? static_cast<int32_t>(prev) : first);
  size_t left = count > 0 ? count - 1 : 0;
  while (left > 0) {
    int64_t min_delta;
    if (!read_zigzag(in, &pos, &min_delta) || mbs > in.left(pos))
      return Corruption("DELTA_BINARY_PACKED: truncated block header");
    const uint8_t* widths = in.p + pos;
    pos += static_cast<size_t>(mbs);
    for (size_t m = 0; m < mbs && left > 0; ++m) {
      const int w = widths[m];
      if (w > (is32 ? 32 : 64)) return Corruption(Str() << "DELTA_BINARY_PACKED: bit width " << w);
      const size_t bytes = per_mb * static_cast<size_t>(w) / 8;
      if (bytes > in.left(pos)) return Corruption("DELTA_BINARY_PACKED: truncated miniblock");
      const size_t take = left < per_mb ? left : per_mb;
      for (size_t j = 0; j < take; ++j) {
        prev += static_cast<uint64_t>(min_delta) + read_bits(in.p + pos, static_cast<uint64_t>(j) * w, w);
        if (is32) prev = static_cast<uint64_t>(static_cast<int64_t>(static_cast<int32_t>(prev)));
        out->push_back(static_cast<int64_t>(prev));
      }
      pos += bytes;
      left -= take;
    }
  }
  *used = pos;
  return Status::OK();
}

// Lengths (DELTA_BINARY_PACKED) then the concatenated bytes; *used as above.
Status delta_length(Span in, size_t count, std::vector<int64_t>* lens, size_t* data_pos) {
  RETURN_IF_ERROR(delta_binary(in, count, /*is32=*/true, lens, data_pos));
  uint64_t sum = 0;
  for (int64_t l : *lens) {
    if (l < 0) return Corruption(Str() << "negative byte-array length " << l);
    sum += static_cast<uint64_t>(l);
    if (sum > in.left(*data_pos)) return Corruption("byte-array lengths add up to more than the page holds");
  }
  return Status::OK();
}

Status delta_byte_array(int32_t type, int32_t type_length, Span in, size_t count, Values* out) {
  std::vector<int64_t> prefix, suffix;
  size_t pos = 0, pos2 = 0;
  RETURN_IF_ERROR(delta_binary(in, count, /*is32=*/true, &prefix, &pos), "DELTA_BYTE_ARRAY prefixes");
  Span rest{in.p + pos, in.n - pos};
  RETURN_IF_ERROR(delta_length(rest, count, &suffix, &pos2), "DELTA_BYTE_ARRAY suffixes");
  const uint8_t* data = rest.p + pos2;
  const size_t cap = kMaxDeltaBytesBase + 64 * in.n;
  std::string prev, cur;
  size_t total = 0;
  for (size_t i = 0; i < count; ++i) {
    if (prefix[i] < 0 || static_cast<uint64_t>(prefix[i]) > prev.size())
      return Corruption(Str() << "DELTA_BYTE_ARRAY value " << i << ": prefix " << prefix[i] << " of a " << prev.size()
                              << "-byte value");
    total += static_cast<size_t>(prefix[i]) + static_cast<size_t>(suffix[i]);
    if (total > cap) return Corruption(Str() << "DELTA_BYTE_ARRAY expands past " << cap << " bytes");
    cur.assign(prev, 0, static_cast<size_t>(prefix[i]));
    cur.append(reinterpret_cast<const char*>(data), static_cast<size_t>(suffix[i]));
    data += suffix[i];
    if (type == kFixedLenByteArray && cur.size() != static_cast<size_t>(type_length))
      return Corruption(Str() << "DELTA_BYTE_ARRAY value " << i << " of " << cur.size() << " bytes, the column's length is "
                              << type_length);
    out->bytes += cur;
    out->ends.push_back(out->bytes.size());
    prev.swap(cur);
  }
  return Status::OK();
}

Status byte_stream_split(int32_t type, int32_t type_length, Span in, size_t count, Values* out) {
  size_t k = 0;
  if (type == kFloat || type == kInt32) k = 4;
  else if (type == kDouble || type == kInt64) k = 8;
  else if (type == kFixedLenByteArray && type_length > 0) k = static_cast<size_t>(type_length);
  else return Unimplemented(Str() << "encoding BYTE_STREAM_SPLIT for " << physical_type_name(type));
  if (count > in.n / k) return Corruption(Str() << "BYTE_STREAM_SPLIT: " << count << " values of " << k << " bytes, page holds " << in.n);
  std::string v(k, '\0');
  for (size_t i = 0; i < count; ++i) {
    for (size_t b = 0; b < k; ++b) v[b] = static_cast<char>(in.p[b * count + i]);
    RETURN_IF_ERROR(plain(type, type_length, Span{reinterpret_cast<const uint8_t*>(v.data()), k}, 1, out));
  }
  return Status::OK();
}

}  // namespace

size_t Values::size() const {
  switch (type) {
    case kFloat:
    case kDouble: return reals.size();
    case kByteArray:
    case kFixedLenByteArray: return by_ref ? refs.size() : ends.size();
    default: return ints.size();
  }
}

void Values::append_from(const Values& dict, size_t i) {
  switch (type) {
    case kFloat:
    case kDouble: reals.push_back(dict.reals[i]); return;
    case kByteArray:
    case kFixedLenByteArray:
      bytes += dict.str(i);
      ends.push_back(bytes.size());
      return;
    default: ints.push_back(dict.ints[i]);
  }
}

void Values::clear() {
  ints.clear();
  reals.clear();
  ends.clear();
  bytes.clear();
  refs.clear();
  by_ref = false;
}

int bit_width_of(uint32_t max_value) {
  int w = 0;
  while (w < 32 && (max_value >> w) != 0) ++w;
  return w;
}

Status decode_hybrid(Span in, int bit_width, size_t count, uint32_t max_value, std::vector<uint32_t>* out, size_t* used) {
  return hybrid(in, bit_width, count, max_value, out, used);
}

Status decode_levels(Span in, int bit_width, size_t count, int max_level, std::vector<uint8_t>* out) {
  return hybrid(in, bit_width, count, static_cast<uint32_t>(max_level), out, nullptr);
}

Status decode_values(int32_t type, int32_t type_length, int32_t encoding, Span in, size_t count, Values* out) {
  switch (encoding) {
    case kPlain:
      return plain(type, type_length, in, count, out);
    case kRle: {  // booleans only: a 4-byte length, then the hybrid with bit width 1
      if (type != kBoolean) return Corruption(Str() << "RLE-encoded values of type " << physical_type_name(type));
      if (count == 0) return Status::OK();
      if (in.n < 4 || le32(in.p) > in.n - 4) return Corruption("RLE booleans: bad length prefix");
      std::vector<uint32_t> bits;
      RETURN_IF_ERROR(hybrid(Span{in.p + 4, le32(in.p)}, 1, count, 1, &bits, nullptr));
      out->ints.insert(out->ints.end(), bits.begin(), bits.end());
      return Status::OK();
    }
    case kDeltaBinaryPacked: {
      if (type != kInt32 && type != kInt64)
        return Corruption(Str() << "DELTA_BINARY_PACKED values of type " << physical_type_name(type));
      size_t used;
      return delta_binary(in, count, type == kInt32, &out->ints, &used);
    }
    case kDeltaLengthByteArray: {
      if (type != kByteArray) return Corruption(Str() << "DELTA_LENGTH_BYTE_ARRAY values of type " << physical_type_name(type));
      std::vector<int64_t> lens;
      size_t pos;
      RETURN_IF_ERROR(delta_length(in, count, &lens, &pos));
      for (int64_t l : lens) {
        out->bytes.append(reinterpret_cast<const char*>(in.p + pos), static_cast<size_t>(l));
        out->ends.push_back(out->bytes.size());
        pos += static_cast<size_t>(l);
      }
      return Status::OK();
    }
    case kDeltaByteArray:
      if (type != kByteArray && type != kFixedLenByteArray)
        return Corruption(Str() << "DELTA_BYTE_ARRAY values of type " << physical_type_name(type));
      return delta_byte_array(type, type_length, in, count, out);
    case kByteStreamSplit:
      return byte_stream_split(type, type_length, in, count, out);
    default:
      return Unimplemented(Str() << "encoding " << encoding_name(encoding));
  }
}

}  // namespace st::parquet
