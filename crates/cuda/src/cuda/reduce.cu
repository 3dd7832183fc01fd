// Canonical reductions (rlgrad_core::reduce): 64-element leaves, 16 lanes per leaf (element
// k of a leaf goes to lane k % 16, in increasing k, from -0), leaves combined lane by lane in
// the canonical pairwise tree, lanes folded by halving.
//
// The canonical tree over n leaves equals the balanced pairwise tree over n leaves padded
// with -0 to any power of two (-0 is the exact identity of addition, and a subtree of
// padding only ever appears as a right operand), so every level below is a balanced tree
// over a power-of-two group, padded with -0:
//
// - level 1 (`sum_leaves_*`): a block of 256 threads = 16 slots x 16 lanes reduces
//   LEAF_GROUP = 128 consecutive leaves of one segment; slot s holds leaves 8s..8s+7 and
//   reduces them as ((l0+l1)+(l2+l3))+((l4+l5)+(l6+l7)), then the slots pair up
//   (s, s+1), (s..s+1, s+2..s+3), ... through warp shuffles and shared memory. Each block
//   writes one 16-lane vector.
// - level 2.. (`sum_vectors`): the same over groups of 128 vectors, until one is left.
// - `sum_finish`: folds the lanes of each segment and divides (mean, variance).
//
// A segment is one reduction: the elements it sums come from a source (a strided column,
// a sequence's valid values, the packed valid values of a padded batch).

#define LANES 16
#define LEAF_LEN 64
#define PER_SLOT 8
#define SLOTS 16
#define GROUP (SLOTS * PER_SLOT)

// Balanced pairwise tree over the 8 values of a slot.
template <typename T> __device__ __forceinline__ T tree8(const T* v) {
    return ((v[0] + v[1]) + (v[2] + v[3])) + ((v[4] + v[5]) + (v[6] + v[7]));
}

// Balanced tree over the 16 slots of the block (thread = slot * 16 + lane); the result
// lands in the threads of slot 0, which write it.
template <typename T> __device__ __forceinline__ void tree_slots(T v, T* out) {
    __shared__ T warp_sums[8][LANES];
    // Slots 2w and 2w + 1 share warp w: the left half adds the right half's value.
    T right = __shfl_down_sync(0xffffffffu, v, LANES);
    v = v + right;
    u32 warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    if (lane < LANES) warp_sums[warp][lane] = v;
    __syncthreads();
    if (threadIdx.x < LANES) {
        T (*w)[LANES] = warp_sums;
        u32 j = threadIdx.x;
        out[j] = ((w[0][j] + w[1][j]) + (w[2][j] + w[3][j])) +
                 ((w[4][j] + w[5][j]) + (w[6][j] + w[7][j]));
    }
}

// Elements of a column of a dense [outer, len, inner] array: segment o is column
// (o / inner, o % inner); with `means`, each element maps to (x - means[o])^2 (the second
// pass of the variance).
template <typename T> struct ColumnSource {
    const T* x;
    const T* means;
    u64 len, inner;
    u64 base;
    T mean;
    __device__ void start(u64 o, u64) {
        base = (o / inner) * len * inner + o % inner;
        mean = means ? means[o] : (T)0;
    }
    __device__ u64 length(u64) const { return len; }
    __device__ T value(u64 t) const {
        T v = x[base + t * inner];
        return means ? (v - mean) * (v - mean) : v;
    }
};

// The valid values of sequence o of a [B, T, F] array: row o starts at o * row and holds
// lengths[o] * F of them.
template <typename T> struct SequenceSource {
    const T* x;
    const u64* lengths;
    u64 row, features;
    u64 base;
    __device__ void start(u64 o, u64) { base = o * row; }
    __device__ u64 length(u64 o) const { return lengths[o] * features; }
    __device__ T value(u64 t) const { return x[base + t]; }
};

