// The CUDA runtime on the host, for the host emulations of the kernels (host_gemm.cpp,
// host_random.cpp, host_recurrence.cpp, host_reduce.cpp, host_sequence.cpp): a block's
// threads are fibers of one host thread (ucontext), each running until its next
// __syncthreads, thread 0 first, then the next, so that every thread finishes a phase
// before any starts the next one, as the barrier promises; a thread that returned counts
// as arrived, as on the GPU. __shared__ arrays are function statics (one block runs at a
// time), the blocks run one after another. Include it, then the family's .cu file. Build
// with -std=c++20 -ffp-contract=off, as NVRTC compiles with --fmad=false.
//
// Fibers, not host threads: a barrier of 256 host threads on two cores cost each phase
// hundreds of scheduler switches (the unit tests' emulations took 103 s of CPU; fibers
// switch in user space).
//
// What it cannot see: races between threads of a block that only a GPU's timing shows
// (the phases run whole, in thread order, so a read that the kernel fails to fence behind
// a barrier finds the value of the threads before it in that order), warp-synchronous
// behaviour (a shuffle here is two block-wide barriers), races between blocks (they run
// one after another, so a grid's atomics and fences are never contended and every
// ticket is taken in block order), and the GPU's own arithmetic (its fma, its NaN
// payloads).
#include <ucontext.h>

#include <atomic>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <map>
#include <functional>
#include <string>
#include <type_traits>
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
static dim3 threadIdx, blockIdx, blockDim, gridDim;

// The fibers of the block that runs, and the scheduler they return to at each barrier.
struct Fiber {
    ucontext_t context;
    std::vector<char> stack;
    bool done;
};
static std::vector<Fiber> block_fibers;
static ucontext_t block_scheduler;
static std::function<void()> block_kernel;

static void syncthreads() {
    swapcontext(&block_fibers[threadIdx.x].context, &block_scheduler);
}

// A fiber's body: the kernel, then back to the scheduler for good (uc_link).
static void fiber_main() {
    block_kernel();
    block_fibers[threadIdx.x].done = true;
}

#define __device__
#define __global__
#define __forceinline__ inline
#define __grid_constant__
#define __launch_bounds__(...)
#define __shared__ static
#define __align__(n) __attribute__((aligned(n)))
#define __syncthreads() syncthreads()
static inline unsigned int __float_as_uint(float x) { return f32_bits(x); }
static inline float __uint_as_float(unsigned int u) { return f32_from(u); }
static inline long long __double_as_longlong(double x) { return (long long)f64_bits(x); }
static inline double __longlong_as_double(long long u) { return f64_from((unsigned long long)u); }
static inline float __fsqrt_rn(float x) { return std::sqrt(x); }
static inline double __dsqrt_rn(double x) { return std::sqrt(x); }
static inline unsigned long long __umul64hi(unsigned long long a, unsigned long long b) {
    return (unsigned long long)(((unsigned __int128)a * b) >> 64);
}

// CUDA's vector types, aligned as on the GPU.
struct alignas(8) float2 {
    float x, y;
};
struct alignas(16) float4 {
    float x, y, z, w;
};
struct alignas(16) double2 {
    double x, y;
};

// Warp shuffles, for kernels where every thread of the block reaches each shuffle: each
// thread posts its value and reads its source's between two block-wide barriers (a source
// outside the warp or the block gives the caller's own value, as on the GPU).
template <typename T> static T __shfl_down_sync(unsigned, T v, unsigned delta) {
    static T posted[1024];
    unsigned t = threadIdx.x;
    posted[t] = v;
    __syncthreads();
    T r = t % 32 + delta < 32 && t + delta < blockDim.x ? posted[t + delta] : v;
    __syncthreads();
    return r;
}

// The grid's memory operations: atomics and fences as the host's, L2-only accesses as
// plain ones.
static inline unsigned int atomicAdd(unsigned int* p, unsigned int v) {
    return __atomic_fetch_add(p, v, __ATOMIC_SEQ_CST);
}
static inline void __threadfence() { std::atomic_thread_fence(std::memory_order_seq_cst); }
template <typename T> static T __ldcg(const T* p) { return *p; }
template <typename T> static void __stcg(T* p, T v) { *p = v; }

