// Shared by every kernel family: index types, strided views, and the canonical scalar
// helpers of rlgrad-core (max2/min2, the recurrences' cut). Prepended, after math.cuh, to
// each family's source before NVRTC compiles it.

typedef unsigned long long u64;
typedef long long i64;
typedef unsigned int u32;

// Threads per block of the one-dimensional kernels.
#define BLOCK 256

// A strided view (rlgrad_core::Layout, dimensions merged where possible): element `i` of
// the row-major enumeration sits at `offset + sum(index[d] * strides[d])`.
#define MAX_DIMS 8
struct Strided {
    u32 ndim;
    u32 pad;
    u64 offset;
    u64 dims[MAX_DIMS];
    u64 strides[MAX_DIMS];
};

// A kernel parameter holding a view: read in place from the parameter bank, never copied
// to the thread's local memory (device functions take `const Strided&`).
#define KERNEL_VIEW const __grid_constant__ Strided

// Whether element i of the view is at offset + i: one merged dimension of stride 1, or a
// scalar.
__device__ __forceinline__ bool is_dense(const Strided& s) {
    return s.ndim == 0 || (s.ndim == 1 && s.strides[0] == 1);
}

__device__ __forceinline__ u64 strided_offset(const Strided& s, u64 i) {
    if (s.ndim == 1) return s.offset + i * s.strides[0];
    u64 off = s.offset;
    for (int d = (int)s.ndim - 1; d >= 0; --d) {
        u64 q = i / s.dims[d];
        off += (i - q * s.dims[d]) * s.strides[d];
        i = q;
    }
    return off;
}

// The first index of this thread and the grid's stride, for grid-stride loops.
__device__ __forceinline__ u64 first_index() {
    return (u64)blockIdx.x * blockDim.x + threadIdx.x;
}
__device__ __forceinline__ u64 grid_stride() {
    return (u64)gridDim.x * blockDim.x;
}

template <typename T> __device__ __forceinline__ bool is_nan(T x) { return x != x; }
// Neither NaN nor infinite: x - x is 0 exactly then, NaN otherwise.
template <typename T> __device__ __forceinline__ bool is_finite(T x) { return !is_nan(x - x); }
template <typename T> __device__ __forceinline__ bool is_inf(T x) {
    return !is_nan(x) && !is_finite(x);
}

// rlgrad_core::reduce::min2 / max2: NaN-propagating, the first wins a tie.
template <typename T> __device__ __forceinline__ T min2(T a, T b) {
    if (is_nan(a)) return a;
    return (is_nan(b) || b < a) ? b : a;
}
template <typename T> __device__ __forceinline__ T max2(T a, T b) {
    if (is_nan(a)) return a;
    return (is_nan(b) || b > a) ? b : a;
}

// rlgrad_core::kernels::recurrence::cut: +0 where the discount is zero, else the term (a
// selection, so that NaN or infinity after an episode end cannot leak through 0 * NaN).
template <typename T> __device__ __forceinline__ T cut(T discount, T term) {
    return discount == (T)0 ? (T)0 : term;
}

// The portable transcendentals of math.cuh by element type.
__device__ __forceinline__ float rl_exp_t(float x) { return rl_expf(x); }
__device__ __forceinline__ double rl_exp_t(double x) { return rl_exp(x); }
__device__ __forceinline__ float rl_log_t(float x) { return rl_logf(x); }
__device__ __forceinline__ double rl_log_t(double x) { return rl_log(x); }
__device__ __forceinline__ float rl_tanh_t(float x) { return rl_tanhf(x); }
__device__ __forceinline__ double rl_tanh_t(double x) { return rl_tanh(x); }
__device__ __forceinline__ float rl_pow_t(float x, float y) { return rl_powf(x, y); }
__device__ __forceinline__ double rl_pow_t(double x, double y) { return rl_pow(x, y); }
// UnaryOp::Sigmoid: 1 / (1 + e^-x) for x >= 0, e^x / (1 + e^x) otherwise (no overflow).
template <typename T> __device__ __forceinline__ T rl_sigmoid_t(T x) {
    if (x >= (T)0) return (T)1 / ((T)1 + rl_exp_t(-x));
    T e = rl_exp_t(x);
    return e / ((T)1 + e);
}
// |x|: the sign bit cleared, as Rust's `abs` does (NaN included).
__device__ __forceinline__ float rl_abs_t(float x) {
    return __uint_as_float(__float_as_uint(x) & 0x7fffffffu);
}
__device__ __forceinline__ double rl_abs_t(double x) {
    return __longlong_as_double(__double_as_longlong(x) & 0x7fffffffffffffffll);
}
// IEEE square roots (correctly rounded), whatever the compiler flags.
__device__ __forceinline__ float rl_sqrt_t(float x) { return __fsqrt_rn(x); }
__device__ __forceinline__ double rl_sqrt_t(double x) { return __dsqrt_rn(x); }
// One rounding: IEEE fusedMultiplyAdd, where a canonical formula asks for it (matmul).
__device__ __forceinline__ float rl_fma_t(float a, float b, float c) { return fmaf(a, b, c); }
__device__ __forceinline__ double rl_fma_t(double a, double b, double c) { return fma(a, b, c); }

// Each family's source ends by defining its `extern "C"` kernels for `float` and `double`
// through one macro, `<name>_f32` and `<name>_f64`: the names the Rust side launches.
