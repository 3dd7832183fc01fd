// Matrix multiplication in the canonical order of rlgrad_core::kernels::MatmulKernel:
// every output is a chain of fused multiply-adds over k in increasing order, starting
// from -0: acc = fma(a[i, p], b[p, j], acc) for p = 0, 1, ..., k - 1.
//
// A tiled GEMM reproduces it bit for bit: a block computes a tile of the output, each
// thread keeping a sub-tile in registers; tiles of A and B are staged in shared memory,
// and each thread walks p through every tile in increasing order, one fma per output per
// p. No split over k, no reordering, and the loop over a tile stops at k (a zero-padded
// step would be one more fma, turning an acc of -0 into +0): the tiling only decides who
// computes an output, never how.
//
// Two kernels do it. `matmul` reads any strided view (transposes and broadcast batches
// cost nothing) one element at a time: 64 x 64 tiles, 4 x 4 outputs per thread, one
// shared buffer. `matmul_<tile>_<layout>` is the fast path for operands whose rows (or
// columns) are dense and 16-byte aligned: 16-byte loads of the next k-tile into
// registers while the current one is multiplied out of the other shared buffer (double
// buffering, one barrier per k-tile), and larger or smaller tiles by the output's size
// (matmul.rs chooses). `matmul_bias_<tile>_nn` is the same kernel for a linear layer
// (MatmulKernel::matmul_bias): each output's chain, then + bias[col], then the
// activation, in the store, so the product is written once instead of three times.

// ---- The strided kernel ----------------------------------------------------------------

#define TILE_M 64
#define TILE_N 64
#define TILE_K 16
#define SUB 4

template <typename T>
__device__ void matmul(const T* a, const Strided& a_batch, u64 a_rs, u64 a_cs, const T* b,
                       const Strided& b_batch, u64 b_rs, u64 b_cs, T* c, u64 m, u64 n, u64 k,
                       u64 batches) {
    __shared__ T as[TILE_K][TILE_M];
    __shared__ T bs[TILE_K][TILE_N];
    u32 tid = threadIdx.x;
    u32 ty = tid / 16, tx = tid % 16;
    u64 row0 = (u64)blockIdx.y * TILE_M, col0 = (u64)blockIdx.x * TILE_N;
    for (u64 batch = blockIdx.z; batch < batches; batch += gridDim.z) {
        u64 a_off = strided_offset(a_batch, batch), b_off = strided_offset(b_batch, batch);
        T acc[SUB][SUB];
#pragma unroll
        for (int i = 0; i < SUB; ++i)
#pragma unroll
            for (int j = 0; j < SUB; ++j) acc[i][j] = (T)-0.0;
        for (u64 k0 = 0; k0 < k; k0 += TILE_K) {
            // 1024 elements per tile, 4 per thread.
#pragma unroll
            for (int r = 0; r < 4; ++r) {
                u32 e = tid + r * BLOCK;
                u32 p = e / TILE_M, i = e % TILE_M;
                u64 row = row0 + i, kk = k0 + p;
                as[p][i] = (row < m && kk < k) ? a[a_off + row * a_rs + kk * a_cs] : (T)0;
                u32 q = e / TILE_N, j = e % TILE_N;
                u64 col = col0 + j, kq = k0 + q;
                bs[q][j] = (col < n && kq < k) ? b[b_off + kq * b_rs + col * b_cs] : (T)0;
            }
            __syncthreads();
            u64 depth = k - k0 < TILE_K ? k - k0 : TILE_K;
            for (u32 p = 0; p < depth; ++p) {
                T av[SUB], bv[SUB];
#pragma unroll
                for (int i = 0; i < SUB; ++i) av[i] = as[p][ty * SUB + i];
#pragma unroll
                for (int j = 0; j < SUB; ++j) bv[j] = bs[p][tx * SUB + j];
#pragma unroll
                for (int i = 0; i < SUB; ++i)
#pragma unroll
                    for (int j = 0; j < SUB; ++j) acc[i][j] = rl_fma_t(av[i], bv[j], acc[i][j]);
            }
            __syncthreads();
        }
#pragma unroll
        for (int i = 0; i < SUB; ++i) {
            u64 row = row0 + ty * SUB + i;
#pragma unroll
            for (int j = 0; j < SUB; ++j) {
                u64 col = col0 + tx * SUB + j;
                if (row < m && col < n) c[(batch * m + row) * n + col] = acc[i][j];
            }
        }
    }
}

