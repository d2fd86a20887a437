// Page decompression for the Parquet codecs we link (snappy, zstd, lz4 and brotli statically, zlib
// from the system), and whole-stream gzip for .gz dataset files.
//
// Output buffers grow with the bytes a stream really produces (never to a size the input only
// claims): a hostile "2 GiB" header over a few bytes of input allocates a few bytes and fails.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "core/status.h"

namespace st::parquet {

// True for the codecs decompress() handles: UNCOMPRESSED, SNAPPY, GZIP, ZSTD, LZ4_RAW, LZ4
// (Hadoop-framed or one bare block) and BROTLI; not LZO.
bool codec_supported(int32_t codec);

// Decompresses one page body [src, src + n) with `codec` into *out, which must come out exactly
// `expected` bytes long (the page header's uncompressed size). Errors are Corruption, without
// context (the caller names the file, column and page).
Status decompress(int32_t codec, const uint8_t* src, size_t n, size_t expected, std::string* out);

// Inflates a gzip stream of one or more members (RFC 1952; zlib streams are accepted too) into
// *out, failing with InvalidArgument once it would exceed max_bytes, and with Corruption on a
// damaged or truncated stream (the message says how many bytes came out before the damage).
Status gunzip(std::string_view src, size_t max_bytes, std::string* out);

}  // namespace st::parquet
