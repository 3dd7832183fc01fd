// Fused LSTM cells (rlgrad_core::kernels::CellKernel): one thread per unit of each row
// in grid-stride loops, the canonical formulas of lstm_forward and lstm_backward
// (cell.rs) in the same order of operations. Layouts: gates [B, 4H] and cache [B, 5H]
// row by row (gate k of unit j at k * H + j), state and grad_state [2, B, H] (h', c').

template <typename T>
__device__ void lstm_cell(const T* gates, const T* c, T* cache, T* state, u64 batch,
                          u64 hidden) {
    u64 n = batch * hidden;
    for (u64 e = first_index(); e < n; e += grid_stride()) {
        u64 b = e / hidden, j = e % hidden;
        const T* pre = gates + b * 4 * hidden + j;
        T i = rl_sigmoid_t(pre[0]), f = rl_sigmoid_t(pre[hidden]);
        T g = rl_tanh_t(pre[2 * hidden]), o = rl_sigmoid_t(pre[3 * hidden]);
        T c_next = f * c[e] + i * g;
        T tanh_c = rl_tanh_t(c_next);
        T* saved = cache + b * 5 * hidden + j;
        saved[0] = i;
        saved[hidden] = f;
        saved[2 * hidden] = g;
        saved[3 * hidden] = o;
        saved[4 * hidden] = tanh_c;
        state[e] = o * tanh_c;
        state[n + e] = c_next;
    }
}

template <typename T>
__device__ void lstm_cell_backward(const T* cache, const T* c, const T* grad_state,
                                   T* grad_gates, T* grad_c, u64 batch, u64 hidden) {
    u64 n = batch * hidden;
    for (u64 e = first_index(); e < n; e += grid_stride()) {
        u64 b = e / hidden, j = e % hidden;
        const T* saved = cache + b * 5 * hidden + j;
        T i = saved[0], f = saved[hidden], g = saved[2 * hidden], o = saved[3 * hidden];
        T tanh_c = saved[4 * hidden];
        T dh = grad_state[e];
        T dc = grad_state[n + e] + (dh * o) * ((T)1 - tanh_c * tanh_c);
        T* out = grad_gates + b * 4 * hidden + j;
        out[0] = (dc * g) * ((T)1 - i) * i;
        out[hidden] = (dc * c[e]) * ((T)1 - f) * f;
        out[2 * hidden] = (dc * i) * ((T)1 - g * g);
        out[3 * hidden] = (dh * tanh_c) * ((T)1 - o) * o;
        grad_c[e] = dc * f;
    }
}

#define CELL_KERNELS(T, S)                                                                 \
    extern "C" __global__ void lstm_cell_##S(const T* gates, const T* c, T* cache,         \
                                             T* state, u64 batch, u64 hidden) {            \
        lstm_cell<T>(gates, c, cache, state, batch, hidden);                               \
    }                                                                                      \
    extern "C" __global__ void lstm_cell_backward_##S(const T* cache, const T* c,          \
                                                      const T* grad_state, T* grad_gates,  \
                                                      T* grad_c, u64 batch, u64 hidden) {  \
        lstm_cell_backward<T>(cache, c, grad_state, grad_gates, grad_c, batch, hidden);    \
    }

CELL_KERNELS(float, f32)
CELL_KERNELS(double, f64)