// The valid values of a [B, T, F] array in packed order, one segment: packed value p of
// sequence s (offsets[s] <= p < offsets[s + 1], offsets scaled by F) sits at
// s * row + p - offsets[s]. `term`: 0 x, 1 (x - a)^2, 2 (x - a) * other.
template <typename T> struct MaskedSource {
    const T* x;
    const T* other;
    const u64* offsets;
    u64 batch, row, total;
    int term;
    T a;
    u64 s;
    __device__ void start(u64, u64 first) {
        // The last sequence whose offset is <= first: a binary search, then the values
        // of this thread are visited in increasing order, walking s forward.
        u64 lo = 0, hi = batch;
        while (lo < hi) {
            u64 mid = (lo + hi + 1) / 2;
            if (offsets[mid] <= first) lo = mid; else hi = mid - 1;
        }
        s = lo;
    }
    __device__ u64 length(u64) const { return total; }
    __device__ T value(u64 p) {
        while (offsets[s + 1] <= p) ++s;
        u64 i = s * row + (p - offsets[s]);
        T v = x[i];
        if (term == 0) return v;
        if (term == 1) return (v - a) * (v - a);
        return (v - a) * other[i];
    }
};

// Level 1: one block per group of 128 leaves of one segment.
template <typename T, typename Source>
__device__ void sum_leaves(Source src, u64 blocks_per_segment, T* out) {
    u64 o = blockIdx.x / blocks_per_segment, b = blockIdx.x % blocks_per_segment;
    u32 slot = threadIdx.x / LANES, lane = threadIdx.x % LANES;
    u64 first_leaf = b * GROUP + (u64)slot * PER_SLOT;
    src.start(o, first_leaf * LEAF_LEN + lane);
    u64 len = src.length(o);
    T leaves[PER_SLOT];
#pragma unroll
    for (int r = 0; r < PER_SLOT; ++r) {
        T acc = (T)-0.0;
        u64 e = (first_leaf + r) * LEAF_LEN + lane;
#pragma unroll
        for (int m = 0; m < LEAF_LEN / LANES; ++m) {
            if (e + m * LANES < len) acc = acc + src.value(e + m * LANES);
        }
        leaves[r] = acc;
    }
    tree_slots(tree8(leaves), out + (o * blocks_per_segment + b) * LANES);
}

// Level 2..: segment o's `count` vectors at in[(o * count + v) * 16 ..], in groups of 128.
template <typename T>
__device__ void sum_vectors(const T* in, u64 count, u64 blocks_per_segment, T* out) {
    u64 o = blockIdx.x / blocks_per_segment, b = blockIdx.x % blocks_per_segment;
    u32 slot = threadIdx.x / LANES, lane = threadIdx.x % LANES;
    u64 first = b * GROUP + (u64)slot * PER_SLOT;
    T vectors[PER_SLOT];
#pragma unroll
    for (int r = 0; r < PER_SLOT; ++r) {
        vectors[r] = first + r < count ? in[(o * count + first + r) * LANES + lane] : (T)-0.0;
    }
    tree_slots(tree8(vectors), out + (o * blocks_per_segment + b) * LANES);
}

template <int WIDTH, typename T> __device__ __forceinline__ void fold_lanes(T* l) {
#pragma unroll
    for (int j = 0; j < WIDTH; ++j) l[j] = l[j] + l[j + WIDTH];
}

// Folds each segment's lanes by halving (l[j] += l[j + 8], + 4, + 2, + 1) and divides by
// `divisor` when `divide`; an empty segment (lengths[o] == 0) sums to +0.
template <typename T>
__device__ void sum_finish(const T* in, u64 segments, int divide, T divisor,
                           const u64* lengths, T* out) {
    for (u64 o = first_index(); o < segments; o += grid_stride()) {
        T l[LANES];
#pragma unroll
        for (int j = 0; j < LANES; ++j) l[j] = in[o * LANES + j];
        // The widths are written out: a loop over them is not always unrolled for f64,
        // which leaves `l` in local memory.
        fold_lanes<8>(l);
        fold_lanes<4>(l);
        fold_lanes<2>(l);
        fold_lanes<1>(l);
        T value = divide ? l[0] / divisor : l[0];
        out[o] = (lengths && lengths[o] == 0) ? (T)0 : value;
    }
}

// Min and max: the result is the first NaN (by index) if there is one, else the first
// element equal to the extremum, which is what the Cpu's left-to-right tree of min2 / max2
// gives. Carrying the index makes the combination independent of the order of
// evaluation, so any tree gives those bits. EMPTY marks a thread without elements.
#define EMPTY 0xffffffffffffffffull

