// Reverse linear recurrences over time-major [T, B] data (rlgrad_core::kernels::recurrence),
// sequential in t from T - 1 down to 0 for each column, in the canonical formulas of the
// module docs (one multiply, the cut selection, one add per step; no FMA).
//
// Every kernel is compiled once per episode mode, `<name>_<mode>_<f32|f64>` (Constant,
// Discounts, terminations, terminations and truncations), so that the inner loops carry
// no runtime branch on the mode. Flags are set when nonzero (NaN included).
//
// ---- The staged scans: returns (and the primitive), GAE, TD(lambda) ------------------
//
// Their chain is `acc = x + cut(d, m * acc)` with x, m and d known before the chain
// reaches the step (rlgrad-core's Cpu tiles split them the same way): returns x = r',
// m = d; GAE x = delta = (r' + cut(d, d * v_next)) - v, m = lambda * d; TD(lambda)
// x = r' + cut(d, d * ((1 - lambda) * nv)), m = d * lambda. The chain is ~8 ns a step on
// an H200 (multiply, select, add, each waiting for the last), a memory round trip 600 to
// 800 ns: a step's inputs must be requested ~100 steps before the chain reaches it, which
// one thread per column cannot do (it would hold 100 steps of inputs in registers).
//
// So a block owns 32 adjacent columns and splits the work. Warp 0 runs the chains, one
// lane per column: per step it reads x, m, d (and v for GAE's returns) from shared
// memory, runs the chain and stores the output (a warp's 32 stores of a step are one
// line). Warps 1..15 are producers: they load the inputs (a step's 32 columns are one
// line: 128 bytes in f32, 256 in f64), compute the episode mode's r' and d and the
// estimator's x and m, and write them to shared memory for the chain.
//
// The unit of a producer's work is a slice of K steps x 32 columns (K = 16 in f32, 8 in
// f64), which it holds in registers (K x up to 5 inputs: at most 81 registers in f32
// and 80 in f64, under the 128 a thread of a 512-thread block has). Slice u covers steps
// T-1-uK down to T-uK-K; producer w owns the slices u = w - 1 (mod 15). A tile is two
// slices, S = 2K steps (32 f32, 16 f64), owned by two producers on different schedulers:
// a producer spends ~18 instructions a step and column (loads, the mode's flags and
// selects, x and m, the shared stores) where the chain spends 12 to 20 cycles a step, so
// one warp a tile could not keep up with the chain. Each phase, the chain runs tile j-1
// from one shared buffer while the two owners of tile j compute it from their registers
// into the other buffer, then request their next slices, u + 15, into the same registers;
// one __syncthreads ends the phase. A barrier does not wait for outstanding loads (a
// load's scoreboard waits at the register's first use), so every producer has one slice
// in flight at all times and a slice is requested 15 slices (7.5 tiles) before the chain
// runs it: 240 steps in f32, ~1.9 us of chain at 8 ns; 120 steps in f64, ~1.4 us at
// ~12 ns; either covers the round trip twice.
//
// Bytes in flight per block, 15 slices of K x 32 x inputs: 92 KB for f32 GAE with
// terminations (rewards, values, flags), 154 KB with truncations. At [2048, 4096] the
// scan is bandwidth-bound (128 blocks, one per multiprocessor): 4.8 TB/s over 132
// multiprocessors is 36 GB/s each, ~36 KB in flight at a loaded latency of ~1 us, which
// the producers exceed. At [2048, 64] (two blocks) one block needs 384 B a step every
// 8 ns, 48 GB/s, ~34 KB in flight at 700 ns: also covered.
//
// Shared memory: x, m, d, v for two tiles, 4 x 2 x S x 32 values = 32 KB in f32 and in
// f64 (static, under the 48 KB limit; the block's 512 threads limit a multiprocessor to
// four blocks, which fit its shared memory). cp.async (sm_80) would need no registers
// for the distance, but a ring of ~100 raw steps (64 KB in f32 with truncations) and a
// second pass through shared memory; registers already hold 15 slices, and this keeps
// the kernels valid for every architecture the crate compiles for.
//
// Out-of-range steps (the last tile below t = 0) and columns (b not a multiple of 32)
// load zeros and run the chain on them, finite values that nothing stores: below t = 0
// the chain's value is never read again, and a lane beyond b stores nothing.
//
// ---- V-trace and n-step --------------------------------------------------------------
//
// V-trace's second output needs vs_{t+1} beside the chain (pg_t reads the previous
// step's trace and six more values a step), and n-step is no single chain (each output
// reruns up to n steps): both keep one thread per column, which loads a chunk of steps
// into registers before running the chain over the previous chunk (double buffering).
// A chunk is 16 steps of f32 and 8 of f64: the same bytes in flight per column, and two
// chunks of V-trace's four f64 values per step would take more than the 255 registers a
// thread has (ptxas then spills to local memory; tests/ptx.rs checks that none does).

