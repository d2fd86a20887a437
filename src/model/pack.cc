#include "model/pack.h"

#include <cstring>

namespace st {

std::string layer_tensor_name(int layer, const LayerTensorSpec& s) {
  return Str() << "model.layers." << layer << "." << s.hf_suffix;
}

Status pack_layer(const Checkpoint& ck, const LayerLayout& layout, int layer, void* host_blob) {
  std::memset(host_blob, 0, layout.bytes);
  for (const auto& s : layout.tensors) {
    const std::string name = layer_tensor_name(layer, s);
    RETURN_IF_ERROR(read_tensor_as(ck, name, s.shape, layout.dtype, static_cast<char*>(host_blob) + s.offset),
                    "packing layer " << layer);
  }
  return Status::OK();
}

Status pack_extras(const Checkpoint& ck, const ExtrasLayout& layout, void* host_blob) {
  std::memset(host_blob, 0, layout.bytes);
  for (const auto& s : layout.tensors) {
    RETURN_IF_ERROR(read_tensor_as(ck, s.hf_suffix, s.shape, layout.dtype, static_cast<char*>(host_blob) + s.offset),
                    "packing embedding/norm/lm_head");
  }
  return Status::OK();
}

}  // namespace st
