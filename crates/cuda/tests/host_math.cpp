// Evaluates the CUDA math ports of src/cuda/math.cuh on the host, for tests/host_math.rs:
// reads lines `<function> <hex bits> [<hex bits>]` from stdin and prints the result's bits
// in hex, one line each. Build with FMA contraction off (-ffp-contract=off), as NVRTC runs
// with --fmad=false.
#include <cmath>
#include <math.h>
#include <cstdio>
#include <cstring>

static inline unsigned int f32_bits(float x) { unsigned int u; std::memcpy(&u, &x, 4); return u; }
static inline float f32_from(unsigned int u) { float x; std::memcpy(&x, &u, 4); return x; }
static inline unsigned long long f64_bits(double x) { unsigned long long u; std::memcpy(&u, &x, 8); return u; }
static inline double f64_from(unsigned long long u) { double x; std::memcpy(&x, &u, 8); return x; }

#define RL_FN static inline
#define RL_F32_BITS(x) f32_bits(x)
#define RL_F32_FROM(u) f32_from(u)
#define RL_F64_BITS(x) f64_bits(x)
#define RL_F64_FROM(u) f64_from(u)
using std::sqrt;  // IEEE square roots, as on the GPU
#include "math.cuh"  // src/cuda/math.cuh, written beside this file by tests/host_math.rs

int main() {
    char name[16];
    unsigned long long a, b;
    while (std::scanf("%15s %llx", name, &a) == 2) {
        if (!std::strcmp(name, "expf")) std::printf("%x\n", f32_bits(rl_expf(f32_from((unsigned)a))));
        else if (!std::strcmp(name, "logf")) std::printf("%x\n", f32_bits(rl_logf(f32_from((unsigned)a))));
        else if (!std::strcmp(name, "tanhf")) std::printf("%x\n", f32_bits(rl_tanhf(f32_from((unsigned)a))));
        else if (!std::strcmp(name, "exp")) std::printf("%llx\n", f64_bits(rl_exp(f64_from(a))));
        else if (!std::strcmp(name, "log")) std::printf("%llx\n", f64_bits(rl_log(f64_from(a))));
        else if (!std::strcmp(name, "tanh")) std::printf("%llx\n", f64_bits(rl_tanh(f64_from(a))));
        else if (!std::strcmp(name, "sin")) std::printf("%llx\n", f64_bits(rl_sin(f64_from(a))));
        else if (!std::strcmp(name, "cos")) std::printf("%llx\n", f64_bits(rl_cos(f64_from(a))));
        else if (!std::strcmp(name, "powf") && std::scanf("%llx", &b) == 1)
            std::printf("%x\n", f32_bits(rl_powf(f32_from((unsigned)a), f32_from((unsigned)b))));
        else if (!std::strcmp(name, "pow") && std::scanf("%llx", &b) == 1)
            std::printf("%llx\n", f64_bits(rl_pow(f64_from(a), f64_from(b))));
        else return 2;
    }
    return 0;
}