// The episode modes (recurrence.rs names the kernels after them).
#define MODE_CONSTANT 0
#define MODE_DISCOUNTS 1
#define MODE_TERMINATIONS 2
#define MODE_TRUNCATIONS 3

// The per-step inputs of the episode description, as the kernels take them.
template <typename T> struct Episodes {
    const T* rewards;
    const T* discounts;
    const T* terminated;
    const T* truncated;
    const T* final_values;
    T gamma;
};

// A step's inputs as loaded: the reward, the mode's values, and the estimator's value.
template <typename T> struct Raw {
    T reward, discount, terminated, truncated, final_value, value;
};

// Loads what mode `Mode` (and, with `Value`, the estimator's `values`) reads at element
// `i`. `final_values` is read whether or not the step is truncated, so that no load waits
// for a flag.
template <int Mode, bool Value, typename T>
__device__ __forceinline__ Raw<T> load_raw(const Episodes<T>& ep, const T* values, u64 i) {
    Raw<T> s = {};
    s.reward = ep.rewards[i];
    if (Mode == MODE_DISCOUNTS) s.discount = ep.discounts[i];
    if (Mode >= MODE_TERMINATIONS) s.terminated = ep.terminated[i];
    if (Mode == MODE_TRUNCATIONS) {
        s.truncated = ep.truncated[i];
        s.final_value = ep.final_values[i];
    }
    if (Value) s.value = values[i];
    return s;
}

// The effective reward and discount of a step (episode_step).
template <int Mode, typename T>
__device__ __forceinline__ void episode_step(const Raw<T>& s, T gamma, T& r, T& d) {
    r = s.reward;
    if (Mode == MODE_CONSTANT) {
        d = gamma;
    } else if (Mode == MODE_DISCOUNTS) {
        d = s.discount;
    } else {
        bool term = s.terminated != (T)0;
        if (Mode == MODE_TRUNCATIONS && s.truncated != (T)0) {
            if (!term) r = s.reward + gamma * s.final_value;
            d = (T)0;
        } else {
            d = term ? (T)0 : gamma;
        }
    }
}

// ---- The staged scans ----------------------------------------------------------------

#define PRODUCERS 15
#define STAGED_THREADS (32 * (1 + PRODUCERS))

template <typename T> struct Staging {
    enum { slice = sizeof(T) == 8 ? 8 : 16, slices = 2, tile = 2 * slice };
};

template <typename T> struct Tiles {
    T x[2][Staging<T>::tile][32];
    T m[2][Staging<T>::tile][32];
    T d[2][Staging<T>::tile][32];
    T v[2][Staging<T>::tile][32];
};

// Returns and the primitive: x = r', m = d; G_T = bootstrap.
template <typename T> struct ReturnsStage {
    enum { reads_values = 0, reads_next = 0 };
    const T* bootstrap;
    __device__ __forceinline__ T init(u64, u64, u64 col) const { return bootstrap[col]; }
    __device__ __forceinline__ void terms(T r, T d, T, T, T& x, T& m) const {
        x = r;
        m = d;
    }
};

