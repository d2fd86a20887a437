#include "model/pack.h"

#include <cstring>
#include <vector>

#include "core/check.h"
#include "core/code12.h"
#include "core/nf4.h"

namespace st {

std::string layer_tensor_name(int layer, const LayerTensorSpec& s) {
  return Str() << "model.layers." << layer << "." << s.hf_suffix;
}

Status check_finite_weight(const std::string& name, const std::vector<int64_t>& shape, DType dt, const void* data) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  const int64_t bad = first_nonfinite(data, dt, static_cast<size_t>(n));
  if (bad < 0) return Status::OK();
  float v = 0;
  convert_elements(&v, DType::kF32, static_cast<const char*>(data) + bad * static_cast<int64_t>(dtype_size(dt)), dt, 1);
  const std::string where =
      shape.size() == 2 ? std::string(Str() << " (row " << bad / shape[1] << ", column " << bad % shape[1] << ")") : "";
  return InvalidArgument(Str() << name << ": element " << bad << where << " is " << v
                               << "; a non-finite base weight makes every loss NaN (the model file is damaged)");
}

Status pack_layer_with(const TensorReader& read, const LayerLayout& layout, int layer, void* host_blob) {
  std::memset(host_blob, 0, layout.bytes);
  char* blob = static_cast<char*>(host_blob);
  std::vector<float> staged;
  std::vector<uint16_t> bf16_staged;
  for (size_t i = 0; i < layout.tensors.size(); ++i) {
    const LayerTensorSpec& s = layout.tensors[i];
    const std::string name = layer_tensor_name(layer, s);
    if (!s.quantized()) {
      RETURN_IF_ERROR(read(name, s.shape, s.dtype, blob + s.offset));
      RETURN_IF_ERROR(check_finite_weight(name, s.shape, s.dtype, blob + s.offset));
      continue;
    }
    const int64_t n = s.quantized_shape[0] * s.quantized_shape[1];
    if (layout.quant == BaseQuant::kCode12) {
      // code12: the body's spec is followed by its codes' (make_layer_layout); lossless from bf16.
      CHECK(i + 1 < layout.tensors.size() && layout.tensors[i + 1].dtype == DType::kU8);
      const LayerTensorSpec& aux = layout.tensors[++i];
      bf16_staged.resize(static_cast<size_t>(n));
      RETURN_IF_ERROR(read(name, s.quantized_shape, DType::kBF16, bf16_staged.data()));
      RETURN_IF_ERROR(check_finite_weight(name, s.quantized_shape, DType::kBF16, bf16_staged.data()));
      RETURN_IF_ERROR(code12_encode(bf16_staged.data(), n, reinterpret_cast<uint8_t*>(blob + s.offset),
                                    reinterpret_cast<uint8_t*>(blob + aux.offset), name));
      continue;
    }
    // NF4: the codes' spec is followed by its scales' (make_layer_layout).
    CHECK(i + 1 < layout.tensors.size() && layout.tensors[i + 1].dtype == DType::kF32);
    const LayerTensorSpec& scales = layout.tensors[++i];
    staged.resize(static_cast<size_t>(n));
    RETURN_IF_ERROR(read(name, s.quantized_shape, DType::kF32, staged.data()));
    const int64_t bad = nf4_first_nonfinite(staged.data(), n);
    if (bad >= 0)
      return InvalidArgument(Str() << name << ": element " << bad << " (row " << bad / s.quantized_shape[1]
                                   << ", column " << bad % s.quantized_shape[1] << ") is " << staged[bad]
                                   << "; a non-finite weight cannot be NF4-quantized");
    nf4_quantize(staged.data(), n, reinterpret_cast<uint8_t*>(blob + s.offset),
                 reinterpret_cast<float*>(blob + scales.offset));
  }
  return Status::OK();
}

Status pack_layer(const Checkpoint& ck, const LayerLayout& layout, int layer, void* host_blob) {
  RETURN_IF_ERROR(pack_layer_with(
                      [&](const std::string& name, const std::vector<int64_t>& shape, DType dt, void* dst) {
                        return read_tensor_as(ck, name, shape, dt, dst);
                      },
                      layout, layer, host_blob),
                  "packing layer " << layer);
  return Status::OK();
}

Status pack_extras(const Checkpoint& ck, const ExtrasLayout& layout, void* host_blob) {
  std::memset(host_blob, 0, layout.bytes);
  for (const auto& s : layout.tensors) {
    char* dst = static_cast<char*>(host_blob) + s.offset;
    RETURN_IF_ERROR(read_tensor_as(ck, s.hf_suffix, s.shape, layout.dtype, dst), "packing embedding/norm/lm_head");
    RETURN_IF_ERROR(check_finite_weight(s.hf_suffix, s.shape, layout.dtype, dst), "packing embedding/norm/lm_head");
  }
  return Status::OK();
}

}  // namespace st
