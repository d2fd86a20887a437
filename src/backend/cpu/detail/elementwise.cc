// Elementwise ops, embedding, dropout, AdamW and sum_squares. Each element is computed in f32
// from its own inputs only, so any parallel split gives the same bits.
#include <algorithm>
#include <cmath>
#include <cstring>

#include "backend/cpu/detail/kernels.h"
#include "backend/dropout_rng.h"
#include "core/code12.h"
#include "core/nf4.h"

namespace st::cpu {
namespace {

void check_same_numel(const Tensor& a, const Tensor& b, const char* op) {
  CHECK(a.numel() == b.numel(), op << ": numel mismatch " << shape_of(a) << " vs " << shape_of(b));
}

}  // namespace

void add_bias(Tensor y, Tensor bias) {
  check_float(y, "add_bias y");
  check_float(bias, "add_bias bias");
  const int64_t R = y.rows(), N = y.cols();
  CHECK(bias.numel() == N, "add_bias: bias " << shape_of(bias) << " vs y " << shape_of(y));
#pragma omp parallel for schedule(static)
  for (int64_t r = 0; r < R; ++r)
    for (int64_t i = 0; i < N; ++i)
      store_elem(y.data, y.dtype, r * N + i, load_elem(y.data, y.dtype, r * N + i) + load_elem(bias.data, bias.dtype, i));
}

void add(Tensor y, Tensor a, Tensor b) {
  check_float(y, "add y");
  check_float(a, "add a");
  check_float(b, "add b");
  check_same_numel(y, a, "add");
  check_same_numel(y, b, "add");
  const int64_t n = y.numel();
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < n; ++i)
    store_elem(y.data, y.dtype, i, load_elem(a.data, a.dtype, i) + load_elem(b.data, b.dtype, i));
}

void scale(Tensor y, Tensor x, float s) {
  check_float(y, "scale y");
  check_float(x, "scale x");
  check_same_numel(y, x, "scale");
  const int64_t n = y.numel();
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < n; ++i) store_elem(y.data, y.dtype, i, load_elem(x.data, x.dtype, i) * s);
}

void convert(Tensor dst, Tensor src) {
  check_same_numel(dst, src, "convert");
  if (dst.dtype == src.dtype) {
    if (dst.data != src.data && dst.numel() > 0) std::memcpy(dst.data, src.data, dst.bytes());
    return;
  }
  check_float(dst, "convert dst");
  check_float(src, "convert src");
  convert_elements(dst.data, dst.dtype, src.data, src.dtype, static_cast<size_t>(dst.numel()));
}

void embedding(Tensor out, Tensor table, const int32_t* ids) {
  check_float(out, "embedding out");
  check_float(table, "embedding table");
  const int64_t T = out.rows(), H = out.cols(), V = table.rows();
  CHECK(table.cols() == H, "embedding: table " << shape_of(table) << " vs out " << shape_of(out));
#pragma omp parallel for schedule(static)
  for (int64_t t = 0; t < T; ++t) {
    const int64_t id = ids[t];
    DCHECK(id >= 0 && id < V, "embedding id " << id);
    (void)V;
    for (int64_t i = 0; i < H; ++i)
      store_elem(out.data, out.dtype, t * H + i, load_elem(table.data, table.dtype, id * H + i));
  }
}

void dequant_nf4(Tensor w, Tensor codes, Tensor absmax) {
  check_float(w, "dequant_nf4 w");
  const int64_t n = w.numel();
  CHECK(codes.dtype == DType::kU8 && absmax.dtype == DType::kF32 && n % kNf4Block == 0 &&
            codes.numel() * 2 == n && absmax.numel() * kNf4Block == n,
        "dequant_nf4: w " << shape_of(w) << " codes " << shape_of(codes) << " absmax " << shape_of(absmax));
  const auto* c = static_cast<const uint8_t*>(codes.data);
  const auto* a = static_cast<const float*>(absmax.data);
  const size_t es = dtype_size(w.dtype);
#pragma omp parallel for schedule(static)
  for (int64_t b = 0; b < n / kNf4Block; ++b)
    nf4_dequantize(static_cast<char*>(w.data) + b * kNf4Block * es, w.dtype, c + b * kNf4Block / 2, a + b, kNf4Block);
}

// One reference decode (core/code12.h) of the whole tensor: its escapes are in element order.
void decode_code12(Tensor w, Tensor body, Tensor aux) {
  const int64_t n = w.numel();
  CHECK(w.dtype == DType::kBF16 && body.dtype == DType::kU8 && aux.dtype == DType::kU8 && body.numel() == n &&
            aux.numel() == code12_aux_bytes(n),
        "decode_code12: w " << shape_of(w) << " body " << shape_of(body) << " aux " << shape_of(aux));
  code12_decode(static_cast<uint16_t*>(w.data), static_cast<const uint8_t*>(body.data),
                static_cast<const uint8_t*>(aux.data), n);
}

void swiglu(Tensor h, Tensor gate, Tensor up) {
  check_float(h, "swiglu h");
  check_float(gate, "swiglu gate");
  check_float(up, "swiglu up");
  check_same_numel(h, gate, "swiglu");
  check_same_numel(h, up, "swiglu");
  const int64_t n = h.numel();
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < n; ++i) {
    const float g = load_elem(gate.data, gate.dtype, i), u = load_elem(up.data, up.dtype, i);
    store_elem(h.data, h.dtype, i, g / (1.0f + std::exp(-g)) * u);
  }
}

