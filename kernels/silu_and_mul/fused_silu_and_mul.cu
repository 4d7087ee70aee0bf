// SiLU-and-mul (seed 002): out = SiLU(gate) * up, from one (M, 2d) tensor [gate | up] as serving
// engines pass it, or from two (M, d) tensors. Pure elementwise: each input element is read once
// and each output written once, 16 bytes a thread. One block per 256-vector tile of a row, tiles
// numbered along the row first: blocks that run together read neighbouring addresses, as a flat
// copy does. (Numbering rows first, as this kernel did, put the ~1000 blocks in flight at one
// column offset of ~1000 rows, addresses a power-of-two row pitch apart: 3-6% slower than
// Inductor at M >= 4096; see the README's "Explaining a kernel".) The block's row and tile come
// from one division per block, none per element (a grid-stride version that divided the flat
// index by the row length ran 7% over the copy time at 8192x8192).
#include "../_cuda/common.cuh"

namespace fuseprof {

template <typename T, int VEC>
__global__ void silu_mul_kernel(const T* __restrict__ gate, const T* __restrict__ up, T* __restrict__ out,
                                int64_t d, int64_t g_stride, int64_t u_stride, int64_t out_stride,
                                unsigned tiles_per_row) {
  const int64_t row = blockIdx.x / tiles_per_row;
  const int64_t tile = blockIdx.x % tiles_per_row;
  const int64_t col = (tile * blockDim.x + threadIdx.x) * VEC;
  if (col >= d) return;
  const auto gv = load_pack<T, VEC>(gate + row * g_stride + col);
  const auto uv = load_pack<T, VEC>(up + row * u_stride + col);
  Pack<T, VEC> ov;
#pragma unroll
  for (int j = 0; j < VEC; ++j) ov.v[j] = from_float<T>(silu(to_float(gv.v[j])) * to_float(uv.v[j]));
  store_pack<T, VEC>(out + row * out_stride + col, ov);
}

namespace {

void launch_silu_mul(const at::Tensor& gate, const at::Tensor& up, at::Tensor& out) {
  const int64_t m = gate.size(0), d = gate.size(1);
  if (m == 0 || d == 0) return;
  const c10::cuda::CUDAGuard guard(gate.device());
  const auto stream = c10::cuda::getCurrentCUDAStream();
  FUSEPROF_DISPATCH_HALF_TYPES(gate.scalar_type(), [&] {
    constexpr int kVec = 16 / sizeof(scalar_t);
    const bool vector_path = d % kVec == 0 && gate.stride(0) % kVec == 0 && up.stride(0) % kVec == 0 &&
                             out.stride(0) % kVec == 0 && aligned16(gate) && aligned16(up) && aligned16(out);
    const int vec = vector_path ? kVec : 1;
    constexpr int threads = 256;
    const int64_t tiles_per_row = (d / vec + threads - 1) / threads;
    TORCH_CHECK(m * tiles_per_row <= INT32_MAX, "fuseprof: ", num(m), " rows of ", num(d),
                " elements need more than 2^31 - 1 blocks for silu_mul");
    const dim3 blocks(static_cast<unsigned>(m * tiles_per_row));
    const auto tiles = static_cast<unsigned>(tiles_per_row);
    auto* gp = reinterpret_cast<const scalar_t*>(gate.data_ptr());
    auto* up_p = reinterpret_cast<const scalar_t*>(up.data_ptr());
    auto* op = reinterpret_cast<scalar_t*>(out.data_ptr());
    if (vector_path) {
      silu_mul_kernel<scalar_t, kVec><<<blocks, threads, 0, stream>>>(gp, up_p, op, d, gate.stride(0), up.stride(0),
                                                                       out.stride(0), tiles);
    } else {
      silu_mul_kernel<scalar_t, 1><<<blocks, threads, 0, stream>>>(gp, up_p, op, d, gate.stride(0), up.stride(0),
                                                                   out.stride(0), tiles);
    }
  });
  C10_CUDA_KERNEL_LAUNCH_CHECK();
}

}  // namespace

void silu_and_mul_out(const at::Tensor& gate_up, at::Tensor& out) {
  check_2d_rows(gate_up, "gate_up");
  check_2d_rows(out, "out");
  check_same(gate_up, out, "gate_up", "out");
  TORCH_CHECK(gate_up.size(1) % 2 == 0, "fuseprof: gate_up's last dimension must be even (gate | up), got ",
              num(gate_up.size(1)));
  const int64_t d = gate_up.size(1) / 2;
  TORCH_CHECK(out.size(0) == gate_up.size(0) && out.size(1) == d, "fuseprof: out must have shape (",
              num(gate_up.size(0)), ", ", num(d), "), got ", dims(out.sizes()));
  launch_silu_mul(gate_up.narrow(1, 0, d), gate_up.narrow(1, d, d), out);
}

void silu_mul_out(const at::Tensor& gate, const at::Tensor& up, at::Tensor& out) {
  check_2d_rows(gate, "gate");
  check_2d_rows(up, "up");
  check_2d_rows(out, "out");
  check_same(gate, up, "gate", "up");
  check_same(gate, out, "gate", "out");
  TORCH_CHECK(up.sizes() == gate.sizes() && out.sizes() == gate.sizes(), "fuseprof: gate ", dims(gate.sizes()), ", up ",
              dims(up.sizes()), " and out ", dims(out.sizes()), " must have the same shape");
  launch_silu_mul(gate, up, out);
}

}  // namespace fuseprof
