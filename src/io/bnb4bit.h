// bitsandbytes 4-bit weights in a safetensors checkpoint (formats.md §5.3-5.4): the layout
// transformers writes for `load_in_4bit` models (e.g. the "-bnb-4bit" checkpoints on the Hub).
// For a Linear weight P.weight the checkpoint holds
//   P.weight                                   packed codes, U8 (or any dtype: read as bytes) [ceil(n/2), 1]
//   P.weight.absmax                            F32 [nblocks], or U8 [nblocks] when nested
//   P.weight.quant_map                         F32 [16], the code table
//   P.weight.nested_absmax / nested_quant_map  F32 [ceil(nblocks/256)] / F32 [256] (nested only)
//   P.weight.quant_state.bitsandbytes__nf4     U8, the JSON of quant_type, blocksize, dtype, shape
//                                              (+ nested_blocksize, nested_dtype, nested_offset)
// Reading dequantizes in bnb's own arithmetic, all in f32: a nested scale is restored as
// (nested_quant_map[q] * nested_absmax[i / nested_blocksize]) + nested_offset, then each weight is
// quant_map[nibble] * absmax[e / blocksize] (element 2k in the high nibble). Only NF4 is read;
// FP4 is refused by name. Every size is checked against the JSON: errors name the file and tensor.
#pragma once

#include <string>
#include <vector>

#include "io/safetensors.h"

namespace st {

struct Bnb4bitState {
  std::string quant_type;      // "nf4"
  int64_t blocksize = 64;
  std::vector<int64_t> shape;  // the weight's logical shape, e.g. [out, in]
  DType dtype = DType::kBF16;  // the dtype the weight was quantized from
  bool nested = false;
  int64_t nested_blocksize = 256;
  float nested_offset = 0.0f;
  int64_t numel() const;
};

// Whether `name` is a bnb 4-bit weight of `ck` (a "<name>.quant_state.bitsandbytes__*" exists).
bool is_bnb4bit(const Checkpoint& ck, const std::string& name);
// Whether `name` is one of the auxiliary tensors of a bnb 4-bit weight (absmax, quant_map, ...).
bool is_bnb4bit_aux(const Checkpoint& ck, const std::string& name);
// The parsed and checked quant_state of `name`.
StatusOr<Bnb4bitState> read_bnb4bit_state(const Checkpoint& ck, const std::string& name);
// `name` (whose quant_state read_bnb4bit_state gave `s`) dequantized into out[s.numel()] (f32).
Status dequantize_bnb4bit(const Checkpoint& ck, const std::string& name, const Bnb4bitState& s,
                          std::vector<float>* out);

}  // namespace st
