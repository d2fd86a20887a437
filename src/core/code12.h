// code12: lossless coding of bf16 weights in ~12 bits each, so a streamed base moves ~24% fewer
// bytes over the host link (and takes ~24% less host RAM) with the very bits of the bf16 weights.
//
// Note [code12]
// A bf16 value is sign (1 bit), exponent (8) and mantissa (7). In trained weights the mantissa
// and sign are close to uniform, but the exponent is not: nearly all weights of a linear fall in
// a dozen binades around its scale (a value half as large is about half as likely below it), so
// the 15 most common exponents of a tensor cover all but ~0.01% of its elements. code12 keeps
// the sign and mantissa as one byte and replaces the exponent with a 4-bit code into a per-tensor
// table of those 15 exponents; code 15 is an escape, whose element is stored whole in a sorted
// escape list. Fixed-size codes decode in parallel with no bit stream to walk (unlike Huffman,
// which would save ~1 bit more per weight): a GPU unpacks at memory speed.
//
// Note [code12 layout]
// A tensor of n elements is two byte arrays:
//   body  [n]                 element i: (bf16 >> 8 & 0x80) | (bf16 & 0x7F)
//   aux   [code12_aux_bytes(n)]
//     [0, 16)                 exponent table: byte c (c < 15) is code c's exponent; byte 15 is 0
//     [16, 20)                u32 escape count E (little-endian), E <= C
//     [20, 32)                zero
//     [32, 32 + ceil(n/2))    codes, two per byte, element 2j in the low nibble (an odd n pads 0)
//     at code12_idx_offset    u32 idx[C]: the escapes' element indices, strictly increasing
//     at code12_val_offset    u16 val[C]: their bf16 values
// with C = code12_capacity(n) = ceil(n / 256) escapes at most, so the size depends on n alone (a
// layer blob's layout must not depend on its data). A tensor with more escapes cannot be coded:
// the encoder says so and the caller stores the model uncoded.
// Decoding: bf16(i) = (body & 0x80) << 8 | table[code] << 7 | (body & 0x7F), or val[j] where
// idx[j] == i for code 15. Corrupt aux (E > C, idx out of order) cannot make a decoder read or
// write out of bounds: E is clamped to C and an escape not found decodes to 0.
#pragma once

#include <cstdint>
#include <string>

#include "core/status.h"

namespace st {

constexpr int kCode12Escape = 15;
// In the message of every refusal of code12_encode (callers that fall back to a dense base look for it).
constexpr const char* kCode12Refusal = "cannot be coded";
constexpr int64_t kCode12HeaderBytes = 32;
constexpr int64_t kCode12EscapeEvery = 256;  // capacity: one escape per this many elements

inline int64_t code12_capacity(int64_t n) { return (n + kCode12EscapeEvery - 1) / kCode12EscapeEvery; }
inline int64_t code12_idx_offset(int64_t n) { return kCode12HeaderBytes + ((n + 1) / 2 + 3) / 4 * 4; }
inline int64_t code12_val_offset(int64_t n) { return code12_idx_offset(n) + 4 * code12_capacity(n); }
inline int64_t code12_aux_bytes(int64_t n) { return (code12_val_offset(n) + 2 * code12_capacity(n) + 3) / 4 * 4; }

// Codes src[n] (bf16 bits) into body[n] and aux[code12_aux_bytes(n)] (both fully written). Fails
// (InvalidArgument naming `what`, the escape count and the capacity) when more than C elements
// fall outside the table; body and aux are then unspecified.
Status code12_encode(const uint16_t* src, int64_t n, uint8_t* body, uint8_t* aux, const std::string& what);

// The reference decoder: out[n] (bf16 bits) from body and aux (Note [code12 layout]).
void code12_decode(uint16_t* out, const uint8_t* body, const uint8_t* aux, int64_t n);

// The escape count stored in aux, clamped to the capacity (what every decoder uses).
int64_t code12_escapes(const uint8_t* aux, int64_t n);

// Element i's value when its code is the escape: a lower-bound search of i in idx[0, E) (the
// search every decoder runs, so corrupt aux decodes alike everywhere), 0 if i is not there.
uint16_t code12_escape_value(const uint8_t* aux, int64_t n, int64_t i);

}  // namespace st
