// Filling host weight blobs (model/weights.h layouts) from an HF checkpoint directory.
//
// The blob is zeroed first (padding between tensors is deterministic, so blobs of the same model
// are byte-identical wherever they are made), then each tensor is read with dtype conversion to
// the layout's dtype. Errors name the missing tensor or the shape mismatch and the checkpoint.
#pragma once

#include <functional>

#include "io/safetensors.h"
#include "model/weights.h"

namespace st {

// Reads tensor `name` (shape checked against `shape`) converted to `dtype` into host `dst`.
using TensorReader =
    std::function<Status(const std::string& name, const std::vector<int64_t>& shape, DType dtype, void* dst)>;

// The one packer behind pack_layer / pack_layer_from: zeroes the blob, reads every tensor in its
// spec's dtype, and quantizes NF4 linears (Note [NF4 base layout]) from their f32 values -- a
// NaN/inf weight is refused naming the tensor and element -- or codes code12 linears (Note
// [code12 base layout]) from their bf16 values, refusing a tensor code12 cannot hold.
Status pack_layer_with(const TensorReader& read, const LayerLayout& layout, int layer, void* host_blob);

// Note [finite base weights]: every base tensor is scanned as it is packed (the store's sharding
// and the resident load), and a NaN or infinity is refused naming the tensor and element: such a
// weight makes every loss NaN, and the trainer's "loss is not finite" would point at the learning
// rate, not at the damaged file. The scan runs at memory speed beside the disk read; a built store
// is checksummed, so it is not scanned again.
Status check_finite_weight(const std::string& name, const std::vector<int64_t>& shape, DType dt, const void* data);

// Full HF name of a layer tensor: "model.layers.<layer>.<hf_suffix>".
std::string layer_tensor_name(int layer, const LayerTensorSpec& s);

// host_blob: layout.bytes of host memory owned by the caller.
Status pack_layer(const Checkpoint& ck, const LayerLayout& layout, int layer, void* host_blob);
Status pack_extras(const Checkpoint& ck, const ExtrasLayout& layout, void* host_blob);

}  // namespace st
