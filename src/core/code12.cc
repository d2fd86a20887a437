#include "core/code12.h"

#include <algorithm>
#include <array>
#include <cstring>

namespace st {
namespace {

uint32_t load_u32(const uint8_t* p) {
  uint32_t v;
  std::memcpy(&v, p, 4);
  return v;
}

}  // namespace

int64_t code12_escapes(const uint8_t* aux, int64_t n) {
  return std::min<int64_t>(load_u32(aux + 16), code12_capacity(n));
}

Status code12_encode(const uint16_t* src, int64_t n, uint8_t* body, uint8_t* aux, const std::string& what) {
  std::array<int64_t, 256> count{};
  for (int64_t i = 0; i < n; ++i) ++count[(src[i] >> 7) & 0xFF];
  // The 15 most common exponents (ties: the smaller exponent first, so the table is a function
  // of the data alone).
  std::array<int, 256> order;
  for (int e = 0; e < 256; ++e) order[e] = e;
  std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return count[a] > count[b]; });
  std::array<uint8_t, 256> code_of;
  code_of.fill(kCode12Escape);
  std::memset(aux, 0, static_cast<size_t>(code12_aux_bytes(n)));
  for (int c = 0; c < kCode12Escape && count[order[c]] > 0; ++c) {
    code_of[order[c]] = static_cast<uint8_t>(c);
    aux[c] = static_cast<uint8_t>(order[c]);
  }
  int64_t escapes = 0;
  for (int e = 0; e < 256; ++e)
    if (code_of[e] == kCode12Escape) escapes += count[e];
  const int64_t cap = code12_capacity(n);
  if (escapes > cap)
    return InvalidArgument(Str() << what << ": " << escapes << " of " << n
                                 << " weights have exponents outside the 15 most common ones; code12 holds at most "
                                 << cap << " (one in " << kCode12EscapeEvery << "), so this tensor " << kCode12Refusal);
  const uint32_t e32 = static_cast<uint32_t>(escapes);
  std::memcpy(aux + 16, &e32, 4);
  uint8_t* codes = aux + kCode12HeaderBytes;
  uint8_t* idx = aux + code12_idx_offset(n);
  uint8_t* val = aux + code12_val_offset(n);
  int64_t j = 0;
  for (int64_t i = 0; i < n; ++i) {
    const uint16_t v = src[i];
    body[i] = static_cast<uint8_t>(((v >> 8) & 0x80) | (v & 0x7F));
    const uint8_t c = code_of[(v >> 7) & 0xFF];
    codes[i / 2] |= static_cast<uint8_t>(i % 2 == 0 ? c : c << 4);
    if (c == kCode12Escape) {
      const uint32_t i32 = static_cast<uint32_t>(i);
      std::memcpy(idx + 4 * j, &i32, 4);
      std::memcpy(val + 2 * j, &v, 2);
      ++j;
    }
  }
  return Status::OK();
}

uint16_t code12_escape_value(const uint8_t* aux, int64_t n, int64_t i) {
  const uint8_t* idx = aux + code12_idx_offset(n);
  int64_t lo = 0, hi = code12_escapes(aux, n);  // lower bound of i in idx[0, E)
  while (lo < hi) {
    const int64_t mid = (lo + hi) / 2;
    if (load_u32(idx + 4 * mid) < static_cast<uint64_t>(i)) lo = mid + 1;
    else hi = mid;
  }
  uint16_t v = 0;
  if (lo < code12_escapes(aux, n) && load_u32(idx + 4 * lo) == static_cast<uint64_t>(i))
    std::memcpy(&v, aux + code12_val_offset(n) + 2 * lo, 2);
  return v;
}

void code12_decode(uint16_t* out, const uint8_t* body, const uint8_t* aux, int64_t n) {
  const uint8_t* codes = aux + kCode12HeaderBytes;
  for (int64_t i = 0; i < n; ++i) {
    const int c = (codes[i / 2] >> (i % 2 == 0 ? 0 : 4)) & 0xF;
    out[i] = c == kCode12Escape ? code12_escape_value(aux, n, i)
                                : static_cast<uint16_t>(((body[i] & 0x80) << 8) | (aux[c] << 7) | (body[i] & 0x7F));
  }
}

}  // namespace st
