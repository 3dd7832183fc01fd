// Ragged sequences in padded batches (rlgrad_core::kernels::sequence): pad and unpad as
// gather/scatter copies, and masked maps. (Masked and per-sequence sums are canonical sums:
// `sum_masked` and `sum_sequences` in reduce.cu.)
//
// Pad and unpad copy rows of F elements in units of W elements (a float4 or double2 when
// the feature count allows, a float2 or one element otherwise; buffers are 256-byte
// aligned and rows start at multiples of F, so the units are aligned). Step t of sequence
// b is packed row offsets[b] + t and padded row b * T + t (batch-major) or t * B + b
// (time-major): in units, flat[(offsets[b] + t) * U + u] and
// padded[base_b + t * stride + u].
//
// A block moves an item: `rows` consecutive steps of one sequence (about 1024 units,
// chosen by sequence.rs: 16 KB of float4, UNROLL 16-byte loads in flight per thread, 64
// KB per SM of the 4 blocks that 64 registers a thread leave resident, where about 30 KB
// covers HBM's latency). Unpad's
// items cover the valid steps only (an item past a sequence's length returns at once)
// and never read padding; pad's cover every step and write zeros past the length
// without reading. The item's sequence and first step come from one division per block,
// and a thread's place in a row from one division by U per launch: after that it steps
// by the block's width, with no division per element. The lengths and offsets stay on
// the device between calls (sequence.rs), so a launch uploads nothing.
#define UNROLL 4

// TO_PADDED: padded = valid ? flat : 0 (pad); else flat = padded where valid (unpad).
// `from` and `to` are flat and padded in the direction of the copy.
template <bool TO_PADDED, typename V>
__device__ void copy_rows(const V* from, V* to, const u64* lengths, const u64* offsets,
                          u64 batch, u64 max_len, u64 units, int time_major, u64 rows,
                          V zero) {
    u64 chunks = (max_len + rows - 1) / rows;
    u64 items = batch * chunks;
    // This thread's first unit of an item, and the block's step through it.
    u64 first_row = threadIdx.x / units, first_unit = threadIdx.x % units;
    u64 step_rows = blockDim.x / units, step_units = blockDim.x % units;
    u64 stride = time_major ? batch * units : units;
    for (u64 item = blockIdx.x; item < items; item += gridDim.x) {
        u64 b = item / chunks, t0 = (item - b * chunks) * rows;
        u64 length = lengths[b];
        u64 end = t0 + rows;
        if (end > (TO_PADDED ? max_len : length)) end = TO_PADDED ? max_len : length;
        u64 padded_base = time_major ? b * units : b * max_len * units;
        u64 flat_base = offsets[b] * units;
        u64 t = t0 + first_row, u = first_unit;
        while (t < end) {
            V v[UNROLL];
            u64 target[UNROLL];
            bool live[UNROLL];
#pragma unroll
            for (int k = 0; k < UNROLL; ++k) {
                live[k] = t < end;
                u64 padded = padded_base + t * stride + u, flat = flat_base + t * units + u;
                target[k] = TO_PADDED ? padded : flat;
                v[k] = live[k] && (!TO_PADDED || t < length) ? from[TO_PADDED ? flat : padded]
                                                             : zero;
                t += step_rows;
                u += step_units;
                if (u >= units) {
                    u -= units;
                    ++t;
                }
            }
#pragma unroll
            for (int k = 0; k < UNROLL; ++k) {
                if (live[k]) to[target[k]] = v[k];
            }
        }
    }
}

template <bool TO_PADDED, typename T, typename V2, typename V4, bool HAS4>
__device__ void pad_any(const T* from, T* to, const u64* lengths, const u64* offsets,
                        u64 batch, u64 max_len, u64 features, int time_major, u64 rows) {
    if constexpr (HAS4) {
        if (features % 4 == 0) {
            V4 zero;
            zero.x = zero.y = zero.z = zero.w = (T)0;
            copy_rows<TO_PADDED, V4>((const V4*)from, (V4*)to, lengths, offsets, batch,
                                     max_len, features / 4, time_major, rows, zero);
            return;
        }
    }
    if (features % 2 == 0) {
        V2 zero;
        zero.x = zero.y = (T)0;
        copy_rows<TO_PADDED, V2>((const V2*)from, (V2*)to, lengths, offsets, batch, max_len,
                                 features / 2, time_major, rows, zero);
    } else {
        copy_rows<TO_PADDED, T>(from, to, lengths, offsets, batch, max_len, features,
                                time_major, rows, (T)0);
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
                                       u64 features, int time_major, u64 rows,             \
                                       T* padded) {                                        \
        pad_any<true, T, V2, V4, HAS4>(flat, padded, lengths, offsets, batch, max_len,     \
                                       features, time_major, rows);                        \
    }                                                                                      \
    extern "C" __global__ void unpad_##S(const T* padded, const u64* lengths,              \
                                         const u64* offsets, u64 batch, u64 max_len,       \
                                         u64 features, int time_major, u64 rows,           \
                                         T* flat) {                                        \
        pad_any<false, T, V2, V4, HAS4>(padded, flat, lengths, offsets, batch, max_len,    \
                                        features, time_major, rows);                       \
    }                                                                                      \
    extern "C" __global__ void masked_map_##S(const T* x, const T* values,                 \
                                              const u64* lengths, u64 row, u64 features,   \
                                              int kind, T a, T b, T c, T d, T* out,        \
                                              u64 n) {                                     \
        masked_map<T>(x, values, lengths, row, features, kind, a, b, c, d, out, n);        \
    }

SEQUENCE_KERNELS(float, f32, float2, float4, true)
SEQUENCE_KERNELS(double, f64, double2, double2, false)
