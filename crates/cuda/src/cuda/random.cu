// Random numbers with the bits of rlgrad_core::Rng (random.rs): its PCG-64 stream (an LCG
// on 128 bits, XSL RR output), its conversions to uniform floats, and its Box-Muller
// normals in f64 (libm's log, sin and cos: math.cuh's ports).
//
// Draw i of a batch is the draw i steps after the host's position: a thread jumps there
// once (Brown's jump, the LCG's affine map raised to i by squaring) and steps through a
// chunk of consecutive draws, so every output is computed independently of the others,
// in any order, with the host's bits.

struct Pcg {
    u64 state_lo, state_hi, inc_lo, inc_hi;
};

#define PCG_MULT_LO 0x4385DF649FCCF645ull
#define PCG_MULT_HI 0x2360ED051FC65DA4ull

// (a * b) mod 2^128, and (a + b) mod 2^128, on (lo, hi) pairs.
__device__ __forceinline__ void mul128(u64 a_lo, u64 a_hi, u64 b_lo, u64 b_hi, u64& lo,
                                       u64& hi) {
    lo = a_lo * b_lo;
    hi = __umul64hi(a_lo, b_lo) + a_lo * b_hi + a_hi * b_lo;
}

__device__ __forceinline__ void add128(u64 a_lo, u64 a_hi, u64 b_lo, u64 b_hi, u64& lo,
                                       u64& hi) {
    lo = a_lo + b_lo;
    hi = a_hi + b_hi + (lo < a_lo ? 1 : 0);
}

// The position `steps` draws after `p`.
__device__ Pcg pcg_jumped(Pcg p, u64 steps) {
    u64 acc_mult_lo = 1, acc_mult_hi = 0, acc_plus_lo = 0, acc_plus_hi = 0;
    u64 mult_lo = PCG_MULT_LO, mult_hi = PCG_MULT_HI, plus_lo = p.inc_lo, plus_hi = p.inc_hi;
    while (steps > 0) {
        u64 lo, hi;
        if (steps & 1) {
            mul128(acc_mult_lo, acc_mult_hi, mult_lo, mult_hi, acc_mult_lo, acc_mult_hi);
            mul128(acc_plus_lo, acc_plus_hi, mult_lo, mult_hi, lo, hi);
            add128(lo, hi, plus_lo, plus_hi, acc_plus_lo, acc_plus_hi);
        }
        // plus = (mult + 1) * plus, then mult = mult * mult.
        u64 m1_lo, m1_hi;
        add128(mult_lo, mult_hi, 1, 0, m1_lo, m1_hi);
        mul128(m1_lo, m1_hi, plus_lo, plus_hi, plus_lo, plus_hi);
        mul128(mult_lo, mult_hi, mult_lo, mult_hi, lo, hi);
        mult_lo = lo;
        mult_hi = hi;
        steps >>= 1;
    }
    Pcg out = p;
    u64 lo, hi;
    mul128(acc_mult_lo, acc_mult_hi, p.state_lo, p.state_hi, lo, hi);
    add128(lo, hi, acc_plus_lo, acc_plus_hi, out.state_lo, out.state_hi);
    return out;
}

// One draw: the LCG's step, then XSL RR of the new state.
__device__ __forceinline__ u64 pcg_next(Pcg& p) {
    u64 lo, hi;
    mul128(p.state_lo, p.state_hi, PCG_MULT_LO, PCG_MULT_HI, lo, hi);
    add128(lo, hi, p.inc_lo, p.inc_hi, p.state_lo, p.state_hi);
    u32 rotation = (u32)(p.state_hi >> 58);
    u64 xsl = p.state_hi ^ p.state_lo;
    return (xsl >> rotation) | (xsl << ((64 - rotation) & 63));
}

// Rng::uniform_f32 (24 bits of the draw's low half) and Rng::uniform_f64 (53 bits).
__device__ __forceinline__ float uniform_of(float, u64 draw) {
    return (float)((u32)draw >> 8) * (1.0f / 16777216.0f);
}
__device__ __forceinline__ double uniform_of(double, u64 draw) {
    return (double)(draw >> 11) * (1.0 / 9007199254740992.0);
}

// Consecutive draws (or normal pairs) per thread.
#define RANDOM_CHUNK 16

// out[i] = low + (high - low) * u_i: Tensor::rand_uniform_on's formula, u_i from draw i.
template <typename T>
__device__ void rng_uniform(Pcg base, u64 n, T low, T high, T* out) {
    for (u64 c = first_index(); c * RANDOM_CHUNK < n; c += grid_stride()) {
        Pcg p = pcg_jumped(base, c * RANDOM_CHUNK);
        for (u64 i = c * RANDOM_CHUNK; i < n && i < (c + 1) * RANDOM_CHUNK; ++i) {
            T u = uniform_of((T)0, pcg_next(p));
            out[i] = low + (high - low) * u;
        }
    }
}

// out[i] = (T)(mean + deviation * z_i), z_i Rng::normal_f64's samples: `spare` (when `has_spare`)
// first, then pairs from two draws each, r cos(theta) and r sin(theta) with
// u1 = 1 - uniform(d1), u2 = uniform(d2), r = sqrt(-2 ln u1), theta = 2 pi u2.
template <typename T>
__device__ void rng_normal(Pcg base, u64 n, int has_spare, double spare, double mean,
                           double deviation, T* out) {
    u64 first = has_spare ? 1 : 0;
    if (first && first_index() == 0 && n > 0) out[0] = (T)(mean + deviation * spare);
    u64 samples = n - (n < first ? n : first), pairs = (samples + 1) / 2;
    for (u64 c = first_index(); c * RANDOM_CHUNK < pairs; c += grid_stride()) {
        Pcg p = pcg_jumped(base, 2 * c * RANDOM_CHUNK);
        for (u64 q = c * RANDOM_CHUNK; q < pairs && q < (c + 1) * RANDOM_CHUNK; ++q) {
            double u1 = 1.0 - uniform_of(0.0, pcg_next(p));
            double u2 = uniform_of(0.0, pcg_next(p));
            double r = __dsqrt_rn(-2.0 * rl_log(u1));
            double theta = (2.0 * 3.141592653589793) * u2;
            u64 j = 2 * q;
            out[first + j] = (T)(mean + deviation * (r * rl_cos(theta)));
            if (j + 1 < samples)
                out[first + j + 1] = (T)(mean + deviation * (r * rl_sin(theta)));
        }
    }
}

// The stream's position comes as four words: the state's and the increment's low and
// high halves.
#define RANDOM_KERNELS(T, S)                                                                  \
    extern "C" __global__ void rng_uniform_##S(u64 state_lo, u64 state_hi, u64 inc_lo,        \
                                               u64 inc_hi, u64 n, T low, T high, T* out) {    \
        rng_uniform<T>(Pcg{state_lo, state_hi, inc_lo, inc_hi}, n, low, high, out);           \
    }                                                                                         \
    extern "C" __global__ void rng_normal_##S(u64 state_lo, u64 state_hi, u64 inc_lo,         \
                                              u64 inc_hi, u64 n, int has_spare, double spare, \
                                              double mean, double deviation, T* out) {        \
        rng_normal<T>(Pcg{state_lo, state_hi, inc_lo, inc_hi}, n, has_spare, spare, mean,     \
                      deviation, out);                                                        \
    }

RANDOM_KERNELS(float, f32)
RANDOM_KERNELS(double, f64)