void swiglu_backward(Tensor dgate, Tensor dup, Tensor dh, Tensor gate, Tensor up) {
  for (const Tensor* t : {&dgate, &dup, &dh, &gate, &up}) {
    check_float(*t, "swiglu_backward");
    check_same_numel(*t, dh, "swiglu_backward");
  }
  const int64_t n = dh.numel();
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < n; ++i) {
    const float g = load_elem(gate.data, gate.dtype, i), u = load_elem(up.data, up.dtype, i);
    const float d = load_elem(dh.data, dh.dtype, i);
    const float sig = 1.0f / (1.0f + std::exp(-g));
    const float silu = g * sig;
    // d silu/dg = sig + g*sig*(1-sig) = sig * (1 + g*(1-sig))
    store_elem(dgate.data, dgate.dtype, i, d * u * (sig * (1.0f + g * (1.0f - sig))));
    store_elem(dup.data, dup.dtype, i, d * silu);
  }
}

void dropout(Tensor y, Tensor x, float p, uint64_t seed) {
  check_float(y, "dropout y");
  check_float(x, "dropout x");
  check_same_numel(y, x, "dropout");
  const int64_t n = y.numel();
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < n; ++i)
    store_elem(y.data, y.dtype, i, dropout_apply(seed, static_cast<uint64_t>(i), p, load_elem(x.data, x.dtype, i)));
}

void add_uniform_noise(Tensor x, float magnitude, uint64_t seed) {
  check_float(x, "add_uniform_noise x");
  const int64_t n = x.numel();
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < n; ++i) {
    volatile float noise = uniform_noise_unit(seed, static_cast<uint64_t>(i)) * magnitude;  // rounded: no fma
    store_elem(x.data, x.dtype, i, load_elem(x.data, x.dtype, i) + noise);
  }
}

// Mirrors torch.optim.AdamW's _single_tensor_adamw on f32 CPU tensors, operation by operation:
// scalars are formed in double (Python floats) and cast to f32 when they meet a tensor; lerp_
// follows ATen's vectorised fmadd form; addcmul/addcdiv evaluate (value*t1)*t2 and (value*t1)/t2.
void adamw(Tensor param, Tensor grad, Tensor m, Tensor v, const Backend::AdamW& h) {
  for (const Tensor* t : {&param, &grad, &m, &v}) {
    CHECK(t->dtype == DType::kF32, "adamw: f32 tensors expected");
    check_same_numel(*t, param, "adamw");
  }
  CHECK(h.step >= 1, "adamw: step " << h.step);
  const double lr = h.lr, b1 = h.beta1, b2 = h.beta2;
  const float decay = static_cast<float>(1.0 - lr * static_cast<double>(h.weight_decay));
  const float w1 = static_cast<float>(1.0 - b1);  // lerp weight
  const bool w1_small = std::fabs(w1) < 0.5f;
  const float b2f = static_cast<float>(b2), one_minus_b2 = static_cast<float>(1.0 - b2);
  const double bc1 = 1.0 - std::pow(b1, static_cast<double>(h.step));
  const double bc2 = 1.0 - std::pow(b2, static_cast<double>(h.step));
  const float neg_step_size = static_cast<float>(-(lr / bc1));
  const float bc2_sqrt = static_cast<float>(std::sqrt(bc2));
  const float eps = h.eps;
  float* P = param.ptr<float>();
  const float* G = grad.ptr<const float>();
  float* Mv = m.ptr<float>();
  float* Vv = v.ptr<float>();
  const int64_t n = param.numel();
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < n; ++i) {
    const float g = G[i];
    float p = P[i];
    if (h.weight_decay != 0.0f) p = p * decay;
    const float mi = Mv[i];
    const float mnew = w1_small ? std::fma(w1, g - mi, mi) : std::fma(w1 - 1.0f, g - mi, g);
    float vi = Vv[i] * b2f;
    vi = vi + one_minus_b2 * g * g;
    const float denom = std::sqrt(vi) / bc2_sqrt + eps;
    p = p + neg_step_size * mnew / denom;
    P[i] = p;
    Mv[i] = mnew;
    Vv[i] = vi;
  }
}

// Fixed chunking (independent of the thread count): chunk partials in double, summed in order.
void sum_squares(Tensor out, Tensor x) {
  CHECK(out.dtype == DType::kF32 && out.numel() >= 1, "sum_squares: out must be f32 [1]");
  check_float(x, "sum_squares x");
  constexpr int64_t kChunk = 1 << 14;
  const int64_t n = x.numel(), chunks = (n + kChunk - 1) / kChunk;
  std::vector<double> part(static_cast<size_t>(chunks), 0.0);
#pragma omp parallel for schedule(static)
  for (int64_t c = 0; c < chunks; ++c) {
    double s = 0.0;
    const int64_t end = std::min(n, (c + 1) * kChunk);
    for (int64_t i = c * kChunk; i < end; ++i) {
      const double e = load_elem(x.data, x.dtype, i);
      s += e * e;
    }
    part[static_cast<size_t>(c)] = s;
  }
  double total = 0.0;
  for (double s : part) total += s;
  out.ptr<float>()[0] += static_cast<float>(total);
}

}  // namespace st::cpu
