// Data movement (rlgrad_core::kernels::CopyKernel): one thread per output element.

// out[i] = element i (row-major) of a strided view.
template <typename T> __device__ void copy_strided(const T* x, const Strided& xs, T* out, u64 n) {
    for (u64 i = first_index(); i < n; i += grid_stride()) out[i] = x[strided_offset(xs, i)];
}

// out = slices indices[k] of the dense [outer, len, inner] array x along the middle axis.
template <typename T>
__device__ void index_select(const T* x, u64 len, u64 inner, const u64* indices, u64 k,
                             T* out, u64 n) {
    for (u64 i = first_index(); i < n; i += grid_stride()) {
        u64 c = i % inner, r = i / inner;
        u64 o = r / k, slot = r % k;
        out[i] = x[(o * len + indices[slot]) * inner + c];
    }
}

// The adjoint: out[o, target, c] = +0 + the slices x[o, i, c] with indices[i] == target,
// added in increasing i. `order` lists the source slices grouped by target (stably, so
// increasing i inside a group), group `target` at order[starts[target]..starts[target+1]].
template <typename T>
__device__ void index_add(const T* x, u64 k, u64 inner, u64 size, const u64* order,
                          const u64* starts, T* out, u64 n) {
    for (u64 i = first_index(); i < n; i += grid_stride()) {
        u64 c = i % inner, r = i / inner;
        u64 o = r / size, target = r % size;
        T acc = (T)0;
        for (u64 q = starts[target]; q < starts[target + 1]; ++q) {
            acc = acc + x[(o * k + order[q]) * inner + c];
        }
        out[i] = acc;
    }
}

// One part of a concatenation: element i of the part (row-major, `width` per outer row)
// goes to column `column + i % width` of outer row `i / width` of out (`total` wide).
template <typename T>
__device__ void concat_part(const T* part, const Strided& ps, u64 width, u64 total, u64 column,
                            T* out, u64 n) {
    for (u64 i = first_index(); i < n; i += grid_stride()) {
        out[(i / width) * total + column + i % width] = part[strided_offset(ps, i)];
    }
}

#define COPY_KERNELS(T, S)                                                                 \
    extern "C" __global__ void copy_##S(const T* x, KERNEL_VIEW xs, T* out, u64 n) {       \
        copy_strided<T>(x, xs, out, n);                                                    \
    }                                                                                      \
    extern "C" __global__ void index_select_##S(const T* x, u64 len, u64 inner,            \
                                                const u64* indices, u64 k, T* out, u64 n) { \
        index_select<T>(x, len, inner, indices, k, out, n);                                \
    }                                                                                      \
    extern "C" __global__ void index_add_##S(const T* x, u64 k, u64 inner, u64 size,       \
                                             const u64* order, const u64* starts, T* out,  \
                                             u64 n) {                                      \
        index_add<T>(x, k, inner, size, order, starts, out, n);                            \
    }                                                                                      \
    extern "C" __global__ void concat_part_##S(const T* part, KERNEL_VIEW ps, u64 width,   \
                                               u64 total, u64 column, T* out, u64 n) {     \
        concat_part<T>(part, ps, width, total, column, out, n);                            \
    }

// The byte kernels of a captured step (capture.rs): a zeroing and an upload's copy from the
// staging buffer, as kernels so that a step's graph is kernel nodes only.
extern "C" __global__ void zero_bytes(unsigned char* out, u64 n) {
    for (u64 i = first_index(); i < n; i += grid_stride()) out[i] = 0;
}

extern "C" __global__ void copy_bytes(const unsigned char* x, unsigned char* out, u64 n) {
    for (u64 i = first_index(); i < n; i += grid_stride()) out[i] = x[i];
}

COPY_KERNELS(float, f32)
COPY_KERNELS(double, f64)
