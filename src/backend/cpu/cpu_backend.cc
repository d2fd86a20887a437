// CpuBackend: memory is plain 64-byte aligned host memory, "streams" run each call to
// completion before returning (so every event is complete as soon as it is recorded), and the
// ops are the reference implementations in detail/.
#include "backend/cpu/cpu_backend.h"

#include <omp.h>

#include <cstdlib>
#include <cstring>

#include "backend/cpu/detail/kernels.h"

namespace st {
namespace {

constexpr size_t kAlign = 64;

StatusOr<void*> aligned_bytes(size_t bytes) {
  // aligned_alloc wants a multiple of the alignment; 0 bytes still gets a unique pointer.
  size_t rounded = bytes == 0 ? kAlign : (bytes + kAlign - 1) / kAlign * kAlign;
  if (rounded < bytes) return ResourceExhausted(Str() << "cpu alloc of " << bytes << " bytes overflows");
  void* p = std::aligned_alloc(kAlign, rounded);
  if (p == nullptr) return ResourceExhausted(Str() << "cpu alloc of " << bytes << " bytes failed");
  return p;
}

class CpuEvent : public Event {};

class CpuBackend : public Backend {
 public:
  explicit CpuBackend(const BackendOptions& opts) {
    if (opts.num_threads > 0) omp_set_num_threads(opts.num_threads);
  }
  DeviceKind kind() const override { return DeviceKind::kCpu; }
  std::string description() const override {
    return Str() << "cpu (" << omp_get_max_threads() << " threads, OpenBLAS)";
  }

  StatusOr<void*> alloc(size_t bytes) override { return aligned_bytes(bytes); }
  void free(void* p) override { std::free(p); }
  StatusOr<void*> alloc_host_pinned(size_t bytes) override { return aligned_bytes(bytes); }
  void free_host_pinned(void* p) override { std::free(p); }
  Status register_host(void*, size_t) override { return Status::OK(); }
  void unregister_host(void*) override {}

  void copy_h2d(void* dst, const void* src, size_t n, StreamId) override { copy(dst, src, n); }
  void copy_d2h(void* dst, const void* src, size_t n, StreamId) override { copy(dst, src, n); }
  void copy_d2d(void* dst, const void* src, size_t n, StreamId) override { copy(dst, src, n); }
  void memset_zero(void* dst, size_t n, StreamId) override {
    if (n) std::memset(dst, 0, n);
  }

  std::unique_ptr<Event> create_event() override { return std::make_unique<CpuEvent>(); }
  void record(Event&, StreamId) override {}
  void wait(StreamId, Event&) override {}
  void sync_event(Event&) override {}
  bool event_done(Event&) override { return true; }
  void sync_stream(StreamId) override {}
  void sync_all() override {}

