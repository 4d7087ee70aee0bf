// Shared device helpers for fuseprof's fused kernels: 16-byte vector access, fp32 conversion,
// a block reduction that is correct for any block size that is a multiple of 32, and the
// host-side launch shape. Seed 000's reduction lost partial sums at 96 threads; this one adds
// each warp's total exactly once, whatever the warp count.
#pragma once

#include <ATen/ATen.h>
#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>

namespace fuseprof {

__device__ __forceinline__ float to_float(__half v) { return __half2float(v); }
__device__ __forceinline__ float to_float(__nv_bfloat16 v) { return __bfloat162float(v); }
template <typename T> __device__ __forceinline__ T from_float(float v);
template <> __device__ __forceinline__ __half from_float<__half>(float v) { return __float2half_rn(v); }
template <> __device__ __forceinline__ __nv_bfloat16 from_float<__nv_bfloat16>(float v) {
  return __float2bfloat16_rn(v);
}

// VEC elements of T moved as one access: 16 bytes when VEC * sizeof(T) == 16.
template <typename T, int VEC>
struct alignas(sizeof(T) * VEC) Pack {
  T v[VEC];
};

template <typename T, int VEC>
__device__ __forceinline__ Pack<T, VEC> load_pack(const T* p) {
  return *reinterpret_cast<const Pack<T, VEC>*>(p);
}

__device__ __forceinline__ uint32_t bits(__half v) { return __half_as_ushort(v); }
__device__ __forceinline__ uint32_t bits(__nv_bfloat16 v) { return __bfloat16_as_ushort(v); }

// A 16-byte pack is stored with one st.global.v4: assigning the struct (or a uint4 built from it)
// let nvcc split silu_mul's store into four (ncu: 4 global store instructions per warp where
// Inductor's kernel issues 1; PTX: st.global.v2.u16 x4), though loads stayed ld.global.v4.
template <typename T, int VEC>
__device__ __forceinline__ void store_pack(T* p, const Pack<T, VEC>& pack) {
  if constexpr (VEC == 8 && sizeof(T) == 2) {
    const auto word = [&](int i) { return bits(pack.v[2 * i]) | (bits(pack.v[2 * i + 1]) << 16); };
    asm volatile("st.global.v4.b32 [%0], {%1, %2, %3, %4};" ::"l"(p), "r"(word(0)), "r"(word(1)), "r"(word(2)),
                 "r"(word(3)) : "memory");
  } else {
    *reinterpret_cast<Pack<T, VEC>*>(p) = pack;
  }
}

// SiLU with the fast divide: an IEEE '/' per element cost rmsnorm_swiglu 14% over the copy
// time at 8192x8192 on the H200 (the add_rms_norm kernel, with no divide, sat at 4%).
// __fdividef is within 2 ulp of fp32, far below the fp16/bf16 output's rounding.
__device__ __forceinline__ float silu(float z) { return __fdividef(z, 1.0f + __expf(-z)); }

__device__ __forceinline__ float warp_sum(float v) {
#pragma unroll
  for (int offset = 16; offset > 0; offset >>= 1) v += __shfl_xor_sync(0xffffffffu, v, offset);
  return v;
}

// Sum over the block; every thread gets the total. blockDim.x must be a multiple of 32
// (the host guarantees it) and `scratch` must hold 32 floats.
__device__ __forceinline__ float block_sum(float v, float* scratch) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = blockDim.x >> 5;
  v = warp_sum(v);
  if (lane == 0) scratch[warp] = v;
  __syncthreads();
  if (warp == 0) {
    float total = lane < warps ? scratch[lane] : 0.0f;
    total = warp_sum(total);
    if (lane == 0) scratch[0] = total;
  }
  __syncthreads();
  return scratch[0];
}

// Host side ---------------------------------------------------------------------------------

// Vectors a thread keeps in registers between the reduction and the output. 4 gave 256-thread
// blocks at N=8192 (55 registers) and ran 20% behind Inductor on the H200 at 8192x8192;
// 2 doubles the warps per row for latency hiding (512 threads at N=8192, 1024 at N=16384).
constexpr int kItems = 2;

inline bool aligned16(const at::Tensor& t) { return reinterpret_cast<uintptr_t>(t.data_ptr()) % 16 == 0; }

// Threads per row-block: enough that each thread holds at most kItems vectors, a multiple of
// 32, at most 1024. Rows wider than 1024 * kItems vectors take a second pass for the rest.
inline int row_threads(int64_t vectors_per_row) {
  int64_t t = (vectors_per_row + kItems - 1) / kItems;
  t = (t + 31) / 32 * 32;
  return static_cast<int>(std::min<int64_t>(std::max<int64_t>(t, 32), 1024));
}

// Numbers in error messages go through std::to_string: streaming int64_t into TORCH_CHECK's
// message crashed the process (SIGSEGV) with this extension built by the H200 image's g++, while
// streaming a Device or ScalarType did not. Seen on 2026-11-29, torch 2.11; cause not isolated.
inline std::string num(int64_t v) { return std::to_string(v); }

inline std::string dims(at::IntArrayRef sizes) {
  std::string out = "(";
  for (size_t i = 0; i < sizes.size(); ++i) out += (i ? ", " : "") + std::to_string(sizes[i]);
  return out + ")";
}

inline void check_2d_rows(const at::Tensor& t, const char* name) {
  TORCH_CHECK(t.is_cuda(), "fuseprof: ", name, " must be a CUDA tensor, got ", t.device());
  TORCH_CHECK(t.dim() == 2, "fuseprof: ", name, " must be 2-D (M, N), got ", num(t.dim()), "-D; reshape to (-1, N)");
  TORCH_CHECK(t.stride(1) == 1, "fuseprof: ", name, "'s last dimension must be contiguous (stride 1), got ",
              num(t.stride(1)));
  TORCH_CHECK(t.scalar_type() == at::kHalf || t.scalar_type() == at::kBFloat16, "fuseprof: ", name,
              " must be float16 or bfloat16, got ", t.scalar_type());
}

inline void check_same(const at::Tensor& a, const at::Tensor& b, const char* an, const char* bn) {
  TORCH_CHECK(a.scalar_type() == b.scalar_type(), "fuseprof: ", bn, " dtype ", b.scalar_type(), " differs from ",
              an, " dtype ", a.scalar_type());
  TORCH_CHECK(a.device() == b.device(), "fuseprof: ", bn, " is on ", b.device(), " but ", an, " is on ", a.device());
}

inline void check_weight(const at::Tensor& w, const at::Tensor& x) {
  TORCH_CHECK(w.dim() == 1 && w.size(0) == x.size(1), "fuseprof: weight must have shape (", num(x.size(1)),
              "), got ", dims(w.sizes()));
  TORCH_CHECK(w.is_contiguous(), "fuseprof: weight must be contiguous");
  check_same(x, w, "x", "weight");
}

}  // namespace fuseprof

// float16 and bfloat16 only: the kernels compute in fp32 and round once on store.
#define FUSEPROF_DISPATCH_HALF_TYPES(dtype, ...)                                  \
  [&] {                                                                          \
    if ((dtype) == at::kHalf) {                                                  \
      using scalar_t = __half;                                                   \
      return __VA_ARGS__();                                                      \
    }                                                                            \
    using scalar_t = __nv_bfloat16;                                              \
    return __VA_ARGS__();                                                        \
  }()
