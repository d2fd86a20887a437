#include "io/detail/parquet_codec.h"

#include <brotli/decode.h>
#include <lz4.h>
#include <snappy-c.h>
#include <zlib.h>
#include <zstd.h>

#include <limits>

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

// One LZ4 block [src, src + n) into exactly `expected` bytes at dst. An LZ4 block expands at most
// ~255x (a match byte run), so a bigger claim is refused before any allocation by the caller.
bool lz4_block(const uint8_t* src, size_t n, char* dst, size_t expected) {
  constexpr size_t kMax = static_cast<size_t>(std::numeric_limits<int>::max());
  if (n > kMax || expected > kMax) return false;
  const int got = LZ4_decompress_safe(reinterpret_cast<const char*>(src), dst, static_cast<int>(n),
                                      static_cast<int>(expected));
  return got >= 0 && static_cast<size_t>(got) == expected;
}

bool lz4_claim_plausible(size_t n, size_t expected) { return expected / 255 <= n + 16; }

// LZ4_RAW (codec 7): one LZ4 block, no framing.
Status unlz4_raw(const uint8_t* src, size_t n, size_t expected, std::string* out) {
  if (!lz4_claim_plausible(n, expected))
    return Corruption(Str() << "lz4 block of " << n << " bytes cannot hold the " << expected << " the page header says");
  out->resize(expected);
  if (!lz4_block(src, n, out->data(), expected)) return Corruption("lz4: damaged block");
  return Status::OK();
}

uint32_t be32(const uint8_t* p) {
  return static_cast<uint32_t>(p[0]) << 24 | static_cast<uint32_t>(p[1]) << 16 | static_cast<uint32_t>(p[2]) << 8 | p[3];
}

// LZ4 (codec 5, deprecated): Hadoop's framing -- blocks of [u32 BE decompressed size][u32 BE
// compressed size][LZ4 block] -- as parquet-mr writes it; some older writers put one bare LZ4
// block there instead. Like Arrow, the Hadoop reading is tried first and the bare block is the
// fallback.
Status unlz4_hadoop(const uint8_t* src, size_t n, size_t expected, std::string* out) {
  if (!lz4_claim_plausible(n, expected))
    return Corruption(Str() << "lz4 stream of " << n << " bytes cannot hold the " << expected << " the page header says");
  out->resize(expected);
  size_t in = 0, made = 0;
  bool framed = n >= 8;
  while (framed && in < n) {
    if (n - in < 8) { framed = false; break; }
    const size_t dsize = be32(src + in), csize = be32(src + in + 4);
    if (csize > n - in - 8 || dsize > expected - made || !lz4_block(src + in + 8, csize, out->data() + made, dsize)) {
      framed = false;
      break;
    }
    in += 8 + csize;
    made += dsize;
  }
  if (framed && made == expected) return Status::OK();
  if (!lz4_block(src, n, out->data(), expected)) return Corruption("lz4: damaged stream (neither Hadoop-framed nor one block)");
  return Status::OK();
}

// BROTLI (codec 4), streamed into a buffer that grows with the output (a brotli stream can claim
// far more than ~255x; the header's size is only a cap).
Status unbrotli(const uint8_t* src, size_t n, size_t expected, std::string* out) {
  BrotliDecoderState* d = BrotliDecoderCreateInstance(nullptr, nullptr, nullptr);
  if (!d) return Internal("brotli: BrotliDecoderCreateInstance failed");
  struct Free {
    BrotliDecoderState* d;
    ~Free() { BrotliDecoderDestroyInstance(d); }
  } free_dec{d};
  out->clear();
  size_t avail_in = n, out_pos = 0;
  const uint8_t* next_in = src;
  for (;;) {
    if (out_pos == out->size() && !grow(out, expected, n * 4)) {
      // Full at the header's size: only the end of the stream may follow.
      uint8_t probe = 0;
      size_t avail_out = 1;
      uint8_t* next_out = &probe;
      const BrotliDecoderResult r = BrotliDecoderDecompressStream(d, &avail_in, &next_in, &avail_out, &next_out, nullptr);
      if (r == BROTLI_DECODER_RESULT_SUCCESS && avail_out == 1) break;
      if (r == BROTLI_DECODER_RESULT_NEEDS_MORE_INPUT)
        return Corruption(Str() << "truncated brotli stream (" << out_pos << " bytes came out)");
      if (r == BROTLI_DECODER_RESULT_ERROR)
        return Corruption(Str() << "brotli: " << BrotliDecoderErrorString(BrotliDecoderGetErrorCode(d)));
      return Corruption(Str() << "decompresses to more than the " << expected << " bytes the page header says");
    }
    size_t avail_out = out->size() - out_pos;
    uint8_t* next_out = reinterpret_cast<uint8_t*>(out->data() + out_pos);
    const BrotliDecoderResult r = BrotliDecoderDecompressStream(d, &avail_in, &next_in, &avail_out, &next_out, nullptr);
    out_pos = out->size() - avail_out;
    if (r == BROTLI_DECODER_RESULT_SUCCESS) break;
    if (r == BROTLI_DECODER_RESULT_NEEDS_MORE_OUTPUT) continue;
    if (r == BROTLI_DECODER_RESULT_NEEDS_MORE_INPUT)
      return Corruption(Str() << "truncated brotli stream (" << out_pos << " of " << expected << " bytes came out)");
    return Corruption(Str() << "brotli: " << BrotliDecoderErrorString(BrotliDecoderGetErrorCode(d)));
  }
  out->resize(out_pos);
  return Status::OK();
}

}  // namespace

bool codec_supported(int32_t codec) {
  return codec == kUncompressed || codec == kSnappy || codec == kGzip || codec == kZstd || codec == kLz4Raw ||
         codec == kLz4 || codec == kBrotli;
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
    case kLz4Raw:
      return unlz4_raw(src, n, expected, out);
    case kLz4:
      return unlz4_hadoop(src, n, expected, out);
    case kBrotli:
      s = unbrotli(src, n, expected, out);
      break;
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
