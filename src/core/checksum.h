// A fast 64-bit checksum for detecting damaged files we wrote ourselves (the layer store): not
// cryptographic, but every step is a bijection of the lane state, so any change confined to one
// 8-byte word always changes the result, and wider damage goes unnoticed with probability ~2^-64.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace st {

uint64_t checksum64(const void* data, size_t bytes);
std::string checksum_hex(uint64_t v);  // 16 lower-case hex digits

}  // namespace st