#include "common.cuh"

// Every block of the grid in turn, each on `threads` fibers: the phases between barriers
// run one thread after another until every thread has returned.
template <typename Kernel> static void launch(dim3 grid, unsigned threads, Kernel kernel) {
    // Room for a thread's locals: a 128 x 128 tile's 8 x 8 doubles and its fragments.
    constexpr size_t STACK = 256 * 1024;
    block_kernel = kernel;
    block_fibers.resize(threads);
    for (auto& fiber : block_fibers) fiber.stack.resize(STACK);
    blockDim = {threads, 1, 1};
    gridDim = grid;
    for (unsigned z = 0; z < grid.z; ++z)
        for (unsigned y = 0; y < grid.y; ++y)
            for (unsigned x = 0; x < grid.x; ++x) {
                blockIdx = {x, y, z};
                for (auto& fiber : block_fibers) {
                    getcontext(&fiber.context);
                    fiber.context.uc_stack.ss_sp = fiber.stack.data();
                    fiber.context.uc_stack.ss_size = fiber.stack.size();
                    fiber.context.uc_link = &block_scheduler;
                    makecontext(&fiber.context, fiber_main, 0);
                    fiber.done = false;
                }
                for (bool running = true; running;) {
                    running = false;
                    for (unsigned t = 0; t < threads; ++t) {
                        if (block_fibers[t].done) continue;
                        threadIdx = {t, 0, 0};
                        swapcontext(&block_scheduler, &block_fibers[t].context);
                        running = running || !block_fibers[t].done;
                    }
                }
            }
}

// One scalar of the element type, from stdin as its bits in hex.
template <typename T, typename Bits> static T read_scalar() {
    Bits bits;
    std::cin >> std::hex >> bits >> std::dec;
    T x;
    std::memcpy(&x, &bits, sizeof(T));
    return x;
}

// A buffer of `<length> <hex bits>...` from stdin, 256-byte aligned as the driver's
// allocations are (a length of 0 is a null pointer).
template <typename T, typename Bits> static T* read_buffer() {
    size_t length;
    std::cin >> length;
    if (length == 0) return nullptr;
    T* buffer = (T*)std::aligned_alloc(256, ((length * sizeof(T) + 255) / 256 + 1) * 256);
    for (size_t i = 0; i < length; ++i) {
        Bits bits;
        std::cin >> std::hex >> bits >> std::dec;
        std::memcpy(&buffer[i], &bits, sizeof(T));
    }
    return buffer;
}

// Prints each element's bits in hex, one line each.
// The cases on stdin until its end, each headed `<f32|f64> <name> <grid x>`: `run(zero,
// name, grid)` with `zero` a float or a double 0, the first nonzero status ending them.
template <typename Run> static int run_named_cases(Run run) {
    std::string type, name;
    dim3 grid{1, 1, 1};
    while (std::cin >> type >> name >> grid.x) {
        int status = type == "f32" ? run(0.0f, name, grid) : run(0.0, name, grid);
        if (status != 0) return status;
        std::fflush(stdout);
    }
    return 0;
}

// The unsigned integer type of a float's bits.
template <typename T> using BitsOf = std::conditional_t<sizeof(T) == 4, uint32_t, uint64_t>;

// The main of an emulation whose cases each run run_case<T, BitsOf<T>>(name, grid), T the
// case's element type.
#define RUN_TYPED_CASES(run_case)                                                      \
    int main() {                                                                       \
        return run_named_cases([](auto zero, const std::string& name, dim3 grid) {     \
            using T = decltype(zero);                                                  \
            return run_case<T, BitsOf<T>>(name, grid);                                 \
        });                                                                            \
    }

template <typename T, typename Bits> static void print_bits(const std::vector<T>& values) {
    for (T x : values) {
        Bits bits;
        std::memcpy(&bits, &x, sizeof(T));
        std::printf("%llx\n", (unsigned long long)bits);
    }
}
