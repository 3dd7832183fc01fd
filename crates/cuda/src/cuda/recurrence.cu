// Reverse linear recurrences over time-major [T, B] data (rlgrad_core::kernels::recurrence):
// one thread per column, sequential in t from T - 1 down to 0, in the canonical formulas
// of the module docs (one multiply, the cut selection, one add per step; no FMA).
//
// The chain through time is serial, so what decides the speed is keeping loads out of it:
// each thread loads a chunk of steps into registers before running the chain over them,
// and loads the next chunk before running the current one (double buffering), so that a
// chunk's memory latency hides behind the previous chunk's arithmetic. Adjacent threads
// are adjacent columns, so every load and store of a step is coalesced.
//
// A chunk is 16 steps of f32 and 8 of f64: the same bytes in flight per column, and two
// chunks of V-trace's four f64 values per step would take more than the 255 registers a
// thread has (ptxas then spills to local memory; tests/ptx.rs checks that none does).

#define COLUMNS_PER_BLOCK 32

template <typename T> struct Chunk {
    enum { steps = sizeof(T) == 8 ? 8 : 16 };
};

// The effective reward and discount of a step (episode_step): `mode` 0 Constant, 1
// Discounts, 2 terminations, 3 terminations and truncations. Flags are set when nonzero
// (NaN included).
template <typename T> struct Steps {
    int mode;
    const T* rewards;
    const T* discounts;
    const T* terminated;
    const T* truncated;
    const T* final_values;
    T gamma;
    __device__ __forceinline__ void at(u64 i, T& r, T& d) const {
        T reward = rewards[i];
        if (mode == 0) {
            r = reward;
            d = gamma;
        } else if (mode == 1) {
            r = reward;
            d = discounts[i];
        } else {
            bool term = terminated[i] != (T)0;
            if (mode == 3 && truncated[i] != (T)0) {
                r = term ? reward : reward + gamma * final_values[i];
                d = (T)0;
            } else {
                r = reward;
                d = term ? (T)0 : gamma;
            }
        }
    }
};

template <typename Scan, typename Step>
__device__ __forceinline__ void load_chunk(const Scan& scan, Step* buf, long long top, u64 b,
                                           u64 col) {
#pragma unroll
    for (int k = 0; k < Step::chunk; ++k) {
        long long t = top - k;
        if (t >= 0) buf[k] = scan.load((u64)t * b + col);
    }
}

template <typename Scan, typename Step>
__device__ __forceinline__ void run_chunk(Scan& scan, const Step* buf, long long top, u64 b,
                                          u64 col) {
#pragma unroll
    for (int k = 0; k < Step::chunk; ++k) {
        long long t = top - k;
        if (t >= 0) scan.apply((u64)t, (u64)t * b + col, buf[k]);
    }
}

// Runs `scan` over one column, t = steps - 1 down to 0, chunk by chunk, double-buffered.
template <typename Scan> __device__ void scan_column(Scan& scan, u64 steps, u64 b, u64 col) {
    const int chunk = Scan::Step::chunk;
    typename Scan::Step first[chunk], second[chunk];
    long long top = (long long)steps - 1;
    load_chunk(scan, first, top, b, col);
    while (top >= 0) {
        long long next = top - chunk;
        if (next >= 0) load_chunk(scan, second, next, b, col);
        run_chunk(scan, first, top, b, col);
        top = next;
        if (top < 0) break;
        next = top - chunk;
        if (next >= 0) load_chunk(scan, first, next, b, col);
        run_chunk(scan, second, top, b, col);
        top = next;
    }
}

template <typename T> struct RD {
    enum { chunk = Chunk<T>::steps };
    T r, d;
};
template <typename T> struct RDV {
    enum { chunk = Chunk<T>::steps };
    T r, d, v;
};
template <typename T> struct RDVRho {
    enum { chunk = Chunk<T>::steps };
    T r, d, v, rho;
};

// G_t = r'_t + cut(d_t, d_t * G_{t+1}), G_T = bootstrap (and the primitive itself).
template <typename T> struct ReturnsScan {
    typedef RD<T> Step;
    Steps<T> steps;
    T* out;
    T acc;
    __device__ Step load(u64 i) const {
        Step s;
        steps.at(i, s.r, s.d);
        return s;
    }
    __device__ void apply(u64, u64 i, const Step& s) {
        acc = s.r + cut(s.d, s.d * acc);
        out[i] = acc;
    }
};

// delta_t = (r'_t + cut(d_t, d_t * v_{t+1})) - v_t;
// A_t = delta_t + cut(d_t, (lambda * d_t) * A_{t+1}); returns_t = A_t + v_t.
template <typename T> struct GaeScan {
    typedef RDV<T> Step;
    Steps<T> steps;
    const T* values;
    T lambda;
    T* advantages;
    T* returns;
    T acc, v_next;
    __device__ Step load(u64 i) const {
        Step s;
        steps.at(i, s.r, s.d);
        s.v = values[i];
        return s;
    }
    __device__ void apply(u64, u64 i, const Step& s) {
        T delta = (s.r + cut(s.d, s.d * v_next)) - s.v;
        acc = delta + cut(s.d, (lambda * s.d) * acc);
        advantages[i] = acc;
        if (returns) returns[i] = acc + s.v;
        v_next = s.v;
    }
};

