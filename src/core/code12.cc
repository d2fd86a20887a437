#include "core/code12.h"

#include <algorithm>
#include <array>
#include <climits>
#include <cstdint>
#include <cstring>
#include <thread>
#include <vector>

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

// Runs fn(chunk, lo, hi) over `chunks` even-aligned slices of [0, n) on as many threads (a code
// byte holds two elements, so no two chunks share one).
template <typename Fn>
void for_chunks(int64_t n, int chunks, Fn fn) {
  const int64_t step = ((n + chunks - 1) / chunks + 1) / 2 * 2;
  std::vector<std::thread> pool;
  for (int c = 1; c < chunks; ++c)
    pool.emplace_back([&, c] { fn(c, std::min(n, c * step), std::min(n, (c + 1) * step)); });
  fn(0, 0, std::min(n, step));
  for (std::thread& t : pool) t.join();
}

Status code12_encode(const uint16_t* src, int64_t n, uint8_t* body, uint8_t* aux, const std::string& what) {
  if (n > static_cast<int64_t>(UINT32_MAX))
    return InvalidArgument(Str() << what << ": " << n << " elements; code12 indexes at most 2^32 - 1 in a tensor");
  // Big tensors on several threads (a 7B model's linears code in seconds, not tens of them); the
  // bytes are the same for any thread count: the escapes are written at their prefix offsets.
  const int chunks = n < (int64_t{1} << 22)
                         ? 1
                         : static_cast<int>(std::clamp<unsigned>(std::thread::hardware_concurrency(), 1, 16));
  std::vector<std::array<int64_t, 256>> hist(static_cast<size_t>(chunks));
  for_chunks(n, chunks, [&](int c, int64_t lo, int64_t hi) {
    std::array<int64_t, 256>& h = hist[static_cast<size_t>(c)];
    h.fill(0);
    for (int64_t i = lo; i < hi; ++i) ++h[(src[i] >> 7) & 0xFF];
  });
  std::array<int64_t, 256> count{};
  for (const auto& h : hist)
    for (int e = 0; e < 256; ++e) count[e] += h[e];
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
  // Each chunk's first escape slot: the escapes of the chunks before it.
  std::vector<int64_t> first(static_cast<size_t>(chunks) + 1, 0);
  for (int c = 0; c < chunks; ++c)
    for (int e = 0; e < 256; ++e)
      if (code_of[e] == kCode12Escape) first[static_cast<size_t>(c) + 1] += hist[static_cast<size_t>(c)][e];
  for (int c = 0; c < chunks; ++c) first[static_cast<size_t>(c) + 1] += first[static_cast<size_t>(c)];
  uint8_t* codes = aux + kCode12HeaderBytes;
  uint8_t* idx = aux + code12_idx_offset(n);
  uint8_t* val = aux + code12_val_offset(n);
  for_chunks(n, chunks, [&](int c, int64_t lo, int64_t hi) {
    int64_t j = first[static_cast<size_t>(c)];
    for (int64_t i = lo; i < hi; ++i) {
      const uint16_t v = src[i];
      body[i] = static_cast<uint8_t>(((v >> 8) & 0x80) | (v & 0x7F));
      const uint8_t code = code_of[(v >> 7) & 0xFF];
      codes[i / 2] |= static_cast<uint8_t>(i % 2 == 0 ? code : code << 4);
      if (code == kCode12Escape) {
        const uint32_t i32 = static_cast<uint32_t>(i);
        std::memcpy(idx + 4 * j, &i32, 4);
        std::memcpy(val + 2 * j, &v, 2);
        ++j;
      }
    }
  });
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