template <typename T>
__device__ __forceinline__ void pick(bool is_max, T& v, u64& i, T w, u64 k) {
    if (k == EMPTY) return;
    bool take;
    if (i == EMPTY) take = true;
    else if (is_nan(v) && is_nan(w)) take = k < i;
    else if (is_nan(v)) take = false;
    else if (is_nan(w)) take = true;
    else if (is_max ? w > v : w < v) take = true;
    else if (is_max ? w < v : w > v) take = false;
    else take = k < i;
    if (take) {
        v = w;
        i = k;
    }
}

// One level: block b of segment o covers elements [b * 4096, (b + 1) * 4096) of the
// segment. Level 1 reads column elements of a dense [outer, len, inner] array
// (`in_index` null); later levels read (value, index) pairs, `len` per segment. Writes
// one pair per block, or only the value when `out_index` is null (the last level).
template <typename T>
__device__ void extremum(int is_max, const T* in, const u64* in_index, u64 len, u64 inner,
                         u64 blocks_per_segment, T* out, u64* out_index) {
    __shared__ T values[BLOCK];
    __shared__ u64 indices[BLOCK];
    u64 o = blockIdx.x / blocks_per_segment, b = blockIdx.x % blocks_per_segment;
    u64 base = in_index ? o * len : (o / inner) * len * inner + o % inner;
    u64 step = in_index ? 1 : inner;
    T v = (T)0;
    u64 i = EMPTY;
    for (u64 t = b * BLOCK * 16 + threadIdx.x; t < len && t < (b + 1) * BLOCK * 16;
         t += BLOCK) {
        T w = in[base + t * step];
        pick(is_max != 0, v, i, w, in_index ? in_index[base + t] : t);
    }
    values[threadIdx.x] = v;
    indices[threadIdx.x] = i;
    __syncthreads();
    for (u32 width = BLOCK / 2; width > 0; width /= 2) {
        if (threadIdx.x < width) {
            T w = values[threadIdx.x + width];
            pick(is_max != 0, v, i, w, indices[threadIdx.x + width]);
            values[threadIdx.x] = v;
            indices[threadIdx.x] = i;
        }
        __syncthreads();
    }
    if (threadIdx.x == 0) {
        u64 slot = o * blocks_per_segment + b;
        out[slot] = v;
        if (out_index) out_index[slot] = i;
    }
}

#define REDUCE_KERNELS(T, S)                                                               \
    extern "C" __global__ void sum_columns_##S(const T* x, const T* means, u64 len,        \
                                               u64 inner, u64 blocks_per_segment, T* out) { \
        ColumnSource<T> src = {x, means, len, inner, 0, (T)0};                             \
        sum_leaves<T>(src, blocks_per_segment, out);                                       \
    }                                                                                      \
    extern "C" __global__ void sum_sequences_##S(const T* x, const u64* lengths, u64 row,   \
                                                 u64 features, u64 blocks_per_segment,     \
                                                 T* out) {                                 \
        SequenceSource<T> src = {x, lengths, row, features, 0};                            \
        sum_leaves<T>(src, blocks_per_segment, out);                                       \
    }                                                                                      \
    extern "C" __global__ void sum_masked_##S(const T* x, const T* other,                  \
                                              const u64* offsets, u64 batch, u64 row,       \
                                              u64 total, int term, T a,                    \
                                              u64 blocks_per_segment, T* out) {            \
        MaskedSource<T> src = {x, other, offsets, batch, row, total, term, a, 0};          \
        sum_leaves<T>(src, blocks_per_segment, out);                                       \
    }                                                                                      \
    extern "C" __global__ void sum_vectors_##S(const T* in, u64 count,                     \
                                               u64 blocks_per_segment, T* out) {           \
        sum_vectors<T>(in, count, blocks_per_segment, out);                                \
    }                                                                                      \
    extern "C" __global__ void sum_finish_##S(const T* in, u64 segments, int divide,       \
                                              T divisor, const u64* lengths, T* out) {     \
        sum_finish<T>(in, segments, divide, divisor, lengths, out);                        \
    }                                                                                      \
    extern "C" __global__ void extremum_##S(int is_max, const T* in, const u64* in_index,  \
                                            u64 len, u64 inner, u64 blocks_per_segment,    \
                                            T* out, u64* out_index) {                      \
        extremum<T>(is_max, in, in_index, len, inner, blocks_per_segment, out, out_index); \
    }

REDUCE_KERNELS(float, f32)
REDUCE_KERNELS(double, f64)
