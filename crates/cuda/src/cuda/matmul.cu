// Matrix multiplication in the canonical order of rlgrad_core::kernels::MatmulKernel:
// every output is a chain of fused multiply-adds over k in increasing order, starting
// from -0: acc = fma(a[i, p], b[p, j], acc) for p = 0, 1, ..., k - 1.
//
// A tiled GEMM reproduces it bit for bit: a block computes a 64 x 64 tile of the output
// with 256 threads, each keeping a 4 x 4 sub-tile in registers; tiles of A (64 x 16) and
// B (16 x 64) are staged in shared memory, and each thread walks p through every tile in
// increasing order, one fma per output per p. No split over k, no reordering: the tiling
// only decides who computes an output, never how. Operands are strided views (transposes
// cost nothing); batch entries are strided too (broadcast batches have stride 0).

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
