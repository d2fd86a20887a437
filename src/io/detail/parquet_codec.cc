#include "io/detail/parquet_codec.h"

#include <snappy-c.h>
#include <zlib.h>
#include <zstd.h>

#include <algorithm>

#include "io/detail/parquet_meta.h"

namespace st::parquet {
namespace {

constexpr size_t kChunk = size_t{1} << 30;       // zlib counts in 32-bit uInt: feed it in pieces
constexpr size_t kFirstBuffer = size_t{64} << 10;

// Grows *out (keeping its bytes) toward `limit`, doubling; returns false when already there.
bool grow(std::string* out, size_t limit, size_t hint) {
  if (out->size() >= limit) return false;
  const size_t want = std::max({out->size() * 2, hint, kFirstBuffer});
  out->resize(std::min(want, limit));
  return true;
}

// Inflates [src, src + n) into *out, at most `limit` bytes; *more is set when the stream holds
// more than that. `members`: after a member ends, further gzip members follow (zero padding at the
// very end is ignored).
Status inflate_stream(const uint8_t* src, size_t n, size_t limit, bool members, std::string* out, bool* more) {
  *more = false;
  z_stream zs{};
  if (inflateInit2(&zs, 15 + 32) != Z_OK) return Internal("zlib: inflateInit2 failed");
  struct End {
    z_stream* z;
    ~End() { inflateEnd(z); }
  } end{&zs};
  out->clear();
  size_t in_pos = 0, out_pos = 0;
  // One byte of room past the limit tells "exactly limit bytes" from "more than limit".
  const size_t cap = limit == SIZE_MAX ? limit : limit + 1;
  for (;;) {
    if (out_pos == out->size() && !grow(out, cap, n * 4)) break;
    const size_t in_chunk = std::min(n - in_pos, kChunk), out_chunk = std::min(out->size() - out_pos, kChunk);
    zs.next_in = const_cast<Bytef*>(src + in_pos);
    zs.avail_in = static_cast<uInt>(in_chunk);
    zs.next_out = reinterpret_cast<Bytef*>(out->data() + out_pos);
    zs.avail_out = static_cast<uInt>(out_chunk);
    const int rc = inflate(&zs, Z_NO_FLUSH);
    const size_t used = in_chunk - zs.avail_in, made = out_chunk - zs.avail_out;
    in_pos += used;
    out_pos += made;
    if (rc == Z_STREAM_END) {
      const bool padding = std::all_of(src + in_pos, src + n, [](uint8_t b) { return b == 0; });
      if (!members || padding) break;
      if (inflateReset(&zs) != Z_OK) return Internal("zlib: inflateReset failed");
      continue;
    }
    if (rc == Z_OK || (rc == Z_BUF_ERROR && (used > 0 || made > 0))) continue;
    if (rc == Z_BUF_ERROR && out_pos < out->size()) {
      return Corruption(Str() << "truncated deflate stream (" << out_pos << " bytes came out of " << n << ")");
    }
    if (rc == Z_BUF_ERROR) continue;  // output full: grow and go on
    return Corruption(Str() << "damaged deflate stream after " << out_pos << " bytes of output: "
                            << (zs.msg ? zs.msg : "zlib error " + std::to_string(rc)));
  }
  if (out_pos > limit) *more = true;
  out->resize(std::min(out_pos, limit));
  return Status::OK();
}

Status unzstd(const uint8_t* src, size_t n, size_t expected, std::string* out) {
  ZSTD_DCtx* d = ZSTD_createDCtx();
  if (!d) return Internal("zstd: ZSTD_createDCtx failed");
  struct Free {
    ZSTD_DCtx* d;
    ~Free() { ZSTD_freeDCtx(d); }
  } free_ctx{d};
  out->clear();
  ZSTD_inBuffer in{src, n, 0};
  size_t out_pos = 0;
  for (;;) {
    if (out_pos == out->size()) grow(out, expected, n * 4);
    ZSTD_outBuffer ob{out->data(), out->size(), out_pos};
    const size_t in_before = in.pos;
    const size_t rc = ZSTD_decompressStream(d, &ob, &in);
    if (ZSTD_isError(rc)) return Corruption(Str() << "zstd: " << ZSTD_getErrorName(rc));
    const bool progress = in.pos != in_before || ob.pos != out_pos;
    out_pos = ob.pos;
    if (rc == 0 && in.pos == in.size) break;
    if (progress) continue;
    if (out_pos == out->size())
      return Corruption(Str() << "decompresses to more than the " << expected << " bytes the page header says");
    return Corruption(Str() << "truncated zstd stream (" << out_pos << " of " << expected << " bytes came out)");
  }
  out->resize(out_pos);
  return Status::OK();
}

Status unsnappy(const uint8_t* src, size_t n, size_t expected, std::string* out) {
  size_t len = 0;
  const char* s = reinterpret_cast<const char*>(src);
  if (snappy_uncompressed_length(s, n, &len) != SNAPPY_OK) return Corruption("snappy: damaged length header");
  if (len != expected)
    return Corruption(Str() << "snappy stream holds " << len << " bytes, the page header says " << expected);
  // A snappy element expands at most 64 bytes from 3: a bigger claim cannot be true.
  if (len / 22 > n + 16) return Corruption(Str() << "snappy stream claims " << len << " bytes from " << n);
  out->resize(len);
  size_t got = len;
  if (snappy_uncompress(s, n, out->data(), &got) != SNAPPY_OK || got != len)
    return Corruption("snappy: damaged stream");
  return Status::OK();
}

}  // namespace

bool codec_supported(int32_t codec) {
  return codec == kUncompressed || codec == kSnappy || codec == kGzip || codec == kZstd;
}

Status decompress(int32_t codec, const uint8_t* src, size_t n, size_t expected, std::string* out) {
  if (n == 0 && expected == 0) {
    out->clear();
    return Status::OK();
  }
  Status s;
  switch (codec) {
    case kUncompressed:
      if (n != expected) return Corruption(Str() << "uncompressed page of " << n << " bytes, header says " << expected);
      out->assign(reinterpret_cast<const char*>(src), n);
      return Status::OK();
    case kSnappy:
      return unsnappy(src, n, expected, out);
    case kZstd:
      s = unzstd(src, n, expected, out);
      break;
    case kGzip: {
      bool more = false;
      s = inflate_stream(src, n, expected, /*members=*/true, out, &more);
      if (s.ok() && more) return Corruption(Str() << "decompresses to more than the " << expected << " bytes the page header says");
      break;
    }
    default:
      return Unimplemented(Str() << "codec " << codec_name(codec));
  }
  if (!s.ok()) return s;
  if (out->size() != expected)
    return Corruption(Str() << codec_name(codec) << " page decompressed to " << out->size() << " bytes, the page header says "
                            << expected);
  return Status::OK();
}

Status gunzip(std::string_view src, size_t max_bytes, std::string* out) {
  bool more = false;
  RETURN_IF_ERROR(inflate_stream(reinterpret_cast<const uint8_t*>(src.data()), src.size(), max_bytes, /*members=*/true, out, &more));
  if (more) {
    out->clear();
    return InvalidArgument(Str() << "decompresses to more than " << max_bytes << " bytes (the cap); decompress it first");
  }
  return Status::OK();
}

}  // namespace st::parquet