// GAE: x = delta = (r' + cut(d, d * v_{t+1})) - v, m = lambda * d; A_T = 0, v_T = bootstrap.
template <typename T> struct GaeStage {
    enum { reads_values = 1, reads_next = 1 };
    const T* values;
    const T* bootstrap;
    T lambda;
    __device__ __forceinline__ T init(u64, u64, u64) const { return (T)0; }
    __device__ __forceinline__ void terms(T r, T d, T v, T v_next, T& x, T& m) const {
        x = (r + cut(d, d * v_next)) - v;
        m = lambda * d;
    }
};

// TD(lambda): x = r' + cut(d, d * ((1 - lambda) * nv)), m = d * lambda; G_T = nv_{T-1}.
template <typename T> struct LambdaStage {
    enum { reads_values = 1, reads_next = 0 };
    const T* values;
    T lambda, one_minus_lambda;
    __device__ __forceinline__ T init(u64 steps, u64 b, u64 col) const {
        return values[(steps - 1) * b + col];
    }
    __device__ __forceinline__ void terms(T r, T d, T nv, T, T& x, T& m) const {
        x = r + cut(d, d * (one_minus_lambda * nv));
        m = d * lambda;
    }
};

// One producer's slice in registers: its steps' inputs and, for GAE, the value of the
// step after its first (bootstrap after T - 1).
template <typename T> struct Slice {
    Raw<T> step[Staging<T>::slice];
    T value_after;
};

template <int Mode, typename Stage, typename T>
__device__ __forceinline__ void load_slice(Slice<T>& s, const Episodes<T>& ep,
                                           const Stage& stage, u64 u, u64 steps, u64 b,
                                           u64 col, bool live) {
    const int K = Staging<T>::slice;
    long long top = (long long)steps - 1 - (long long)(u * K);
#pragma unroll
    for (int k = 0; k < K; ++k) {
        long long t = top - k;
        s.step[k] = Raw<T>{};
        if (live && t >= 0) {
            if constexpr (Stage::reads_values)
                s.step[k] = load_raw<Mode, true>(ep, stage.values, (u64)t * b + col);
            else
                s.step[k] = load_raw<Mode, false>(ep, (const T*)0, (u64)t * b + col);
        }
    }
    s.value_after = (T)0;
    if constexpr (Stage::reads_next) {
        if (live && top >= 0)
            s.value_after = (u64)top + 1 < steps ? stage.values[((u64)top + 1) * b + col]
                                                 : stage.bootstrap[col];
    }
}

template <int Mode, bool KeepValue, typename Stage, typename T>
__device__ __forceinline__ void store_slice(const Slice<T>& s, Tiles<T>& tiles, int buffer,
                                            int row0, u32 lane, const Stage& stage, T gamma) {
    const int K = Staging<T>::slice;
    T v_next = s.value_after;
#pragma unroll
    for (int k = 0; k < K; ++k) {
        T r, d, x, m;
        episode_step<Mode>(s.step[k], gamma, r, d);
        stage.terms(r, d, s.step[k].value, v_next, x, m);
        tiles.x[buffer][row0 + k][lane] = x;
        tiles.m[buffer][row0 + k][lane] = m;
        tiles.d[buffer][row0 + k][lane] = d;
        if (KeepValue) tiles.v[buffer][row0 + k][lane] = s.step[k].value;
        v_next = s.step[k].value;
    }
}

