// Runs the matmul kernels of src/cuda/matmul.cu on the host, for the host emulation test
// in src/matmul.rs: each block's 256 threads are host threads meeting at a barrier for
// every __syncthreads, its __shared__ arrays function statics (one block runs at a
// time), the blocks run one after another. What this checks without a GPU is the
// kernels' indexing and order (tiles, vector loads, the k tail, edge tiles, batches);
// that the GPU's fma is IEEE's is what the GPU tests check.
//
// Reads cases from stdin until its end, each:
//   <f32|f64> <kernel> <grid x> <grid y> <grid z> <m> <n> <k> <batches>
//   <count> <stride>...                        (lda ldb, or a_rs a_cs b_rs b_cs)
//   <ndim> <offset> <dims>... <strides>...     (A's batch view, then B's)
//   <length> <hex bits>...                     (A's buffer, then B's)
// and prints the output's bits in hex, one line each. Build with -std=c++20 -pthread
// -ffp-contract=off, as NVRTC compiles with --fmad=false.
#include <barrier>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <map>
#include <string>
#include <thread>
#include <vector>

#define RL_FN static inline
static inline unsigned int f32_bits(float x) { unsigned int u; std::memcpy(&u, &x, 4); return u; }
static inline float f32_from(unsigned int u) { float x; std::memcpy(&x, &u, 4); return x; }
static inline unsigned long long f64_bits(double x) { unsigned long long u; std::memcpy(&u, &x, 8); return u; }
static inline double f64_from(unsigned long long u) { double x; std::memcpy(&x, &u, 8); return x; }
#define RL_F32_BITS(x) f32_bits(x)
#define RL_F32_FROM(u) f32_from(u)
#define RL_F64_BITS(x) f64_bits(x)
#define RL_F64_FROM(u) f64_from(u)
using std::sqrt;
#include "math.cuh"

struct dim3 {
    unsigned x, y, z;
};
thread_local dim3 threadIdx, blockIdx, blockDim, gridDim;
thread_local std::barrier<>* block_barrier;

#define __device__
#define __global__
#define __forceinline__ inline
#define __grid_constant__
#define __launch_bounds__(...)
#define __shared__ static
#define __align__(n) __attribute__((aligned(n)))
#define __syncthreads() block_barrier->arrive_and_wait()
static inline unsigned int __float_as_uint(float x) { return f32_bits(x); }
static inline float __uint_as_float(unsigned int u) { return f32_from(u); }
static inline long long __double_as_longlong(double x) { return (long long)f64_bits(x); }
static inline double __longlong_as_double(long long u) { return f64_from((unsigned long long)u); }
static inline float __fsqrt_rn(float x) { return std::sqrt(x); }
static inline double __dsqrt_rn(double x) { return std::sqrt(x); }

#include "common.cuh"
#include "matmul.cu"

// Every block of the grid in turn, each on BLOCK threads.
template <typename Kernel> static void launch(dim3 grid, Kernel kernel) {
    std::barrier<> barrier(BLOCK);
    std::vector<std::thread> threads;
    for (unsigned t = 0; t < BLOCK; ++t) {
        threads.emplace_back([&, t] {
            threadIdx = {t, 0, 0};
            blockDim = {BLOCK, 1, 1};
            gridDim = grid;
            block_barrier = &barrier;
            for (unsigned z = 0; z < grid.z; ++z)
                for (unsigned y = 0; y < grid.y; ++y)
                    for (unsigned x = 0; x < grid.x; ++x) {
                        blockIdx = {x, y, z};
                        kernel();
                        // The next block reuses the shared arrays.
                        barrier.arrive_and_wait();
                    }
        });
    }
    for (auto& thread : threads) thread.join();
}

template <typename T>
using StridedKernel = void (*)(const T*, Strided, u64, u64, const T*, Strided, u64, u64, T*,
                               u64, u64, u64, u64);
