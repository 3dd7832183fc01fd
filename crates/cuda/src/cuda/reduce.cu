// Canonical reductions (rlgrad_core::reduce): 64-element leaves, 16 lanes per leaf (element
// k of a leaf goes to lane k % 16, in increasing k, from -0), leaves combined lane by lane in
// the canonical pairwise tree, lanes folded by halving.
//
// The canonical tree over n leaves equals the balanced pairwise tree over n leaves padded
// with -0 to any power of two (-0 is the exact identity of addition, and a subtree of
// padding only ever appears as a right operand), so every piece below is a balanced tree
// over an aligned power-of-two group, padded with -0, and pieces combine into the same tree.
//
// The plain sum of one contiguous run (`sum_contiguous`: a whole tensor, its mean, the
// second pass of its variance) is one launch of a persistent grid:
//
// - a group is 64 KB of leaves (256 f32 leaves, 128 f64 leaves); a thread owns W lanes
//   (a float4 or double2: W = 4 or 2) of 4 consecutive leaves and loads them with 16
//   16-byte loads issued together (256 bytes in flight per thread, 64 KB per block);
//   the block's slots (the 16 / W threads of one set of leaves) pair up through shuffles
//   and the 8 warps in shared memory, one 16-lane vector per group.
// - The grid holds as many blocks as the GPU keeps resident (2 or 3 per SM of 256 threads:
//   132 SMs x 2 x 64 KB = 17 MB in flight on an H200, where about 4 MB covers HBM3e's
//   latency at 4.8 TB/s), and block b walks groups b, b + grid, ...: the 64 groups of a
//   node below are read in the same round, so a node is complete soon after its round.
// - Groups combine in a tree of fan-in 64 (aligned subtrees of 64 groups, then 64 of
//   those, ...): a block that writes a vector takes a ticket of its node, and the block
//   that takes the last ticket combines the node's (up to) 64 vectors and climbs; whoever
//   completes the root folds the lanes. The combining happens while other blocks still
//   stream, and the last block reads at most 64 vectors (4 KB): one launch, no tail of
//   dependent launches. The ticket's last taker resets it to 0 (no other block touches
//   it again in this launch), so the next launch, or a CUDA graph's replay, finds every
//   ticket at 0 (the module's globals start at 0 when it loads).
// - A view that is not 16-byte aligned (an offset) loads the same lanes element by
//   element; the last, partial group checks every element's index (-0 past the end).
//
// Other sums (columns, sequences, the packed values of a padded batch) run in levels:
// - level 1 (`sum_leaves_*`): a block of 256 threads = 16 slots x 16 lanes reduces
//   LEAF_GROUP = 128 consecutive leaves of one segment; slot s holds leaves 8s..8s+7 and
//   reduces them as ((l0+l1)+(l2+l3))+((l4+l5)+(l6+l7)), then the slots pair up
//   (s, s+1), (s..s+1, s+2..s+3), ... through warp shuffles and shared memory. Each block
//   writes one 16-lane vector.
// - level 2.. (`sum_vectors`): the same over groups of 128 vectors, until one is left.
// - `sum_finish`: folds the lanes of each segment and divides (mean, variance).
// - `sum_*_once`: level 1 and sum_finish in one launch, for segments that one block holds
//   (at most 8192 elements).
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

