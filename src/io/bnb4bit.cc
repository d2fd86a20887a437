#include "io/bnb4bit.h"

#include <cstring>

#include "core/json.h"

namespace st {
namespace {

constexpr const char* kStatePrefix = ".quant_state.bitsandbytes__";
const char* const kAuxSuffixes[] = {".absmax", ".quant_map", ".nested_absmax", ".nested_quant_map"};

// The quant_state tensor of `name`, or "" when there is none.
std::string state_name(const Checkpoint& ck, const std::string& name) {
  for (const char* t : {"nf4", "fp4"}) {
    const std::string s = name + kStatePrefix + t;
    if (ck.has(s)) return s;
  }
  return "";
}

// A tensor's raw bytes (any dtype) with its expected element count and dtype checked.
StatusOr<const uint8_t*> raw(const Checkpoint& ck, const std::string& name, DType want, int64_t numel) {
  ASSIGN_OR_RETURN(auto f, ck.find(name));
  const auto [file, t] = f;
  if (t->dtype != want || t->numel() != numel)
    return Corruption(Str() << file->path() << ": bitsandbytes tensor '" << name << "' is " << dtype_name(t->dtype)
                            << " with " << t->numel() << " elements, expected " << dtype_name(want) << " with "
                            << numel);
  return file->data(*t);
}

StatusOr<std::vector<float>> f32_tensor(const Checkpoint& ck, const std::string& name, int64_t numel) {
  ASSIGN_OR_RETURN(const uint8_t* p, raw(ck, name, DType::kF32, numel));
  std::vector<float> v(static_cast<size_t>(numel));
  std::memcpy(v.data(), p, v.size() * sizeof(float));  // the data may be misaligned
  return v;
}

}  // namespace

int64_t Bnb4bitState::numel() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

bool is_bnb4bit(const Checkpoint& ck, const std::string& name) { return !state_name(ck, name).empty(); }

bool is_bnb4bit_aux(const Checkpoint& ck, const std::string& name) {
  const size_t q = name.find(kStatePrefix);
  if (q != std::string::npos) return true;
  for (const char* suf : kAuxSuffixes) {
    const size_t n = std::strlen(suf);
    if (name.size() > n && name.compare(name.size() - n, n, suf) == 0 && is_bnb4bit(ck, name.substr(0, name.size() - n)))
      return true;
  }
  return false;
}

StatusOr<Bnb4bitState> read_bnb4bit_state(const Checkpoint& ck, const std::string& name) {
  const std::string sn = state_name(ck, name);
  if (sn.empty()) return NotFound(Str() << "tensor '" << name << "' has no bitsandbytes quant_state");
  ASSIGN_OR_RETURN(auto f, ck.find(sn));
  const auto [file, t] = f;
  const std::string what = file->path() + ": " + sn;
  if (t->dtype != DType::kU8) return Corruption(what + ": expected U8 JSON bytes, got " + dtype_name(t->dtype));
  const char* bytes = reinterpret_cast<const char*>(file->data(*t));
  ASSIGN_OR_RETURN(Json j, parse_json(std::string_view(bytes, t->nbytes), what));
  Bnb4bitState s;
  ASSIGN_OR_RETURN(s.quant_type, json_string(j, "quant_type", what));
  if (s.quant_type != "nf4")
    return Unimplemented(Str() << what << ": quant_type '" << s.quant_type << "' is not supported (nf4)");
  ASSIGN_OR_RETURN(s.blocksize, json_int(j, "blocksize", what));
  bool valid_block = false;
  for (int64_t b = 32; b <= 4096; b *= 2) valid_block = valid_block || s.blocksize == b;
  if (!valid_block) return Corruption(Str() << what << ": blocksize " << s.blocksize << " (expected 32 ... 4096)");
  ASSIGN_OR_RETURN(std::string dt, json_string(j, "dtype", what));
  ASSIGN_OR_RETURN(s.dtype, dtype_from_user(dt), what << ": dtype");
  if (!j.contains("shape") || !j["shape"].is_array() || j["shape"].empty() || j["shape"].size() > 8)
    return Corruption(what + ": 'shape' must be a non-empty array");
  int64_t n = 1;
  for (const Json& d : j["shape"]) {
    if (!d.is_number_integer() || d.get<int64_t>() <= 0 || d.get<int64_t>() > (int64_t{1} << 40))
      return Corruption(what + ": 'shape' must hold positive integers");
    s.shape.push_back(d.get<int64_t>());
    if (n > (int64_t{1} << 40) / s.shape.back()) return Corruption(what + ": 'shape' is too large");  // no overflow
    n *= s.shape.back();
  }
  s.nested = j.contains("nested_blocksize") || j.contains("nested_offset");
  if (s.nested) {
    ASSIGN_OR_RETURN(s.nested_blocksize, json_int(j, "nested_blocksize", what));
    if (s.nested_blocksize <= 0 || s.nested_blocksize > 4096)
      return Corruption(Str() << what << ": nested_blocksize " << s.nested_blocksize);
    ASSIGN_OR_RETURN(double off, json_number(j, "nested_offset", what));
    s.nested_offset = static_cast<float>(off);
  }
  return s;
}

Status dequantize_bnb4bit(const Checkpoint& ck, const std::string& name, const Bnb4bitState& s,
                          std::vector<float>* out) {
  const int64_t n = s.numel(), nblocks = (n + s.blocksize - 1) / s.blocksize;
  ASSIGN_OR_RETURN(auto wf, ck.find(name));
  const auto [file, wt] = wf;
  // quant_storage may be any dtype: the bytes are the packed codes.
  if (static_cast<int64_t>(wt->nbytes) != (n + 1) / 2)
    return Corruption(Str() << file->path() << ": bitsandbytes weight '" << name << "' has " << wt->nbytes
                            << " bytes, its quant_state shape needs " << (n + 1) / 2);
  const uint8_t* codes = file->data(*wt);
  ASSIGN_OR_RETURN(std::vector<float> code, f32_tensor(ck, name + ".quant_map", 16));
  std::vector<float> absmax;
  if (!s.nested) {
    ASSIGN_OR_RETURN(absmax, f32_tensor(ck, name + ".absmax", nblocks));
  } else {
    const int64_t nb2 = (nblocks + s.nested_blocksize - 1) / s.nested_blocksize;
    ASSIGN_OR_RETURN(const uint8_t* q, raw(ck, name + ".absmax", DType::kU8, nblocks));
    ASSIGN_OR_RETURN(std::vector<float> absmax2, f32_tensor(ck, name + ".nested_absmax", nb2));
    ASSIGN_OR_RETURN(std::vector<float> code2, f32_tensor(ck, name + ".nested_quant_map", 256));
    absmax.resize(static_cast<size_t>(nblocks));
    for (int64_t i = 0; i < nblocks; ++i) {
      // Two roundings, as bnb's two kernels do (the build targets baseline x86-64: no FMA to fuse into).
      const float scaled = code2[q[i]] * absmax2[i / s.nested_blocksize];
      absmax[i] = scaled + s.nested_offset;
    }
  }
  out->resize(static_cast<size_t>(n));
  for (int64_t e = 0; e < n; ++e) {
    const uint8_t byte = codes[e / 2];
    const uint8_t idx = (e % 2 == 0) ? (byte >> 4) : (byte & 0xF);
    (*out)[e] = code[idx] * absmax[e / s.blocksize];
  }
  return Status::OK();
}

}  // namespace st