#define MATMUL_KERNELS(T, S)                                                               \
    extern "C" __global__ void matmul_##S(const T* a, KERNEL_VIEW a_batch, u64 a_rs, u64 a_cs, \
                                          const T* b, KERNEL_VIEW b_batch, u64 b_rs, u64 b_cs, \
                                          T* c, u64 m, u64 n, u64 k, u64 batches) {        \
        matmul<T>(a, a_batch, a_rs, a_cs, b, b_batch, b_rs, b_cs, c, m, n, k, batches);    \
    }


MATMUL_KERNELS(float, f32)
MATMUL_KERNELS(double, f64)

// ---- The fast path --------------------------------------------------------------------

// N elements moved as one 16-, 8- or 4-byte access (ld.v4.f32, ld.v2.f64, ...).
template <typename T, int N> struct alignas(sizeof(T) * N) Pack {
    T v[N];
};

template <typename T, int N> __device__ __forceinline__ Pack<T, N> pack_at(const T* p) {
    return *reinterpret_cast<const Pack<T, N>*>(p);
}

template <typename T, int N> __device__ __forceinline__ Pack<T, N> zero_pack() {
    Pack<T, N> z;
#pragma unroll
    for (int q = 0; q < N; ++q) z.v[q] = (T)0;
    return z;
}

// A tile configuration: BM x BN outputs per block, BK steps of k per shared buffer, TM x
// TN outputs per thread. An operand is "k-major" when its elements are dense along k
// (A row-major, B stored transposed), else dense along m (A stored transposed) or n (B
// row-major); `ld` is the stride of its other dimension. matmul.rs launches a layout
// only when the dense dimension's length, `ld`, the view's offset and every batch
// stride are multiples of VEC, so a 16-byte vector is either wholly inside the matrix
// or wholly outside it.
template <typename T, int BM_, int BN_, int BK_, int TM_, int TN_, int MIN_BLOCKS_,
          int STEP_UNROLL_>
struct Tiling {
    static constexpr int BM = BM_, BN = BN_, BK = BK_, TM = TM_, TN = TN_;
    static constexpr int MIN_BLOCKS = MIN_BLOCKS_, STEP_UNROLL = STEP_UNROLL_;
    static constexpr int THREADS = (BM / TM) * (BN / TN);
    static constexpr int VEC = 16 / (int)sizeof(T);
    // A thread's rows are TM / FM groups of FM neighbours, the groups BM / (TM / FM)
    // apart (likewise columns): a warp's fragment loads are then whole, conflict-free
    // shared-memory vectors.
    static constexpr int FM = TM < VEC ? TM : VEC;
    static constexpr int FN = TN < VEC ? TN : VEC;
    static constexpr int GM = TM / FM, GN = TN / FN;
    static constexpr int SPAN_M = BM / GM, SPAN_N = BN / GN;
};