// Runs the scan of `stage` over the block's 32 columns, writing acc to `out` and, with
// `PlusValue` (GAE's returns), acc + v to `plus`.
template <int Mode, bool PlusValue, typename Stage, typename T>
__device__ __forceinline__ void staged_scan(u64 steps, u64 b, const Episodes<T>& ep,
                                            const Stage& stage, T* out, T* plus) {
    const int K = Staging<T>::slice, S = Staging<T>::tile, G = Staging<T>::slices;
    __shared__ Tiles<T> tiles;
    const u32 warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    const u64 col = (u64)blockIdx.x * 32 + lane;
    const bool live = col < b;
    const u64 n_tiles = (steps + S - 1) / S;
    T acc = (T)0;
    u64 mine = warp - 1;
    Slice<T> slice;
    if (warp == 0) {
        if (live) acc = stage.init(steps, b, col);
    } else {
        load_slice<Mode>(slice, ep, stage, mine, steps, b, col, live);
    }
    // Phase j: the chain runs tile j - 1 while the producers fill tile j.
    for (u64 j = 0; j <= n_tiles; ++j) {
        if (warp == 0) {
            if (j > 0) {
                int buffer = (int)((j - 1) & 1);
                long long top = (long long)steps - 1 - (long long)((j - 1) * S);
                // A slice at a time: unrolled over the whole tile, the shared loads
                // ptxas hoists ahead of the chain took more registers than a thread has
                // (it spilled).
#pragma unroll 1
                for (int s0 = 0; s0 < S; s0 += K)
#pragma unroll
                    for (int s = s0; s < s0 + K; ++s) {
                        acc = tiles.x[buffer][s][lane] +
                              cut(tiles.d[buffer][s][lane], tiles.m[buffer][s][lane] * acc);
                        long long t = top - s;
                        if (live && t >= 0) {
                            u64 i = (u64)t * b + col;
                            out[i] = acc;
                            if (PlusValue) plus[i] = acc + tiles.v[buffer][s][lane];
                        }
                    }
            }
        } else if (mine / G == j) {
            store_slice<Mode, PlusValue>(slice, tiles, (int)(j & 1), (int)(mine % G) * K, lane, stage,
                              ep.gamma);
            mine += PRODUCERS;
            if (mine < n_tiles * G) load_slice<Mode>(slice, ep, stage, mine, steps, b, col, live);
        }
        if (j < n_tiles) __syncthreads();
    }
}

// ---- V-trace and n-step: one thread per column ----------------------------------------

#define COLUMNS_PER_BLOCK 32

template <typename T> struct Chunk {
    enum { steps = sizeof(T) == 8 ? 8 : 16 };
};