  void gemm(Tensor c, Tensor a, Tensor b, const GemmOpts& o) override { cpu::gemm(c, a, b, o); }
  void lora_down(Tensor t, Tensor x, Tensor a, float dropout_p, DropoutSeed seed) override {
    cpu::lora_down(t, x, a, dropout_p, seed.for_p(dropout_p));
  }
  void lora_up(Tensor y, Tensor t, Tensor b, float scale) override { cpu::lora_up(y, t, b, scale); }
  void lora_grad_b(Tensor db, Tensor dy, Tensor t, float scale) override { cpu::lora_grad_b(db, dy, t, scale); }
  void lora_dt(Tensor dt, Tensor dy, Tensor b, float scale) override { cpu::lora_dt(dt, dy, b, scale); }
  void lora_grad_a(Tensor da, Tensor dt, Tensor x, float dropout_p, DropoutSeed seed) override {
    cpu::lora_grad_a(da, dt, x, dropout_p, seed.for_p(dropout_p));
  }
  void lora_dx(Tensor dx, Tensor dt, Tensor a, float dropout_p, DropoutSeed seed) override {
    cpu::lora_dx(dx, dt, a, dropout_p, seed.get());
  }
  void dora_norm(Tensor norm, Tensor scale, Tensor w, Tensor a, Tensor b, Tensor mag, float s) override {
    cpu::dora_norm(norm, scale, w, a, b, mag, s);
  }
  void dora_combine(Tensor y, Tensor scale, Tensor bias, Tensor residual) override {
    cpu::dora_combine(y, scale, bias, residual);
  }
  void dora_backward(Tensor g, Tensor dmag, Tensor dy, Tensor v, Tensor scale, Tensor norm) override {
    cpu::dora_backward(g, dmag, dy, v, scale, norm);
  }
  void add_bias(Tensor y, Tensor bias) override { cpu::add_bias(y, bias); }
  void add(Tensor y, Tensor a, Tensor b) override { cpu::add(y, a, b); }
  void scale(Tensor y, Tensor x, float s) override { cpu::scale(y, x, s); }
  void convert(Tensor dst, Tensor src) override { cpu::convert(dst, src); }
  void embedding(Tensor out, Tensor table, const int32_t* ids) override { cpu::embedding(out, table, ids); }
  void rmsnorm(Tensor y, Tensor rstd, Tensor x, Tensor w, float eps) override { cpu::rmsnorm(y, rstd, x, w, eps); }
  void rmsnorm_backward(Tensor dx, Tensor dy, Tensor x, Tensor w, Tensor rstd) override {
    cpu::rmsnorm_backward(dx, dy, x, w, rstd);
  }
  void rope(Tensor x, const int32_t* positions, Tensor inv_freq, bool inverse) override {
    cpu::rope(x, positions, inv_freq, inverse);
  }
  void attention(Tensor out, Tensor lse, Tensor q, Tensor k, Tensor v, const SeqLayout& L,
                 const AttnShape& s) override {
    cpu::attention(out, lse, q, k, v, L, s);
  }
  void attention_kv(Tensor o, Tensor q, Tensor k, Tensor v, int64_t q0, const AttnShape& s) override {
    cpu::attention_kv(o, q, k, v, q0, s);
  }
  void attention_backward(Tensor dq, Tensor dk, Tensor dv, Tensor dout, Tensor q, Tensor k, Tensor v, Tensor out,
                          Tensor lse, const SeqLayout& L, const AttnShape& s) override {
    cpu::attention_backward(dq, dk, dv, dout, q, k, v, out, lse, L, s);
  }
  void dequant_nf4(Tensor w, Tensor codes, Tensor absmax) override { cpu::dequant_nf4(w, codes, absmax); }
  void decode_code12(Tensor w, Tensor body, Tensor aux) override { cpu::decode_code12(w, body, aux); }
  void swiglu(Tensor h, Tensor gate, Tensor up) override { cpu::swiglu(h, gate, up); }
  void swiglu_backward(Tensor dgate, Tensor dup, Tensor dh, Tensor gate, Tensor up) override {
    cpu::swiglu_backward(dgate, dup, dh, gate, up);
  }
  void cross_entropy(Tensor logits, Tensor loss_sum, const int32_t* labels, float grad_scale) override {
    cpu::cross_entropy(logits, loss_sum, labels, grad_scale);
  }
  void ce_chunk(Tensor logits, Tensor acc, Tensor m, Tensor s, Tensor target, const int32_t* labels,
                int64_t col0) override {
    cpu::ce_chunk(logits, acc, m, s, target, labels, col0);
  }
  void ce_finish(Tensor dx, Tensor loss_sum, Tensor acc, Tensor m, Tensor s, Tensor target, Tensor w_label,
                 const int32_t* labels, float grad_scale, Tensor row_scale) override {
    cpu::ce_finish(dx, loss_sum, acc, m, s, target, w_label, labels, grad_scale, row_scale);
  }
  void dropout(Tensor y, Tensor x, float p, DropoutSeed seed) override { cpu::dropout(y, x, p, seed.get()); }
  void add_uniform_noise(Tensor x, float magnitude, DropoutSeed seed) override {
    cpu::add_uniform_noise(x, magnitude, seed.get());
  }
  void adamw(Tensor param, Tensor grad, Tensor m, Tensor v, const AdamW& h) override {
    cpu::adamw(param, grad, m, v, h);
  }
  void sum_squares(Tensor out, Tensor x) override { cpu::sum_squares(out, x); }

 private:
  static void copy(void* dst, const void* src, size_t n) {
    if (n) std::memmove(dst, src, n);
  }
};

}  // namespace

StatusOr<std::unique_ptr<Backend>> make_cpu_backend(const BackendOptions& opts) {
  return std::unique_ptr<Backend>(std::make_unique<CpuBackend>(opts));
}

}  // namespace st