// G_t = (r'_t + cut(d_t, d_t * ((1 - lambda) * nv_t))) + cut(d_t, (d_t * lambda) * G_{t+1}).
template <typename T> struct LambdaScan {
    typedef RDV<T> Step;
    Steps<T> steps;
    const T* next_values;
    T lambda, one_minus_lambda;
    T* out;
    T acc;
    __device__ Step load(u64 i) const {
        Step s;
        steps.at(i, s.r, s.d);
        s.v = next_values[i];
        return s;
    }
    __device__ void apply(u64, u64 i, const Step& s) {
        acc = (s.r + cut(s.d, s.d * (one_minus_lambda * s.v))) + cut(s.d, (s.d * lambda) * acc);
        out[i] = acc;
    }
};

// V-trace (formulas in rlgrad_core::kernels::recurrence); acc holds e_{t+1}.
template <typename T> struct VtraceScan {
    typedef RDVRho<T> Step;
    Steps<T> steps;
    const T* values;
    const T* rhos;
    T lambda, one_minus_lambda, clip_rho, clip_pg_rho;
    u64 length;
    T* vs;
    T* pg;
    T acc, v_next;
    __device__ Step load(u64 i) const {
        Step s;
        steps.at(i, s.r, s.d);
        s.v = values[i];
        s.rho = rhos[i];
        return s;
    }
    __device__ void apply(u64 t, u64 i, const Step& s) {
        T r = s.r, d = s.d;
        T q;
        if (t + 1 < length) {
            T vs_next = v_next + acc;
            q = r + cut(d, d * (lambda * vs_next + one_minus_lambda * v_next));
        } else {
            q = r + cut(d, d * v_next);
        }
        T td = min2(clip_rho, s.rho) * ((r + cut(d, d * v_next)) - s.v);
        T trace = cut(d, (d * (min2((T)1, s.rho) * lambda)) * acc);
        acc = td + trace;
        vs[i] = s.v + acc;
        pg[i] = min2(clip_pg_rho, s.rho) * (q - s.v);
        v_next = s.v;
    }
};

#define STEPS_PARAMS(T)                                                                       \
    int mode, const T *rewards, const T *discounts, const T *terminated,                  \
        const T *truncated, const T *final_values, T gamma
#define STEPS_INIT {mode, rewards, discounts, terminated, truncated, final_values, gamma}

#define COLUMN                                                                             \
    u64 col = (u64)blockIdx.x * blockDim.x + threadIdx.x;                                 \
    if (col >= b) return;

#define RECURRENCE_KERNELS(T, S)                                                           \
    extern "C" __global__ void returns_##S(u64 steps, u64 b, STEPS_PARAMS(T),                 \
                                           const T* bootstrap, T* out) {                   \
        COLUMN                                                                             \
        ReturnsScan<T> scan = {STEPS_INIT, out, bootstrap[col]};                           \
        scan_column(scan, steps, b, col);                                                  \
    }                                                                                      \
    extern "C" __global__ void gae_##S(u64 steps, u64 b, STEPS_PARAMS(T), const T* values,    \
                                       const T* bootstrap, T lambda, T* advantages,        \
                                       T* returns) {                                       \
        COLUMN                                                                             \
        GaeScan<T> scan = {STEPS_INIT, values, lambda, advantages, returns, (T)0,          \
                           bootstrap[col]};                                                \
        scan_column(scan, steps, b, col);                                                  \
    }                                                                                      \
    extern "C" __global__ void lambda_returns_##S(u64 steps, u64 b, STEPS_PARAMS(T),          \
                                                  const T* next_values, T lambda,          \
                                                  T one_minus_lambda, T* out) {            \
        COLUMN                                                                             \
        LambdaScan<T> scan = {STEPS_INIT, next_values, lambda, one_minus_lambda, out,      \
                              next_values[(steps - 1) * b + col]};                         \
        scan_column(scan, steps, b, col);                                                  \
    }                                                                                      \
    extern "C" __global__ void vtrace_##S(u64 steps, u64 b, STEPS_PARAMS(T), const T* values, \
                                          const T* bootstrap, const T* rhos, T lambda,     \
                                          T one_minus_lambda, T clip_rho, T clip_pg_rho,   \
                                          T* vs, T* pg) {                                  \
        COLUMN                                                                             \
        VtraceScan<T> scan = {STEPS_INIT, values, rhos, lambda, one_minus_lambda,          \
                              clip_rho, clip_pg_rho, steps, vs, pg, (T)0, bootstrap[col]}; \
        scan_column(scan, steps, b, col);                                                  \
    }                                                                                      \
    /* n-step: acc = nv_k, k = min(t + n - 1, T - 1), then acc = r'_j + cut(d_j, d_j *    \
       acc) for j = k down to t. */                                                        \
    extern "C" __global__ void n_step_##S(u64 steps, u64 b, STEPS_PARAMS(T),                  \
                                          const T* next_values, u64 n, T* out) {           \
        COLUMN                                                                             \
        Steps<T> at = STEPS_INIT;                                                          \
        for (u64 t = 0; t < steps; ++t) {                                                  \
            u64 last = (n - 1 >= steps - 1 - t) ? steps - 1 : t + n - 1;                   \
            T acc = next_values[last * b + col];                                           \
            for (u64 j = last + 1; j-- > t;) {                                             \
                T r, d;                                                                    \
                at.at(j * b + col, r, d);                                                  \
                acc = r + cut(d, d * acc);                                                 \
            }                                                                              \
            out[t * b + col] = acc;                                                        \
        }                                                                                  \
    }

RECURRENCE_KERNELS(float, f32)
RECURRENCE_KERNELS(double, f64)
