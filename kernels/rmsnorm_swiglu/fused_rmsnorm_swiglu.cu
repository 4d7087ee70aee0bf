// Fused RMSNorm + SwiGLU-style gate (seed 000): y = x * w * SiLU(g) * rsqrt(mean(x^2) + eps).
// One block per row. Each thread loads up to kItems 16-byte vectors of x, g and w, keeps the
// product x*w*SiLU(g) in registers while the block reduces sum(x^2), then scales and stores:
// x and g are read once and y written once. Rows wider than 1024 threads * kItems vectors
// (N > 32768 in fp16) re-read the remainder after the reduction (from L2 for such rows).
// A scalar path (VEC = 1) serves N not a multiple of 8 and unaligned tensors.
#include "../_cuda/common.cuh"

namespace fuseprof {

template <typename T, int VEC>
__global__ void rmsnorm_swiglu_kernel(const T* __restrict__ x, const T* __restrict__ gate,
                                      const T* __restrict__ weight, T* __restrict__ out, int64_t n,
                                      int64_t x_stride, int64_t g_stride, int64_t out_stride, float eps) {
  __shared__ float scratch[32];
  const int64_t row = blockIdx.x;
  const T* xr = x + row * x_stride;
  const T* gr = gate + row * g_stride;
  T* yr = out + row * out_stride;
  const int64_t vectors = n / VEC;
  float cached[kItems][VEC];
  float sum_sq = 0.0f;

#pragma unroll
  for (int k = 0; k < kItems; ++k) {
    const int64_t c = threadIdx.x + static_cast<int64_t>(k) * blockDim.x;
    if (c < vectors) {
      const auto xv = load_pack<T, VEC>(xr + c * VEC);
      const auto gv = load_pack<T, VEC>(gr + c * VEC);
      const auto wv = load_pack<T, VEC>(weight + c * VEC);
#pragma unroll
      for (int j = 0; j < VEC; ++j) {
        const float xf = to_float(xv.v[j]);
        sum_sq += xf * xf;
        cached[k][j] = xf * to_float(wv.v[j]) * silu(to_float(gv.v[j]));
      }
    }
  }
  const int64_t first_uncached = static_cast<int64_t>(kItems) * blockDim.x;
  for (int64_t c = first_uncached + threadIdx.x; c < vectors; c += blockDim.x) {
    const auto xv = load_pack<T, VEC>(xr + c * VEC);
#pragma unroll
    for (int j = 0; j < VEC; ++j) sum_sq += to_float(xv.v[j]) * to_float(xv.v[j]);
  }

  const float inv_rms = rsqrtf(block_sum(sum_sq, scratch) / static_cast<float>(n) + eps);

#pragma unroll
  for (int k = 0; k < kItems; ++k) {
    const int64_t c = threadIdx.x + static_cast<int64_t>(k) * blockDim.x;
    if (c < vectors) {
      Pack<T, VEC> yv;
#pragma unroll
      for (int j = 0; j < VEC; ++j) yv.v[j] = from_float<T>(cached[k][j] * inv_rms);
      store_pack<T, VEC>(yr + c * VEC, yv);
    }
  }
  for (int64_t c = first_uncached + threadIdx.x; c < vectors; c += blockDim.x) {
    const auto xv = load_pack<T, VEC>(xr + c * VEC);
    const auto gv = load_pack<T, VEC>(gr + c * VEC);
    const auto wv = load_pack<T, VEC>(weight + c * VEC);
    Pack<T, VEC> yv;
#pragma unroll
    for (int j = 0; j < VEC; ++j) {
      yv.v[j] = from_float<T>(to_float(xv.v[j]) * to_float(wv.v[j]) * silu(to_float(gv.v[j])) * inv_rms);
    }
    store_pack<T, VEC>(yr + c * VEC, yv);
  }
}

void rmsnorm_swiglu_out(const at::Tensor& x, const at::Tensor& gate, const at::Tensor& weight, double eps,
                        at::Tensor& out) {
  check_2d_rows(x, "x");
  check_2d_rows(gate, "gate");
  check_2d_rows(out, "out");
  check_same(x, gate, "x", "gate");
  check_same(x, out, "x", "out");
  check_weight(weight, x);
  TORCH_CHECK(gate.sizes() == x.sizes() && out.sizes() == x.sizes(), "fuseprof: x ", dims(x.sizes()), ", gate ",
              dims(gate.sizes()), " and out ", dims(out.sizes()), " must have the same shape");
  const int64_t m = x.size(0), n = x.size(1);
  if (m == 0 || n == 0) return;
  const c10::cuda::CUDAGuard guard(x.device());
  const auto stream = c10::cuda::getCurrentCUDAStream();
  FUSEPROF_DISPATCH_HALF_TYPES(x.scalar_type(), [&] {
    constexpr int kVec = 16 / sizeof(scalar_t);
    const bool vector_path = n % kVec == 0 && x.stride(0) % kVec == 0 && gate.stride(0) % kVec == 0 &&
                             out.stride(0) % kVec == 0 && aligned16(x) && aligned16(gate) && aligned16(weight) &&
                             aligned16(out);
    auto* xp = reinterpret_cast<const scalar_t*>(x.data_ptr());
    auto* gp = reinterpret_cast<const scalar_t*>(gate.data_ptr());
    auto* wp = reinterpret_cast<const scalar_t*>(weight.data_ptr());
    auto* yp = reinterpret_cast<scalar_t*>(out.data_ptr());
    if (vector_path) {
      rmsnorm_swiglu_kernel<scalar_t, kVec><<<m, row_threads(n / kVec), 0, stream>>>(
          xp, gp, wp, yp, n, x.stride(0), gate.stride(0), out.stride(0), static_cast<float>(eps));
    } else {
      rmsnorm_swiglu_kernel<scalar_t, 1><<<m, row_threads(n), 0, stream>>>(
          xp, gp, wp, yp, n, x.stride(0), gate.stride(0), out.stride(0), static_cast<float>(eps));
    }
  });
  C10_CUDA_KERNEL_LAUNCH_CHECK();
}

}  // namespace fuseprof
