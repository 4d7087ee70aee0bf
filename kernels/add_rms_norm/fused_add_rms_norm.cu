// Fused residual add + RMSNorm (seeds 001, 002): h = x + residual; y = h * rsqrt(mean(h^2) + eps) * w.
// Returns both y and h (the next layer's residual). One block per row: x and residual are read
// once, h and y written once (4 passes of the row instead of the eager chain's 6-8). h is summed
// in fp32 and squared before rounding, then stored rounded, as vLLM's fused_add_rms_norm does.
#include "../_cuda/common.cuh"

namespace fuseprof {

// kWide: rows of more than kItems vectors a thread, whose rest is not cached and is read twice.
// Compiling those loops only where needed keeps the common kernel at 32 registers: with them every
// row paid 40, a 256-thread block fit 6 times per SM, 792 rows at once on the H200's 132 SMs, and
// 1024 rows took 1.29 waves, the second 29% full (ncu launch__waves_per_multiprocessor), 5% behind
// Inductor; at 32 registers 8 blocks fit and 1024 rows take one wave. (Forcing 32 registers with
// __launch_bounds__ instead spilled 20 bytes a thread and ran slower still.)
template <typename T, int VEC, bool kWide>
__global__ void add_rms_norm_kernel(const T* __restrict__ x, const T* __restrict__ residual,
                                    const T* __restrict__ weight, T* __restrict__ out, T* __restrict__ h_out,
                                    int64_t n, int64_t x_stride, int64_t r_stride, int64_t out_stride,
                                    int64_t h_stride, float eps) {
  __shared__ float scratch[32];
  const int64_t row = blockIdx.x;
  const T* xr = x + row * x_stride;
  const T* rr = residual + row * r_stride;
  T* yr = out + row * out_stride;
  T* hr = h_out + row * h_stride;
  const int64_t vectors = n / VEC;
  float cached[kItems][VEC];
  float sum_sq = 0.0f;

#pragma unroll
  for (int k = 0; k < kItems; ++k) {
    const int64_t c = threadIdx.x + static_cast<int64_t>(k) * blockDim.x;
    if (c < vectors) {
      const auto xv = load_pack<T, VEC>(xr + c * VEC);
      const auto rv = load_pack<T, VEC>(rr + c * VEC);
      Pack<T, VEC> hv;
#pragma unroll
      for (int j = 0; j < VEC; ++j) {
        const float h = to_float(xv.v[j]) + to_float(rv.v[j]);
        sum_sq += h * h;
        cached[k][j] = h;
        hv.v[j] = from_float<T>(h);
      }
      store_pack<T, VEC>(hr + c * VEC, hv);
    }
  }
  const int64_t first_uncached = static_cast<int64_t>(kItems) * blockDim.x;
  for (int64_t c = first_uncached + threadIdx.x; kWide && c < vectors; c += blockDim.x) {
    const auto xv = load_pack<T, VEC>(xr + c * VEC);
    const auto rv = load_pack<T, VEC>(rr + c * VEC);
    Pack<T, VEC> hv;
#pragma unroll
    for (int j = 0; j < VEC; ++j) {
      const float h = to_float(xv.v[j]) + to_float(rv.v[j]);
      sum_sq += h * h;
      hv.v[j] = from_float<T>(h);
    }
    store_pack<T, VEC>(hr + c * VEC, hv);
  }

  const float inv_rms = rsqrtf(block_sum(sum_sq, scratch) / static_cast<float>(n) + eps);

#pragma unroll
  for (int k = 0; k < kItems; ++k) {
    const int64_t c = threadIdx.x + static_cast<int64_t>(k) * blockDim.x;
    if (c < vectors) {
      const auto wv = load_pack<T, VEC>(weight + c * VEC);
      Pack<T, VEC> yv;
#pragma unroll
      for (int j = 0; j < VEC; ++j) yv.v[j] = from_float<T>(cached[k][j] * inv_rms * to_float(wv.v[j]));
      store_pack<T, VEC>(yr + c * VEC, yv);
    }
  }
  // Rows past the register cache: recompute h from the inputs (not from the rounded h just
  // stored, which another block never touches but which would round twice).
  for (int64_t c = first_uncached + threadIdx.x; kWide && c < vectors; c += blockDim.x) {
    const auto xv = load_pack<T, VEC>(xr + c * VEC);
    const auto rv = load_pack<T, VEC>(rr + c * VEC);
    const auto wv = load_pack<T, VEC>(weight + c * VEC);
    Pack<T, VEC> yv;
#pragma unroll
    for (int j = 0; j < VEC; ++j) {
      yv.v[j] = from_float<T>((to_float(xv.v[j]) + to_float(rv.v[j])) * inv_rms * to_float(wv.v[j]));
    }
    store_pack<T, VEC>(yr + c * VEC, yv);
  }
}

void add_rms_norm_out(const at::Tensor& x, const at::Tensor& residual, const at::Tensor& weight, double eps,
                      at::Tensor& out, at::Tensor& residual_out) {
  check_2d_rows(x, "x");
  check_2d_rows(residual, "residual");
  check_2d_rows(out, "out");
  check_2d_rows(residual_out, "residual_out");
  check_same(x, residual, "x", "residual");
  check_same(x, out, "x", "out");
  check_same(x, residual_out, "x", "residual_out");
  check_weight(weight, x);
  TORCH_CHECK(residual.sizes() == x.sizes() && out.sizes() == x.sizes() && residual_out.sizes() == x.sizes(),
              "fuseprof: x ", dims(x.sizes()), ", residual ", dims(residual.sizes()), ", out ", dims(out.sizes()), " and residual_out ",
              dims(residual_out.sizes()), " must have the same shape");
  const int64_t m = x.size(0), n = x.size(1);
  if (m == 0 || n == 0) return;
  const c10::cuda::CUDAGuard guard(x.device());
  const auto stream = c10::cuda::getCurrentCUDAStream();
  FUSEPROF_DISPATCH_HALF_TYPES(x.scalar_type(), [&] {
    constexpr int kVec = 16 / sizeof(scalar_t);
    const bool vector_path = n % kVec == 0 && x.stride(0) % kVec == 0 && residual.stride(0) % kVec == 0 &&
                             out.stride(0) % kVec == 0 && residual_out.stride(0) % kVec == 0 && aligned16(x) &&
                             aligned16(residual) && aligned16(weight) && aligned16(out) && aligned16(residual_out);
    auto* xp = reinterpret_cast<const scalar_t*>(x.data_ptr());
    auto* rp = reinterpret_cast<const scalar_t*>(residual.data_ptr());
    auto* wp = reinterpret_cast<const scalar_t*>(weight.data_ptr());
    auto* yp = reinterpret_cast<scalar_t*>(out.data_ptr());
    auto* hp = reinterpret_cast<scalar_t*>(residual_out.data_ptr());
    const int64_t vectors = vector_path ? n / kVec : n;
    const int threads = row_threads(vectors);
    const bool wide = vectors > static_cast<int64_t>(kItems) * threads;
    const auto launch = [&](auto kernel) {
      kernel<<<m, threads, 0, stream>>>(xp, rp, wp, yp, hp, n, x.stride(0), residual.stride(0), out.stride(0),
                                        residual_out.stride(0), static_cast<float>(eps));
    };
    if (vector_path) {
      wide ? launch(add_rms_norm_kernel<scalar_t, kVec, true>) : launch(add_rms_norm_kernel<scalar_t, kVec, false>);
    } else {
      wide ? launch(add_rms_norm_kernel<scalar_t, 1, true>) : launch(add_rms_norm_kernel<scalar_t, 1, false>);
    }
  });
  C10_CUDA_KERNEL_LAUNCH_CHECK();
}

}  // namespace fuseprof
