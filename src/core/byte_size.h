// Byte sizes as users write them ("4GiB", "512MB", "1.5 GB", "123") and as we print them.
#pragma once

#include <cstdint>
#include <string>

#include "core/status.h"

namespace st {

// Units are case-insensitive: B, KB/MB/GB/TB = powers of 1000, KiB/MiB/GiB/TiB (and K/M/G/T) = 1024.
StatusOr<uint64_t> parse_byte_size(const std::string& s);
std::string format_bytes(uint64_t b);  // "3.50 GiB"

}  // namespace st
