// torch.library registration of the fused CUDA kernels as the `fuseprof` namespace, so they
// run under torch.compile (fake kernels are registered in Python) and inside CUDA graphs.
// Functional ops allocate their outputs; `_out` ops write into given tensors (tests poison them).
#include <ATen/ATen.h>
#include <torch/library.h>

namespace fuseprof {

void rmsnorm_swiglu_out(const at::Tensor& x, const at::Tensor& gate, const at::Tensor& weight, double eps,
                        at::Tensor& out);
void add_rms_norm_out(const at::Tensor& x, const at::Tensor& residual, const at::Tensor& weight, double eps,
                      at::Tensor& out, at::Tensor& residual_out);
void silu_and_mul_out(const at::Tensor& gate_up, at::Tensor& out);
void silu_mul_out(const at::Tensor& gate, const at::Tensor& up, at::Tensor& out);

namespace {

at::Tensor rmsnorm_swiglu(const at::Tensor& x, const at::Tensor& gate, const at::Tensor& weight, double eps) {
  auto out = at::empty_like(x, at::MemoryFormat::Contiguous);
  rmsnorm_swiglu_out(x, gate, weight, eps, out);
  return out;
}

std::tuple<at::Tensor, at::Tensor> add_rms_norm(const at::Tensor& x, const at::Tensor& residual,
                                                const at::Tensor& weight, double eps) {
  auto out = at::empty_like(x, at::MemoryFormat::Contiguous);
  auto residual_out = at::empty_like(x, at::MemoryFormat::Contiguous);
  add_rms_norm_out(x, residual, weight, eps, out, residual_out);
  return {out, residual_out};
}

at::Tensor silu_and_mul(const at::Tensor& gate_up) {
  TORCH_CHECK(gate_up.dim() == 2, "fuseprof: gate_up must be 2-D (M, 2d), got ",
              std::to_string(gate_up.dim()), "-D");
  auto out = at::empty({gate_up.size(0), gate_up.size(1) / 2}, gate_up.options());
  silu_and_mul_out(gate_up, out);
  return out;
}

at::Tensor silu_mul(const at::Tensor& gate, const at::Tensor& up) {
  auto out = at::empty_like(gate, at::MemoryFormat::Contiguous);
  silu_mul_out(gate, up, out);
  return out;
}

void rmsnorm_swiglu_out_op(const at::Tensor& x, const at::Tensor& gate, const at::Tensor& weight, double eps,
                           at::Tensor out) {
  rmsnorm_swiglu_out(x, gate, weight, eps, out);
}
void add_rms_norm_out_op(const at::Tensor& x, const at::Tensor& residual, const at::Tensor& weight, double eps,
                         at::Tensor out, at::Tensor residual_out) {
  add_rms_norm_out(x, residual, weight, eps, out, residual_out);
}
void silu_and_mul_out_op(const at::Tensor& gate_up, at::Tensor out) { silu_and_mul_out(gate_up, out); }
void silu_mul_out_op(const at::Tensor& gate, const at::Tensor& up, at::Tensor out) { silu_mul_out(gate, up, out); }

}  // namespace

TORCH_LIBRARY(fuseprof, m) {
  m.def("rmsnorm_swiglu(Tensor x, Tensor gate, Tensor weight, float eps=1e-6) -> Tensor");
  m.def("rmsnorm_swiglu_out(Tensor x, Tensor gate, Tensor weight, float eps, Tensor(a!) out) -> ()");
  m.def("add_rms_norm(Tensor x, Tensor residual, Tensor weight, float eps=1e-6) -> (Tensor, Tensor)");
  m.def("add_rms_norm_out(Tensor x, Tensor residual, Tensor weight, float eps, Tensor(a!) out, "
        "Tensor(b!) residual_out) -> ()");
  m.def("silu_and_mul(Tensor gate_up) -> Tensor");
  m.def("silu_and_mul_out(Tensor gate_up, Tensor(a!) out) -> ()");
  m.def("silu_mul(Tensor gate, Tensor up) -> Tensor");
  m.def("silu_mul_out(Tensor gate, Tensor up, Tensor(a!) out) -> ()");
}

TORCH_LIBRARY_IMPL(fuseprof, CUDA, m) {
  m.impl("rmsnorm_swiglu", &rmsnorm_swiglu);
  m.impl("rmsnorm_swiglu_out", &rmsnorm_swiglu_out_op);
  m.impl("add_rms_norm", &add_rms_norm);
  m.impl("add_rms_norm_out", &add_rms_norm_out_op);
  m.impl("silu_and_mul", &silu_and_mul);
  m.impl("silu_and_mul_out", &silu_and_mul_out_op);
  m.impl("silu_mul", &silu_mul);
  m.impl("silu_mul_out", &silu_mul_out_op);
}

}  // namespace fuseprof
