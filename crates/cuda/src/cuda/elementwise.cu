// Elementwise kernels (rlgrad_core::kernels::ElementwiseKernel): one thread per output
// element in grid-stride loops, inputs read through strided views, the canonical scalar
// formulas of UnaryOp::apply and BinaryOp::apply. The op is a switch outside the loop, so
// each op gets its own loop, and each loop a dense path (every input read at offset + i)
// beside the strided one. The views are `__grid_constant__` parameters read in place
// through references: a copy, dynamically indexed by dimension, would live in local
// memory (kilobytes per thread over the 17 loops).

template <typename T, int OP> __device__ __forceinline__ T unary_apply(T x, T a, T b) {
    switch (OP) {
        case 0: return -x;
        case 1: return rl_abs_t(x);
        case 2: return rl_exp_t(x);
        case 3: return rl_log_t(x);
        case 4: return rl_sqrt_t(x);
        case 5: return rl_tanh_t(x);
        case 6: return (x > (T)0 || is_nan(x)) ? x : (T)0;
        case 7: return rl_sigmoid_t(x);
        case 8: return x * x;
        case 9: return rl_pow_t(x, a);
        case 10: return x < a ? a : (x > b ? b : x);
        case 11: return x + a;
        case 12: return x - a;
        case 13: return a - x;
        case 14: return x * a;
        case 15: return x / a;
        default: return a / x;
    }
}

template <typename T, int OP>
__device__ void unary_loop(const T* x, const Strided& xs, T* out, u64 n, T a, T b) {
    if (is_dense(xs)) {
        const T* dense = x + xs.offset;
        for (u64 i = first_index(); i < n; i += grid_stride()) {
            out[i] = unary_apply<T, OP>(dense[i], a, b);
        }
    } else {
        for (u64 i = first_index(); i < n; i += grid_stride()) {
            out[i] = unary_apply<T, OP>(x[strided_offset(xs, i)], a, b);
        }
    }
}

#define UNARY_CASE(k) case k: unary_loop<T, k>(x, xs, out, n, a, b); break;

template <typename T>
__device__ void unary(int op, const T* x, const Strided& xs, T* out, u64 n, T a, T b) {
    switch (op) {
        UNARY_CASE(0) UNARY_CASE(1) UNARY_CASE(2) UNARY_CASE(3) UNARY_CASE(4) UNARY_CASE(5)
        UNARY_CASE(6) UNARY_CASE(7) UNARY_CASE(8) UNARY_CASE(9) UNARY_CASE(10) UNARY_CASE(11)
        UNARY_CASE(12) UNARY_CASE(13) UNARY_CASE(14) UNARY_CASE(15) UNARY_CASE(16)
    }
}

template <typename T, int OP> __device__ __forceinline__ T binary_apply(T a, T b) {
    switch (OP) {
        case 0: return a + b;
        case 1: return a - b;
        case 2: return a * b;
        case 3: return a / b;
        case 4: return max2(a, b);
        case 5: return min2(a, b);
        case 6: return a == b ? (T)1 : (T)0;
        case 7: return a != b ? (T)1 : (T)0;
        case 8: return a < b ? (T)1 : (T)0;
        case 9: return a <= b ? (T)1 : (T)0;
        case 10: return a > b ? (T)1 : (T)0;
        case 11: return a >= b ? (T)1 : (T)0;
        case 12: return b > (T)0 ? a : (T)0;
        case 13: return a * ((T)1 - b * b);
        case 14: return a * ((T)1 - b) * b;
        case 15: return a / (b + b);
        default: {
            T sign = b > (T)0 ? (T)1 : (b < (T)0 ? (T)-1 : (b == (T)0 ? (T)0 : b));
            return a * sign;
        }
    }
}

template <typename T, int OP>
__device__ void binary_loop(const T* a, const Strided& as, const T* b, const Strided& bs, T* out,
                            u64 n) {
    if (is_dense(as) && is_dense(bs)) {
        const T* a_dense = a + as.offset;
        const T* b_dense = b + bs.offset;
        for (u64 i = first_index(); i < n; i += grid_stride()) {
            out[i] = binary_apply<T, OP>(a_dense[i], b_dense[i]);
        }
    } else {
        for (u64 i = first_index(); i < n; i += grid_stride()) {
            out[i] = binary_apply<T, OP>(a[strided_offset(as, i)], b[strided_offset(bs, i)]);
        }
    }
}

#define BINARY_CASE(k) case k: binary_loop<T, k>(a, as, b, bs, out, n); break;

template <typename T>
__device__ void binary(int op, const T* a, const Strided& as, const T* b, const Strided& bs,
                       T* out, u64 n) {
    switch (op) {
        BINARY_CASE(0) BINARY_CASE(1) BINARY_CASE(2) BINARY_CASE(3) BINARY_CASE(4)
        BINARY_CASE(5) BINARY_CASE(6) BINARY_CASE(7) BINARY_CASE(8) BINARY_CASE(9)
        BINARY_CASE(10) BINARY_CASE(11) BINARY_CASE(12) BINARY_CASE(13) BINARY_CASE(14)
        BINARY_CASE(15) BINARY_CASE(16)
    }
}

template <typename T>
__device__ void select(const T* c, const Strided& cs, const T* t, const Strided& ts, const T* f,
                       const Strided& fs, T* out, u64 n) {
    for (u64 i = first_index(); i < n; i += grid_stride()) {
        out[i] = c[strided_offset(cs, i)] != (T)0 ? t[strided_offset(ts, i)]
                                                   : f[strided_offset(fs, i)];
    }
}

#define ELEMENTWISE_KERNELS(T, S)                                                          \
    extern "C" __global__ void unary_##S(int op, const T* x, KERNEL_VIEW xs, T* out, u64 n, \
                                         T a, T b) {                                       \
        unary<T>(op, x, xs, out, n, a, b);                                                 \
    }                                                                                      \
    extern "C" __global__ void binary_##S(int op, const T* a, KERNEL_VIEW as, const T* b,  \
                                          KERNEL_VIEW bs, T* out, u64 n) {                 \
        binary<T>(op, a, as, b, bs, out, n);                                               \
    }                                                                                      \
    extern "C" __global__ void select_##S(const T* c, KERNEL_VIEW cs, const T* t,          \
                                          KERNEL_VIEW ts, const T* f, KERNEL_VIEW fs,      \
                                          T* out, u64 n) {                                 \
        select<T>(c, cs, t, ts, f, fs, out, n);                                            \
    }

ELEMENTWISE_KERNELS(float, f32)
ELEMENTWISE_KERNELS(double, f64)