template <typename T>
using TiledKernel = void (*)(const T*, Strided, u64, const T*, Strided, u64, T*, u64, u64,
                             u64, u64);

#define TILED_ENTRY(EDGE, LAYOUT, S) {"matmul_" #EDGE "_" #LAYOUT, matmul_##EDGE##_##LAYOUT##_##S}
#define TILED_TABLE(S)                                                                         \
    {TILED_ENTRY(128, nn, S), TILED_ENTRY(128, tn, S), TILED_ENTRY(128, nt, S),                \
     TILED_ENTRY(128, tt, S), TILED_ENTRY(64, nn, S),  TILED_ENTRY(64, tn, S),                 \
     TILED_ENTRY(64, nt, S),  TILED_ENTRY(64, tt, S),  TILED_ENTRY(32, nn, S),                 \
     TILED_ENTRY(32, tn, S),  TILED_ENTRY(32, nt, S),  TILED_ENTRY(32, tt, S)}

static Strided read_view() {
    Strided s{};
    std::cin >> s.ndim >> s.offset;
    for (u32 d = 0; d < s.ndim; ++d) std::cin >> s.dims[d];
    for (u32 d = 0; d < s.ndim; ++d) std::cin >> s.strides[d];
    return s;
}

template <typename T, typename Bits> static T* read_buffer() {
    size_t length;
    std::cin >> length;
    // 256-byte aligned, as the driver's allocations are.
    T* buffer = (T*)std::aligned_alloc(256, ((length * sizeof(T) + 255) / 256 + 1) * 256);
    for (size_t i = 0; i < length; ++i) {
        Bits bits;
        std::cin >> std::hex >> bits >> std::dec;
        std::memcpy(&buffer[i], &bits, sizeof(T));
    }
    return buffer;
}

template <typename T, typename Bits>
static int run_case(const std::string& name, dim3 grid, u64 m, u64 n, u64 k, u64 batches) {
    size_t count;
    std::cin >> count;
    std::vector<u64> strides(count);
    for (auto& s : strides) std::cin >> s;
    Strided a_batch = read_view(), b_batch = read_view();
    T* a = read_buffer<T, Bits>();
    T* b = read_buffer<T, Bits>();
    std::vector<T> c(batches * m * n, (T)12345);
    T* out = c.data();
    if (name == "matmul" && count == 4) {
        StridedKernel<T> kernel;
        if constexpr (sizeof(T) == 4) kernel = matmul_f32;
        else kernel = matmul_f64;
        launch(grid, [&] {
            kernel(a, a_batch, strides[0], strides[1], b, b_batch, strides[2], strides[3], out,
                   m, n, k, batches);
        });
    } else if (count == 2) {
        TiledKernel<T> kernel = nullptr;
        if constexpr (sizeof(T) == 4) {
            static const std::map<std::string, TiledKernel<float>> table = TILED_TABLE(f32);
            if (table.count(name)) kernel = table.at(name);
        } else {
            static const std::map<std::string, TiledKernel<double>> table = TILED_TABLE(f64);
            if (table.count(name)) kernel = table.at(name);
        }
        if (!kernel) return 2;
        launch(grid, [&] {
            kernel(a, a_batch, strides[0], b, b_batch, strides[1], out, m, n, k, batches);
        });
    } else {
        return 2;
    }
    for (T x : c) {
        Bits bits;
        std::memcpy(&bits, &x, sizeof(T));
        std::printf("%llx\n", (unsigned long long)bits);
    }
    std::free(a);
    std::free(b);
    return 0;
}

int main() {
    std::string type, name;
    dim3 grid;
    u64 m, n, k, batches;
    while (std::cin >> type >> name >> grid.x >> grid.y >> grid.z >> m >> n >> k >> batches) {
        int status = type == "f32" ? run_case<float, uint32_t>(name, grid, m, n, k, batches)
                                   : run_case<double, uint64_t>(name, grid, m, n, k, batches);
        if (status != 0) return status;
        std::fflush(stdout);
    }
    return 0;
}