template <typename T> struct VtraceStep {
    enum { chunk = Chunk<T>::steps };
    T r, d, v, rho;
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

// V-trace (formulas in rlgrad_core::kernels::recurrence); acc holds e_{t+1}.
template <int Mode, typename T> struct VtraceScan {
    typedef VtraceStep<T> Step;
    Episodes<T> ep;
    const T* values;
    const T* rhos;
    T lambda, one_minus_lambda, clip_rho, clip_pg_rho;
    u64 length;
    T* vs;
    T* pg;
    T acc, v_next;
    __device__ Step load(u64 i) const {
        Raw<T> raw = load_raw<Mode, true>(ep, values, i);
        Step s;
        episode_step<Mode>(raw, ep.gamma, s.r, s.d);
        s.v = raw.value;
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

// ---- The kernels ---------------------------------------------------------------------

#define EPISODE_PARAMS(T)                                                                  \
    const T *rewards, const T *discounts, const T *terminated, const T *truncated,        \
        const T *final_values, T gamma
#define EPISODES {rewards, discounts, terminated, truncated, final_values, gamma}

#define COLUMN                                                                             \
    u64 col = (u64)blockIdx.x * blockDim.x + threadIdx.x;                                 \
    if (col >= b) return;

#define RECURRENCE_KERNELS(T, S, MODE, M)                                                  \
    extern "C" __global__ void __launch_bounds__(STAGED_THREADS)                           \
        returns_##M##_##S(u64 steps, u64 b, EPISODE_PARAMS(T), const T* bootstrap,         \
                          T* out) {                                                        \
        Episodes<T> ep = EPISODES;                                                         \
        ReturnsStage<T> stage = {bootstrap};                                               \
        staged_scan<MODE, false>(steps, b, ep, stage, out, (T*)0);                         \
    }                                                                                      \
    extern "C" __global__ void __launch_bounds__(STAGED_THREADS)                           \
        gae_##M##_##S(u64 steps, u64 b, EPISODE_PARAMS(T), const T* values,                \
                      const T* bootstrap, T lambda, T* advantages) {                       \
        Episodes<T> ep = EPISODES;                                                         \
        GaeStage<T> stage = {values, bootstrap, lambda};                                   \
        staged_scan<MODE, false>(steps, b, ep, stage, advantages, (T*)0);                  \
    }                                                                                      \
    extern "C" __global__ void __launch_bounds__(STAGED_THREADS)                           \
        gae_returns_##M##_##S(u64 steps, u64 b, EPISODE_PARAMS(T), const T* values,        \
                              const T* bootstrap, T lambda, T* advantages, T* returns) {   \
        Episodes<T> ep = EPISODES;                                                         \
        GaeStage<T> stage = {values, bootstrap, lambda};                                   \
        staged_scan<MODE, true>(steps, b, ep, stage, advantages, returns);                 \
    }                                                                                      \
    extern "C" __global__ void __launch_bounds__(STAGED_THREADS)                           \
        lambda_returns_##M##_##S(u64 steps, u64 b, EPISODE_PARAMS(T), const T* next_values, \
                                 T lambda, T one_minus_lambda, T* out) {                   \
        Episodes<T> ep = EPISODES;                                                         \
        LambdaStage<T> stage = {next_values, lambda, one_minus_lambda};                    \
        staged_scan<MODE, false>(steps, b, ep, stage, out, (T*)0);                         \
    }                                                                                      \
    extern "C" __global__ void vtrace_##M##_##S(u64 steps, u64 b, EPISODE_PARAMS(T),       \
                                                const T* values, const T* bootstrap,       \
                                                const T* rhos, T lambda,                   \
                                                T one_minus_lambda, T clip_rho,            \
                                                T clip_pg_rho, T* vs, T* pg) {             \
        COLUMN                                                                             \
        VtraceScan<MODE, T> scan = {EPISODES, values, rhos, lambda, one_minus_lambda,      \
                                    clip_rho, clip_pg_rho, steps, vs, pg, (T)0,            \
                                    bootstrap[col]};                                       \
        scan_column(scan, steps, b, col);                                                  \
    }                                                                                      \
    /* n-step: acc = nv_k, k = min(t + n - 1, T - 1), then acc = r'_j + cut(d_j, d_j *    \
       acc) for j = k down to t. */                                                        \
    extern "C" __global__ void n_step_##M##_##S(u64 steps, u64 b, EPISODE_PARAMS(T),       \
                                                const T* next_values, u64 n, T* out) {     \
        COLUMN                                                                             \
        Episodes<T> ep = EPISODES;                                                         \
        for (u64 t = 0; t < steps; ++t) {                                                  \
            u64 last = (n - 1 >= steps - 1 - t) ? steps - 1 : t + n - 1;                   \
            T acc = next_values[last * b + col];                                           \
            for (u64 j = last + 1; j-- > t;) {                                             \
                T r, d;                                                                    \
                episode_step<MODE>(load_raw<MODE, false>(ep, (const T*)0, j * b + col),    \
                                   ep.gamma, r, d);                                        \
                acc = r + cut(d, d * acc);                                                 \
            }                                                                              \
            out[t * b + col] = acc;                                                        \
        }                                                                                  \
    }

#define RECURRENCE_MODES(T, S)                                                             \
    RECURRENCE_KERNELS(T, S, MODE_CONSTANT, constant)                                      \
    RECURRENCE_KERNELS(T, S, MODE_DISCOUNTS, discounts)                                    \
    RECURRENCE_KERNELS(T, S, MODE_TERMINATIONS, terminations)                              \
    RECURRENCE_KERNELS(T, S, MODE_TRUNCATIONS, truncations)

RECURRENCE_MODES(float, f32)
RECURRENCE_MODES(double, f64)