// One operand's way from global memory into the shared k-tiles. Shared tiles are k-major
// (p, then i or j) so that a step's fragments are vectors; a k-major operand is
// transposed on its way in, into rows padded by VEC that keep those scalar stores off
// each other's banks. Each thread moves the same vectors of every k-tile: their
// addresses advance by one k-tile per load, and whether they lie inside the matrix is
// decided once, but for the k tail. Outside, zeros (never used in a product: the step
// loop stops at k).
template <typename C, bool K_MAJOR, int EDGE, typename T> struct Stager {
    static constexpr int ROW = EDGE + (K_MAJOR ? C::VEC : 0);
    static constexpr int VECTORS = EDGE * C::BK / C::VEC;
    static constexpr int PER_THREAD = (VECTORS + C::THREADS - 1) / C::THREADS;
    // Vectors per k-major row (along p), or per row of p (along i or j).
    static constexpr int ACROSS = K_MAJOR ? C::BK / C::VEC : EDGE / C::VEC;

    const T* src[PER_THREAD];
    u64 step;
    u32 p_of[PER_THREAD];
    bool inside[PER_THREAD];
    Pack<T, C::VEC> regs[PER_THREAD];

    // `base` is the matrix, `ld` the stride of its other dimension, e0 the first row (or
    // column) of the block's tile and `extent` the matrix's number of them.
    __device__ __forceinline__ Stager(const T* base, u64 ld, u64 e0, u64 extent) {
        step = K_MAJOR ? (u64)C::BK : C::BK * ld;
#pragma unroll
        for (int r = 0; r < PER_THREAD; ++r) {
            int v = (int)threadIdx.x + r * C::THREADS;
            u32 outer = (u32)(v / ACROSS), inner = (u32)(v % ACROSS) * C::VEC;
            u64 e = e0 + (K_MAJOR ? outer : inner);
            p_of[r] = K_MAJOR ? inner : outer;
            inside[r] = (VECTORS % C::THREADS == 0 || v < VECTORS) && e < extent;
            src[r] = base + (K_MAJOR ? e * ld + p_of[r] : p_of[r] * ld + e);
        }
    }

    // The k-tile at k0 (each one in turn, from 0) into registers.
    __device__ __forceinline__ void load(u32 k0, u32 k) {
#pragma unroll
        for (int r = 0; r < PER_THREAD; ++r) {
            regs[r] = inside[r] && k0 + p_of[r] < k ? pack_at<T, C::VEC>(src[r])
                                                    : zero_pack<T, C::VEC>();
            src[r] += step;
        }
    }

    // The registers into a shared k-tile.
    __device__ __forceinline__ void store(T* tile) const {
#pragma unroll
        for (int r = 0; r < PER_THREAD; ++r) {
            int v = (int)threadIdx.x + r * C::THREADS;
            if (VECTORS % C::THREADS != 0 && v >= VECTORS) continue;
            int outer = v / ACROSS, inner = (v % ACROSS) * C::VEC;
            if (K_MAJOR) {
#pragma unroll
                for (int q = 0; q < C::VEC; ++q) tile[(inner + q) * ROW + outer] = regs[r].v[q];
            } else {
                *reinterpret_cast<Pack<T, C::VEC>*>(&tile[outer * ROW + inner]) = regs[r];
            }
        }
    }
};

// The steps p < depth of one shared k-tile, in increasing p: one fma per output per step.
// Called with depth = BK for every k-tile but the last, which the compiler then unrolls
// by STEP_UNROLL.
template <typename C, int ROW_A, int ROW_B, typename T>
__device__ __forceinline__ void multiply_tile(T (&acc)[C::TM][C::TN], const T* as, const T* bs,
                                              int ty, int tx, int depth) {
#pragma unroll C::STEP_UNROLL
    for (int p = 0; p < depth; ++p) {
        Pack<T, C::FM> af[C::GM];
        Pack<T, C::FN> bf[C::GN];
#pragma unroll
        for (int g = 0; g < C::GM; ++g)
            af[g] = pack_at<T, C::FM>(&as[p * ROW_A + ty * C::FM + g * C::SPAN_M]);
#pragma unroll
        for (int g = 0; g < C::GN; ++g)
            bf[g] = pack_at<T, C::FN>(&bs[p * ROW_B + tx * C::FN + g * C::SPAN_N]);
#pragma unroll
        for (int i = 0; i < C::TM; ++i)
#pragma unroll
            for (int j = 0; j < C::TN; ++j)
                acc[i][j] = rl_fma_t(af[i / C::FM].v[i % C::FM], bf[j / C::FN].v[j % C::FN],
                                     acc[i][j]);
    }
}

// A linear layer's epilogue: `x + bias`, then the activation `act` (matmul.rs's codes:
// 0 none, 1 relu, 2 tanh, 3 sigmoid, 4 sqrt, the activations whose gradient comes from
// their output), each the formula of UnaryOp::apply and BinaryOp::Add. `act` is the
// same for every thread (a uniform branch), so one kernel serves every activation.
template <typename T> __device__ __forceinline__ T linear_epilogue(T x, T bias, int act) {
    T y = x + bias;
    switch (act) {
        case 1: return (y > (T)0 || is_nan(y)) ? y : (T)0;
        case 2: return rl_tanh_t(y);
        case 3: return rl_sigmoid_t(y);
        case 4: return rl_sqrt_t(y);
        default: return y;
    }
}