// Balanced tree over the slots of the block, one 16-lane vector each: thread
// slot * (16 / WIDTH) + q holds lanes q * WIDTH .. + WIDTH - 1 of its slot. Slots adjacent in
// a warp pair up through shuffles, the 8 warps in shared memory; lane j lands in thread j.
// Every thread of the block calls it.
template <int WIDTH, typename T> __device__ __forceinline__ T tree_block(T (&v)[WIDTH]) {
    __shared__ T warp_sums[8][LANES];
#pragma unroll
    for (int delta = LANES / WIDTH; delta < 32; delta *= 2) {
#pragma unroll
        for (int k = 0; k < WIDTH; ++k) {
            v[k] = v[k] + __shfl_down_sync(0xffffffffu, v[k], delta);
        }
    }
    u32 warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    if (lane < LANES / WIDTH) {
#pragma unroll
        for (int k = 0; k < WIDTH; ++k) warp_sums[warp][lane * WIDTH + k] = v[k];
    }
    __syncthreads();
    T sum = (T)-0.0;
    if (threadIdx.x < LANES) {
        T w[8];
#pragma unroll
        for (int i = 0; i < 8; ++i) w[i] = warp_sums[i][threadIdx.x];
        sum = tree8(w);
    }
    // The next call rewrites warp_sums.
    __syncthreads();
    return sum;
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
// sequence s (offsets[s] * F <= p < offsets[s + 1] * F) sits at s * row + p - offsets[s] * F.
// `term`: 0 x, 1 (x - a)^2, 2 (x - a) * other.
template <typename T> struct MaskedSource {
    const T* x;
    const T* other;
    const u64* offsets;
    u64 features, batch, row, total;
    int term;
    T a;
    u64 s;
    __device__ void start(u64, u64 first) {
        // The last sequence whose offset is <= first: a binary search, then the values
        // of this thread are visited in increasing order, walking s forward.
        u64 lo = 0, hi = batch;
        while (lo < hi) {
            u64 mid = (lo + hi + 1) / 2;
            if (offsets[mid] * features <= first) lo = mid; else hi = mid - 1;
        }
        s = lo;
    }
    __device__ u64 length(u64) const { return total; }
    __device__ T value(u64 p) {
        while (offsets[s + 1] * features <= p) ++s;
        u64 i = s * row + (p - offsets[s] * features);
        T v = x[i];
        if (term == 0) return v;
        if (term == 1) return (v - a) * (v - a);
        return (v - a) * other[i];
    }
};

template <typename T> struct Finish;
template <typename T> __device__ __forceinline__ T finished(T* l, u64 o, const Finish<T>& f);

// What sum_finish does to a segment's vector, for level 1 when one block holds the whole
// segment (`sum_*_once`): the lanes folded, divided when `divide`, +0 where lengths[o] is 0.
template <typename T> struct Finish {
    int divide;
    T divisor;
    const u64* lengths;
    T* out;
};

// Level 1: one block per group of 128 leaves of one segment. With FINISH (one block per
// segment), the block also folds its vector's lanes as sum_finish would and writes the
// segment's result: one launch instead of two.
template <typename T, typename Source, bool FINISH = false>
__device__ void sum_leaves(Source src, u64 blocks_per_segment, T* out, Finish<T> finish = {}) {
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
    T v[1] = {tree8(leaves)};
    T sum = tree_block(v);
    if (FINISH) {
        __shared__ T lanes[LANES];
        if (threadIdx.x < LANES) lanes[threadIdx.x] = sum;
        __syncthreads();
        if (threadIdx.x == 0) {
            T l[LANES];
#pragma unroll
            for (int j = 0; j < LANES; ++j) l[j] = lanes[j];
            finish.out[o] = finished(l, o, finish);
        }
    } else if (threadIdx.x < LANES) {
        out[(o * blocks_per_segment + b) * LANES + threadIdx.x] = sum;
    }
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
    T v[1] = {tree8(vectors)};
    T sum = tree_block(v);
    if (threadIdx.x < LANES) out[(o * blocks_per_segment + b) * LANES + threadIdx.x] = sum;
}

template <int WIDTH, typename T> __device__ __forceinline__ void fold_lanes(T* l) {
#pragma unroll
    for (int j = 0; j < WIDTH; ++j) l[j] = l[j] + l[j + WIDTH];
}

// The lanes folded by halving (l[j] += l[j + 8], + 4, + 2, + 1): the sum. The widths are
// written out: a loop over them is not always unrolled for f64, which leaves `l` in local
// memory.
template <typename T> __device__ __forceinline__ T fold16(T* l) {
    fold_lanes<8>(l);
    fold_lanes<4>(l);
    fold_lanes<2>(l);
    fold_lanes<1>(l);
    return l[0];
}

// Segment o's result from its vector's lanes `l`: folded, divided by `divisor` when
// `divide`; an empty segment (lengths[o] == 0) sums to +0.
template <typename T> __device__ __forceinline__ T finished(T* l, u64 o, const Finish<T>& f) {
    T sum = fold16(l);
    T value = f.divide ? sum / f.divisor : sum;
    return (f.lengths && f.lengths[o] == 0) ? (T)0 : value;
}

template <typename T>
__device__ void sum_finish(const T* in, u64 segments, int divide, T divisor,
                           const u64* lengths, T* out) {
    Finish<T> f = {divide, divisor, lengths, out};
    for (u64 o = first_index(); o < segments; o += grid_stride()) {
        T l[LANES];
#pragma unroll
        for (int j = 0; j < LANES; ++j) l[j] = in[o * LANES + j];
        out[o] = finished(l, o, f);
    }
}

template <typename T> __device__ __forceinline__ T tree4(const T* v) {
    return (v[0] + v[1]) + (v[2] + v[3]);
}

// The 16-byte vector of each element type.
template <typename T> struct Wide;
template <> struct Wide<float> {
    typedef float4 V;
    static __device__ __forceinline__ void unpack(V v, float* c) {
        c[0] = v.x;
        c[1] = v.y;
        c[2] = v.z;
        c[3] = v.w;
    }
};
template <> struct Wide<double> {
    typedef double2 V;
    static __device__ __forceinline__ void unpack(V v, double* c) {
        c[0] = v.x;
        c[1] = v.y;
    }
};

// The shape of `sum_contiguous`'s groups: a thread owns W lanes of LEAVES_PER_THREAD
// consecutive leaves, QUADS threads make a slot (16 lanes), BLOCK_SLOTS slots a block.
#define LEAVES_PER_THREAD 4
template <typename T> struct Contiguous {
    static constexpr int W = 16 / sizeof(T);
    static constexpr int QUADS = LANES / W;
    static constexpr int BLOCK_SLOTS = BLOCK / QUADS;
    static constexpr u64 GROUP_LEN = (u64)BLOCK_SLOTS * LEAVES_PER_THREAD * LEAF_LEN;
};

// The combining tree's fan-in (tree_node's 16 slots of 4), and its tickets: one per node
// of every level above the groups, at most 2^17 (2^22 groups, 2^36 f32 elements: more
// than a GPU holds), zero when the module loads and after every launch.
#define FAN_IN 64
#define SUM_TICKETS (1 << 17)
__device__ u32 sum_tickets[SUM_TICKETS];

// Element x[i] of the run as summed: (x - mean)^2 when `square` (the variance's second pass).
template <typename T> __device__ __forceinline__ T term(T v, bool square, T mean) {
    return square ? (v - mean) * (v - mean) : v;
}

// The 16-lane vector of group g of the run x[0..n) (lane j in thread j). CHECKED: the
// last group, where elements at or past n are -0 (the lane's chain skips them).
template <typename T, bool ALIGNED, bool CHECKED>
__device__ T group_vector(const T* x, u64 n, bool square, T mean, u64 g) {
    typedef Contiguous<T> C;
    u32 slot = threadIdx.x / C::QUADS, q = threadIdx.x % C::QUADS;
    u64 first = g * C::GROUP_LEN + (u64)slot * LEAVES_PER_THREAD * LEAF_LEN + q * C::W;
    // Every load of the thread first, so that all 16 are in flight together.
    T e[LEAVES_PER_THREAD][LEAF_LEN / LANES][C::W];
#pragma unroll
    for (int r = 0; r < LEAVES_PER_THREAD; ++r) {
#pragma unroll
        for (int m = 0; m < LEAF_LEN / LANES; ++m) {
            u64 i = first + r * LEAF_LEN + m * LANES;
            if (CHECKED) {
#pragma unroll
                for (int k = 0; k < C::W; ++k) {
                    e[r][m][k] = i + k < n ? term(x[i + k], square, mean) : (T)-0.0;
                }
            } else if (ALIGNED) {
                Wide<T>::unpack(*(const typename Wide<T>::V*)(x + i), e[r][m]);
            } else {
#pragma unroll
                for (int k = 0; k < C::W; ++k) e[r][m][k] = x[i + k];
            }
        }
    }
    T v[C::W];
#pragma unroll
    for (int k = 0; k < C::W; ++k) {
        T leaves[LEAVES_PER_THREAD];
#pragma unroll
        for (int r = 0; r < LEAVES_PER_THREAD; ++r) {
            T acc = (T)-0.0;
#pragma unroll
            for (int m = 0; m < LEAF_LEN / LANES; ++m) {
                acc = acc + (CHECKED ? e[r][m][k] : term(e[r][m][k], square, mean));
            }
            leaves[r] = acc;
        }
        v[k] = tree4(leaves);
    }
    return tree_block(v);
}

// The balanced tree over a node's `children` vectors at `in` (up to FAN_IN; -0 past them),
// read through L2, where other blocks wrote them. Lane j lands in thread j.
template <typename T> __device__ T tree_node(const T* in, u64 children) {
    u32 slot = threadIdx.x / LANES, lane = threadIdx.x % LANES;
    T c[4];
#pragma unroll
    for (int r = 0; r < 4; ++r) {
        u64 i = (u64)slot * 4 + r;
        c[r] = i < children ? __ldcg(&in[i * LANES + lane]) : (T)-0.0;
    }
    T v[1] = {tree4(c)};
    return tree_block(v);
}

// The canonical sum of x[0..n) (n > 0), of (x - means[0])^2 when `means`, divided by
// `divisor` when `divide`, into out[0]. `partials`: the vectors of every level of the
// combining tree (groups, then their nodes, ...), 16 lanes each.
template <typename T, bool ALIGNED>
__device__ void sum_run(const T* x, u64 n, const T* means, int divide, T divisor,
                        T* partials, T* out) {
    typedef Contiguous<T> C;
    __shared__ int last;
    __shared__ T root[LANES];
    bool square = means != nullptr;
    T mean = square ? means[0] : (T)0;
    u64 groups = (n + C::GROUP_LEN - 1) / C::GROUP_LEN;
    for (u64 g = blockIdx.x; g < groups; g += gridDim.x) {
        T v = (g + 1) * C::GROUP_LEN <= n
                  ? group_vector<T, ALIGNED, false>(x, n, square, mean, g)
                  : group_vector<T, ALIGNED, true>(x, n, square, mean, g);
        // Climb while this block completes nodes: `count` vectors on this level.
        u64 index = g, count = groups;
        T* level = partials;
        u32* tickets = sum_tickets;
        while (count > 1) {
            u64 node = index / FAN_IN;
            u64 children = count - node * FAN_IN < FAN_IN ? count - node * FAN_IN : FAN_IN;
            if (threadIdx.x < LANES) {
                __stcg(&level[index * LANES + threadIdx.x], v);
                // The vector is visible to every block before the ticket is taken.
                __threadfence();
            }
            __syncthreads();
            if (threadIdx.x == 0) {
                last = atomicAdd(&tickets[node], 1u) == children - 1;
                if (last) tickets[node] = 0;
            }
            __syncthreads();
            if (!last) break;
            __threadfence();
            v = tree_node(level + node * FAN_IN * LANES, children);
            level += count * LANES;
            tickets += (count + FAN_IN - 1) / FAN_IN;
            index = node;
            count = (count + FAN_IN - 1) / FAN_IN;
        }
        if (count == 1) {
            if (threadIdx.x < LANES) root[threadIdx.x] = v;
            __syncthreads();
            if (threadIdx.x == 0) {
                T l[LANES];
#pragma unroll
                for (int j = 0; j < LANES; ++j) l[j] = root[j];
                T sum = fold16(l);
                out[0] = divide ? sum / divisor : sum;
            }
        }
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
                                              const u64* offsets, u64 features, u64 batch,  \
                                              u64 row, u64 total, int term, T a,           \
                                              u64 blocks_per_segment, T* out) {            \
        MaskedSource<T> src = {x,   other, offsets, features, batch,                      \
                               row, total, term,    a,        0};                         \
        sum_leaves<T>(src, blocks_per_segment, out);                                       \
    }                                                                                      \
    extern "C" __global__ void sum_columns_once_##S(const T* x, const T* means, u64 len,   \
                                                    u64 inner, int divide, T divisor,      \
                                                    const u64* empty, T* out) {            \
        ColumnSource<T> src = {x, means, len, inner, 0, (T)0};                             \
        sum_leaves<T, ColumnSource<T>, true>(src, 1, nullptr,                              \
                                             Finish<T>{divide, divisor, empty, out});      \
    }                                                                                      \
    extern "C" __global__ void sum_sequences_once_##S(const T* x, const u64* lengths,       \
                                                      u64 row, u64 features, int divide,   \
                                                      T divisor, const u64* empty,         \
                                                      T* out) {                            \
        SequenceSource<T> src = {x, lengths, row, features, 0};                            \
        sum_leaves<T, SequenceSource<T>, true>(src, 1, nullptr,                            \
                                               Finish<T>{divide, divisor, empty, out});    \
    }                                                                                      \
    extern "C" __global__ void sum_masked_once_##S(                                        \
        const T* x, const T* other, const u64* offsets, u64 features, u64 batch, u64 row,  \
        u64 total, int term, T a, int divide, T divisor, const u64* empty, T* out) {       \
        MaskedSource<T> src = {x,   other, offsets, features, batch,                      \
                               row, total, term,    a,        0};                         \
        sum_leaves<T, MaskedSource<T>, true>(src, 1, nullptr,                              \
                                             Finish<T>{divide, divisor, empty, out});      \
    }                                                                                      \
    extern "C" __global__ void __launch_bounds__(BLOCK)                                    \
        sum_contiguous_##S(const T* x, u64 n, const T* means, int divide, T divisor,       \
                           T* partials, T* out) {                                          \
        if ((u64)x % 16 == 0) {                                                            \
            sum_run<T, true>(x, n, means, divide, divisor, partials, out);                 \
        } else {                                                                           \
            sum_run<T, false>(x, n, means, divide, divisor, partials, out);                \
        }                                                                                  \
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
