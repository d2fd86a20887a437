// Filling host weight blobs (model/weights.h layouts) from an HF checkpoint directory.
//
// The blob is zeroed first (padding between tensors is deterministic, so blobs of the same model
// are byte-identical wherever they are made), then each tensor is read with dtype conversion to
// the layout's dtype. Errors name the missing tensor or the shape mismatch and the checkpoint.
#pragma once

#include "io/safetensors.h"
#include "model/weights.h"

namespace st {

// Full HF name of a layer tensor: "model.layers.<layer>.<hf_suffix>".
std::string layer_tensor_name(int layer, const LayerTensorSpec& s);

// host_blob: layout.bytes of host memory owned by the caller.
Status pack_layer(const Checkpoint& ck, const LayerLayout& layout, int layer, void* host_blob);
Status pack_extras(const Checkpoint& ck, const ExtrasLayout& layout, void* host_blob);

}  // namespace st