// One output tile per block of a one-dimensional grid over the tiles (row-major over
// [m tiles, n tiles], so neighbouring blocks share A's rows); batches along z. With a
// `bias` (BIAS), each output is stored as linear_epilogue(acc, bias[col], act).
template <typename C, bool A_K, bool B_K, bool BIAS, typename T>
__device__ __forceinline__ void matmul_tiled(const T* __restrict__ a, const Strided& a_batch,
                                             u64 lda, const T* __restrict__ b,
                                             const Strided& b_batch, u64 ldb, T* __restrict__ c,
                                             u64 m, u64 n, u64 k_wide, u64 batches,
                                             const T* __restrict__ bias, int act) {
    typedef Stager<C, A_K, C::BM, T> SA;
    typedef Stager<C, B_K, C::BN, T> SB;
    __shared__ __align__(16) T as[2][C::BK * SA::ROW];
    __shared__ __align__(16) T bs[2][C::BK * SB::ROW];
    const int tx = (int)threadIdx.x % (C::BN / C::TN), ty = (int)threadIdx.x / (C::BN / C::TN);
    const u32 n_tiles = (u32)((n + C::BN - 1) / C::BN);
    const u64 row0 = (u64)(blockIdx.x / n_tiles) * C::BM;
    const u64 col0 = (u64)(blockIdx.x % n_tiles) * C::BN;
    // 32-bit steps: matmul.rs launches these kernels only for k < 2^31.
    const u32 k = (u32)k_wide, tiles = (k + C::BK - 1) / C::BK;
    for (u64 batch = blockIdx.z; batch < batches; batch += gridDim.z) {
        SA sa(a + strided_offset(a_batch, batch), lda, row0, m);
        SB sb(b + strided_offset(b_batch, batch), ldb, col0, n);
        T acc[C::TM][C::TN];
#pragma unroll
        for (int i = 0; i < C::TM; ++i)
#pragma unroll
            for (int j = 0; j < C::TN; ++j) acc[i][j] = (T)-0.0;
        sa.load(0, k);
        sb.load(0, k);
        sa.store(as[0]);
        sb.store(bs[0]);
        __syncthreads();
        for (u32 t = 0; t < tiles; ++t) {
            const int cur = (int)(t & 1);
            // The next k-tile's loads are in flight while this one is multiplied.
            if (t + 1 < tiles) {
                sa.load((t + 1) * C::BK, k);
                sb.load((t + 1) * C::BK, k);
                multiply_tile<C, SA::ROW, SB::ROW>(acc, as[cur], bs[cur], ty, tx, C::BK);
                sa.store(as[cur ^ 1]);
                sb.store(bs[cur ^ 1]);
            } else {
                multiply_tile<C, SA::ROW, SB::ROW>(acc, as[cur], bs[cur], ty, tx,
                                                   (int)(k - t * C::BK));
            }
            // The buffer just multiplied is the next iteration's store target.
            __syncthreads();
        }
        T* c0 = c + batch * m * n;
#pragma unroll
        for (int i = 0; i < C::TM; ++i) {
            u64 row = row0 + ty * C::FM + (i / C::FM) * C::SPAN_M + i % C::FM;
            if (row >= m) continue;
#pragma unroll
            for (int g = 0; g < C::GN; ++g) {
                u64 col = col0 + tx * C::FN + g * C::SPAN_N;
                T* out = c0 + row * n + col;
                // Each output as it is stored: the epilogue's temporaries never sit beside
                // all the accumulators (applied to them first, it spilled the 128 tile).
                if (BIAS) {
#pragma unroll
                    for (int q = 0; q < C::FN; ++q)
                        if (col + q < n)
                            acc[i][g * C::FN + q] =
                                linear_epilogue(acc[i][g * C::FN + q], bias[col + q], act);
                }
                if (n % C::FN == 0 && col + C::FN <= n) {
                    Pack<T, C::FN> v;
#pragma unroll
                    for (int q = 0; q < C::FN; ++q) v.v[q] = acc[i][g * C::FN + q];
                    *reinterpret_cast<Pack<T, C::FN>*>(out) = v;
                } else {
#pragma unroll
                    for (int q = 0; q < C::FN; ++q)
                        if (col + q < n) out[q] = acc[i][g * C::FN + q];
                }
            }
        }
    }
}

