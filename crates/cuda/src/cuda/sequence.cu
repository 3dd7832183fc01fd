// Ragged sequences in padded batches (rlgrad_core::kernels::sequence): pad and unpad as
// gather/scatter copies, and masked maps. (Masked and per-sequence sums are canonical sums:
// `sum_masked` and `sum_sequences` in reduce.cu.)
//
// Pad and unpad walk the padded array in units of W elements (a float4 or double2 when
// the feature count allows, W = 1 otherwise; buffers are 256-byte aligned and rows start
// at multiples of F, so the vectors are aligned): unit i is feature unit f of padded row
// r, which is step t of sequence b, valid when t < lengths[b], and then the unit of
// packed row offsets[b] + t. Pure copies, so the bits move unchanged.

// TO_PADDED: padded[i] = valid ? flat[packed] : 0 (pad); else flat[packed] = padded[i]
// where valid (unpad). `from` and `to` are flat and padded in the direction of the copy.
template <bool TO_PADDED, typename V>
__device__ void copy_units(const V* from, V* to, const u64* lengths, const u64* offsets,
                           u64 batch, u64 max_len, u64 units, int time_major, V zero, u64 n) {
    for (u64 i = first_index(); i < n; i += grid_stride()) {
        u64 row = i / units, f = i % units;
        u64 b = time_major ? row % batch : row / max_len;
        u64 t = time_major ? row / batch : row % max_len;
        bool valid = t < lengths[b];
        u64 packed = (offsets[b] + t) * units + f;
        if (TO_PADDED) {
            to[i] = valid ? from[packed] : zero;
        } else if (valid) {
            to[packed] = from[i];
        }
    }
}

template <bool TO_PADDED, typename T, typename V2, typename V4, bool HAS4>
__device__ void pad_any(const T* from, T* to, const u64* lengths, const u64* offsets,
                        u64 batch, u64 max_len, u64 features, int time_major) {
    u64 rows = batch * max_len;
    if constexpr (HAS4) {
        if (features % 4 == 0) {
            V4 zero;
            zero.x = zero.y = zero.z = zero.w = (T)0;
            copy_units<TO_PADDED, V4>((const V4*)from, (V4*)to, lengths, offsets, batch,
                                      max_len, features / 4, time_major, zero,
                                      rows * (features / 4));
            return;
        }
    }
    if (features % 2 == 0) {
        V2 zero;
        zero.x = zero.y = (T)0;
        copy_units<TO_PADDED, V2>((const V2*)from, (V2*)to, lengths, offsets, batch, max_len,
                                  features / 2, time_major, zero, rows * (features / 2));
    } else {
        copy_units<TO_PADDED, T>(from, to, lengths, offsets, batch, max_len, features,
                                 time_major, (T)0, rows * features);
    }
}

// out = map(x) at the valid values of a [B, T, F] array, +0 at padding. `kind`: 0 Fill(a),
// 1 PerSequence(values[b]), 2 Scale (x - a) * b, 3 Standardize (x - a) / b,
// 4 StandardizeBackward (grad[i] - a) / c - (x - b) * d.
template <typename T>
__device__ void masked_map(const T* x, const T* values, const u64* lengths, u64 row,
                           u64 features, int kind, T a, T b, T c, T d, T* out, u64 n) {
    for (u64 i = first_index(); i < n; i += grid_stride()) {
        u64 s = i / row, within = i % row;
        T value = (T)0;
        if (within < lengths[s] * features) {
            switch (kind) {
                case 0: value = a; break;
                case 1: value = values[s]; break;
                case 2: value = (x[i] - a) * b; break;
                case 3: value = (x[i] - a) / b; break;
                default: value = (values[i] - a) / c - (x[i] - b) * d; break;
            }
        }
        out[i] = value;
    }
}

#define SEQUENCE_KERNELS(T, S, V2, V4, HAS4)                                               \
    extern "C" __global__ void pad_##S(const T* flat, const u64* lengths,                  \
                                       const u64* offsets, u64 batch, u64 max_len,         \
                                       u64 features, int time_major, T* padded) {          \
        pad_any<true, T, V2, V4, HAS4>(flat, padded, lengths, offsets, batch, max_len,     \
                                       features, time_major);                              \
    }                                                                                      \
    extern "C" __global__ void unpad_##S(const T* padded, const u64* lengths,              \
                                         const u64* offsets, u64 batch, u64 max_len,       \
                                         u64 features, int time_major, T* flat) {          \
        pad_any<false, T, V2, V4, HAS4>(padded, flat, lengths, offsets, batch, max_len,    \
                                        features, time_major);                             \
    }                                                                                      \
    extern "C" __global__ void masked_map_##S(const T* x, const T* values,                 \
                                              const u64* lengths, u64 row, u64 features,   \
                                              int kind, T a, T b, T c, T d, T* out,        \
                                              u64 n) {                                     \
        masked_map<T>(x, values, lengths, row, features, kind, a, b, c, d, out, n);        \
    }

SEQUENCE_KERNELS(float, f32, float2, float4, true)
SEQUENCE_KERNELS(double, f64, double2, double2, false)