// The three tilings by their edge (matmul.rs's `Tile`), 256 threads each. The 8 x 8 tile
// takes k-tiles of 8 and steps through them without unrolling: unrolled, ptxas hoists
// the next steps' fragments and needs about 175 registers, spilling at the 128 that two
// blocks per multiprocessor allow (it runs at 126-128 without). In f64 its 64
// accumulators take 128 registers alone: one block per multiprocessor and k-tiles of 4
// keep it inside 255. The smaller tiles (k-tiles of 16) unroll their steps.
// MIN_BLOCKS and STEP_UNROLL are the knobs to turn first when timing on a GPU; any
// change must keep ptx.rs's no-spill, no-stack check.
template <typename T, int EDGE> struct TileOf;
template <> struct TileOf<float, 128> : Tiling<float, 128, 128, 8, 8, 8, 2, 1> {};
template <> struct TileOf<double, 128> : Tiling<double, 128, 128, 4, 8, 8, 1, 1> {};
template <typename T> struct TileOf<T, 64> : Tiling<T, 64, 64, 16, 4, 4, 1, 16> {};
template <typename T> struct TileOf<T, 32> : Tiling<T, 32, 32, 16, 2, 2, 1, 16> {};

// matmul_<edge>_<layout>_<f32|f64>, the layout in BLAS's letters: "n" for A row-major
// (dense along k) or B row-major (dense along n), "t" for either stored transposed.
// The backward products read tn (x^T @ g) and nt (g @ w^T).
#define MATMUL_TILED_KERNEL(T, S, EDGE, LAYOUT, A_K, B_K)                                   \
    extern "C" __global__ void __launch_bounds__(TileOf<T, EDGE>::THREADS,                \
                                                 TileOf<T, EDGE>::MIN_BLOCKS)             \
        matmul_##EDGE##_##LAYOUT##_##S(const T* a, KERNEL_VIEW a_batch, u64 lda,            \
                                       const T* b, KERNEL_VIEW b_batch, u64 ldb, T* c,      \
                                       u64 m, u64 n, u64 k, u64 batches) {                 \
        matmul_tiled<TileOf<T, EDGE>, A_K, B_K, false, T>(a, a_batch, lda, b, b_batch, ldb, \
                                                          c, m, n, k, batches, nullptr, 0);   \
    }

#define MATMUL_TILED_LAYOUTS(T, S, EDGE)                                                    \
    MATMUL_TILED_KERNEL(T, S, EDGE, nn, true, false)                                       \
    MATMUL_TILED_KERNEL(T, S, EDGE, tn, false, false)                                      \
    MATMUL_TILED_KERNEL(T, S, EDGE, nt, true, true)                                        \
    MATMUL_TILED_KERNEL(T, S, EDGE, tt, false, true)

// matmul_bias_<edge>_nn_<f32|f64>: a linear layer's forward, x @ w + bias with x and w
// row-major, and its activation (linear_epilogue). The 64 and 32 tiles only: with the
// activations' code beside its 64 accumulators, the 128 tile spilled 56 bytes in f32 at
// the 128 registers that two blocks per multiprocessor allow (matmul.rs takes the 64 tile
// where the product alone would take the 128 one).
#define MATMUL_BIAS_KERNEL(T, S, EDGE)                                                       \
    extern "C" __global__ void __launch_bounds__(TileOf<T, EDGE>::THREADS,                \
                                                 TileOf<T, EDGE>::MIN_BLOCKS)             \
        matmul_bias_##EDGE##_nn_##S(const T* a, KERNEL_VIEW a_batch, u64 lda, const T* b,   \
                                    KERNEL_VIEW b_batch, u64 ldb, T* c, u64 m, u64 n,       \
                                    u64 k, u64 batches, const T* bias, int act) {          \
        matmul_tiled<TileOf<T, EDGE>, true, false, true, T>(a, a_batch, lda, b, b_batch, ldb, \
                                                            c, m, n, k, batches, bias, act); \
    }

#define MATMUL_TILED_KERNELS(T, S)                                                          \
    MATMUL_TILED_LAYOUTS(T, S, 128)                                                        \
    MATMUL_TILED_LAYOUTS(T, S, 64)                                                         \
    MATMUL_TILED_LAYOUTS(T, S, 32)                                                         \
    MATMUL_BIAS_KERNEL(T, S, 64)                                                           \
    MATMUL_BIAS_KERNEL(T, S, 32)

MATMUL_TILED_KERNELS(float, f32)
MATMUL_TILED_KERNELS(double, f64)
