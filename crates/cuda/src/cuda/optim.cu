// Fused optimizer updates (rlgrad_core::kernels::optim): one thread per parameter element,
// the formula of each rule's documentation in its order of operations (the Cpu's
// Update::apply_chunk), step scalars computed on the host, up to 16 tensors per launch.
// Optional slots are null.

#define EACH for (u64 i = first_index(); i < n; i += grid_stride())

template <typename T> __device__ void sgd(T* p, const T* g, u64 n, T lr, T wd) {
    EACH {
        T grad = wd != (T)0 ? g[i] + wd * p[i] : g[i];
        p[i] = p[i] - lr * grad;
    }
}

template <typename T>
__device__ void momentum_torch(T* p, const T* g, T* buf, u64 n, T lr, T momentum, T dampening,
                               int nesterov, T wd, int first_step) {
    T one_minus_dampening = (T)1 - dampening;
    EACH {
        T grad = wd != (T)0 ? g[i] + wd * p[i] : g[i];
        T b = first_step ? grad : buf[i] * momentum + one_minus_dampening * grad;
        buf[i] = b;
        T d = nesterov ? grad + momentum * b : b;
        p[i] = p[i] - lr * d;
    }
}

template <typename T>
__device__ void momentum_keras(T* p, const T* g, T* velocity, u64 n, T lr, T momentum,
                               int nesterov, T wd) {
    EACH {
        T param = p[i];
        if (wd != (T)0) param = param - (param * wd) * lr;
        T v = velocity[i] * momentum - g[i] * lr;
        velocity[i] = v;
        p[i] = nesterov ? param + (v * momentum - g[i] * lr) : param + v;
    }
}

template <typename T>
__device__ void momentum_core(T* p, const T* g, T* change, u64 n, T lr, T momentum) {
    EACH {
        T c = lr * g[i] + momentum * change[i];
        change[i] = c;
        p[i] = p[i] - c;
    }
}

template <typename T>
__device__ void adam_torch(T* p, const T* g, T* m, T* v, T* v_max, u64 n, T step_size,
                           T bias_correction2_sqrt, T one_minus_beta1, T beta2,
                           T one_minus_beta2, T eps, T wd, T keep) {
    T neg_step = -step_size;
    EACH {
        T param = p[i];
        T grad = g[i];
        if (keep != (T)1) param = param * keep;
        if (wd != (T)0) grad = grad + wd * param;
        T mi = m[i] + one_minus_beta1 * (grad - m[i]);
        T vi = v[i] * beta2 + one_minus_beta2 * (grad * grad);
        m[i] = mi;
        v[i] = vi;
        T vv = vi;
        if (v_max) {
            vv = max2(v_max[i], vi);
            v_max[i] = vv;
        }
        p[i] = param + (neg_step * mi) / (rl_sqrt_t(vv) / bias_correction2_sqrt + eps);
    }
}

template <typename T>
__device__ void adam_keras(T* p, const T* g, T* m, T* v, T* v_max, u64 n, T alpha, T lr,
                           T one_minus_beta1, T one_minus_beta2, T eps, T wd) {
    EACH {
        T param = p[i];
        T grad = g[i];
        if (wd != (T)0) param = param - (param * wd) * lr;
        T mi = m[i] + (grad - m[i]) * one_minus_beta1;
        T vi = v[i] + (grad * grad - v[i]) * one_minus_beta2;
        m[i] = mi;
        v[i] = vi;
        T vv = vi;
        if (v_max) {
            vv = max2(v_max[i], vi);
            v_max[i] = vv;
        }
        p[i] = param - (mi * alpha) / (rl_sqrt_t(vv) + eps);
    }
}

template <typename T>
__device__ void rmsprop(T* p, const T* g, T* square_avg, T* grad_avg, T* buffer, u64 n,
                        int torch, T lr, T alpha, T one_minus_alpha, T eps, T momentum, T wd) {
    EACH {
        T param = p[i];
        T grad = g[i];
        if (torch) {
            if (wd != (T)0) grad = grad + wd * param;
            T sq = square_avg[i] * alpha + one_minus_alpha * (grad * grad);
            square_avg[i] = sq;
            T avg;
            if (grad_avg) {
                T ga = grad_avg[i] + one_minus_alpha * (grad - grad_avg[i]);
                grad_avg[i] = ga;
                avg = rl_sqrt_t(sq + (T)-1 * (ga * ga)) + eps;
            } else {
                avg = rl_sqrt_t(sq) + eps;
            }
            if (buffer) {
                T b = buffer[i] * momentum + grad / avg;
                buffer[i] = b;
                p[i] = param + (-lr) * b;
            } else {
                p[i] = param + ((-lr) * grad) / avg;
            }
        } else {
            if (wd != (T)0) param = param - (param * wd) * lr;
            T sq = alpha * square_avg[i] + one_minus_alpha * (grad * grad);
            square_avg[i] = sq;
            T denominator;
            if (grad_avg) {
                T ga = alpha * grad_avg[i] + one_minus_alpha * grad;
                grad_avg[i] = ga;
                denominator = sq - ga * ga + eps;
            } else {
                denominator = sq + eps;
            }
            T increment = (lr * grad) / rl_sqrt_t(denominator);
            if (buffer) {
                T b = momentum * buffer[i] + increment;
                buffer[i] = b;
                p[i] = param - b;
            } else {
                p[i] = param - increment;
            }
        }
    }
}

template <typename T>
__device__ void adagrad_torch(T* p, const T* g, T* sum, u64 n, T clr, T eps, T wd) {
    T neg_clr = -clr;
    EACH {
        T grad = wd != (T)0 ? g[i] + wd * p[i] : g[i];
        T s = sum[i] + grad * grad;
        sum[i] = s;
        p[i] = p[i] + (neg_clr * grad) / (rl_sqrt_t(s) + eps);
    }
}

template <typename T>
__device__ void adagrad_keras(T* p, const T* g, T* sum, u64 n, T lr, T eps, T wd) {
    EACH {
        T param = p[i];
        if (wd != (T)0) param = param - (param * wd) * lr;
        T s = sum[i] + g[i] * g[i];
        sum[i] = s;
        p[i] = param - (lr * g[i]) / rl_sqrt_t(s + eps);
    }
}

// TD3's and DDPG's soft target update, `target = (source * tau) + (target * keep)`
// (rlgrad_core::cpu::optim::polyak).
template <typename T> __device__ void polyak(T* target, const T* source, u64 n, T tau, T keep) {
    EACH { target[i] = source[i] * tau + target[i] * keep; }
}

// A global-norm clip decided on the device (rlgrad_core::kernels::clip): one thread each,
// the Rust formulas in their order, f64 where they are f64. The binary exponent e of
// x = m 2^e, m in [0.5, 1); T's largest has 128 (f32) or 1024 (f64).
template <typename T> __device__ int binary_exponent(T x) {
    int e;
    if constexpr (sizeof(T) == 4) frexpf(x, &e);
    else frexp(x, &e);
    return e;
}

// clip::scale_exponent: at most two below T's largest, so that 2^-k stays normal.
template <typename T> __device__ int scale_exponent(T largest) {
    int top = sizeof(T) == 4 ? 128 : 1024;
    int e = binary_exponent(largest);
    return e < top - 2 ? e : top - 2;
}

// clip::down_scale: 2^-k rounded to T (exact: a power of two in range), 1 for 0 or non-finite.
template <typename T> __device__ void clip_scale(const T* largest, T* scale) {
    T x = largest[0];
    *scale = (x == (T)0 || !is_finite(x)) ? (T)1 : (T)ldexp(1.0, -scale_exponent(x));
}

// clip::clip_factors: [norm, first, second] from [sum, largest, scaled sum].
template <typename T> __device__ void clip_plan(double max_norm, const T* sums, T* out) {
    T sum = sums[0], largest = sums[1], scaled = sums[2];
    T root;
    int exponent = 0;
    if (!is_inf(sum)) {
        root = rl_sqrt_t(sum);
    } else if (is_inf(largest)) {
        root = largest;
    } else {
        root = rl_sqrt_t(scaled);
        exponent = scale_exponent(largest);
    }
    T norm = root, first = (T)1, second = (T)1;
    if (exponent == 0) {
        T coef = (T)max_norm / (root + (T)1e-6);
        if (coef < (T)1 || is_nan(coef)) second = coef;
    } else {
        norm = (T)((double)root * ldexp(1.0, exponent));
        double down = ldexp(1.0, -exponent);
        double coef_up = max_norm / ((double)root + 1e-6 * down);
        if (coef_up < ldexp(1.0, exponent)) {
            first = (T)down;
            second = (T)coef_up;
        }
    }
    out[0] = norm;
    out[1] = first;
    out[2] = second;
}

// A launch updates up to PARAMS_PER_LAUNCH tensors of one update (multi-tensor, as
// PyTorch's foreach and fused optimizers do): blockIdx.y picks the tensor, blockIdx.x and
// the grid stride run over its elements. The table is a kernel parameter (read in place:
// __grid_constant__), so a launch needs no upload and nothing that a CUDA graph could not
// capture. Slots unused by a rule are null; `a`, `b`, `c` follow the kernel's order.
#define PARAMS_PER_LAUNCH 16
struct ParamRow {
    u64 n, p, g, a, b, c;
};
struct Params {
    ParamRow rows[PARAMS_PER_LAUNCH];
};

template <typename T> __device__ __forceinline__ T* at(u64 address) { return (T*)address; }

#define ROW const ParamRow& r = params.rows[blockIdx.y];

#define OPTIM_KERNELS(T, S)                                                                \
    extern "C" __global__ void sgd_##S(const __grid_constant__ Params params, T lr, T wd) {  \
        ROW sgd<T>(at<T>(r.p), at<T>(r.g), r.n, lr, wd);                                   \
    }                                                                                      \
    extern "C" __global__ void momentum_torch_##S(const __grid_constant__ Params params,   \
                                                  T lr, T momentum, T dampening,           \
                                                  int nesterov, T wd, int first_step) {    \
        ROW momentum_torch<T>(at<T>(r.p), at<T>(r.g), at<T>(r.a), r.n, lr, momentum,       \
                              dampening, nesterov, wd, first_step);                        \
    }                                                                                      \
    extern "C" __global__ void momentum_keras_##S(const __grid_constant__ Params params,   \
                                                  T lr, T momentum, int nesterov, T wd) {  \
        ROW momentum_keras<T>(at<T>(r.p), at<T>(r.g), at<T>(r.a), r.n, lr, momentum,       \
                              nesterov, wd);                                               \
    }                                                                                      \
    extern "C" __global__ void momentum_core_##S(const __grid_constant__ Params params,    \
                                                 T lr, T momentum) {                       \
        ROW momentum_core<T>(at<T>(r.p), at<T>(r.g), at<T>(r.a), r.n, lr, momentum);       \
    }                                                                                      \
    extern "C" __global__ void adam_torch_##S(const __grid_constant__ Params params,       \
                                              T step_size, T bc2_sqrt, T omb1, T beta2,    \
                                              T omb2, T eps, T wd, T keep) {               \
        ROW adam_torch<T>(at<T>(r.p), at<T>(r.g), at<T>(r.a), at<T>(r.b), at<T>(r.c), r.n, \
                          step_size, bc2_sqrt, omb1, beta2, omb2, eps, wd, keep);          \
    }                                                                                      \
    extern "C" __global__ void adam_keras_##S(const __grid_constant__ Params params,       \
                                              T alpha, T lr, T omb1, T omb2, T eps,        \
                                              T wd) {                                      \
        ROW adam_keras<T>(at<T>(r.p), at<T>(r.g), at<T>(r.a), at<T>(r.b), at<T>(r.c), r.n, \
                          alpha, lr, omb1, omb2, eps, wd);                                 \
    }                                                                                      \
    extern "C" __global__ void rmsprop_##S(const __grid_constant__ Params params,          \
                                           int torch, T lr, T alpha, T oma, T eps,         \
                                           T momentum, T wd) {                             \
        ROW rmsprop<T>(at<T>(r.p), at<T>(r.g), at<T>(r.a), at<T>(r.b), at<T>(r.c), r.n,    \
                       torch, lr, alpha, oma, eps, momentum, wd);                          \
    }                                                                                      \
    extern "C" __global__ void adagrad_torch_##S(const __grid_constant__ Params params,    \
                                                 T clr, T eps, T wd) {                     \
        ROW adagrad_torch<T>(at<T>(r.p), at<T>(r.g), at<T>(r.a), r.n, clr, eps, wd);       \
    }                                                                                      \
    extern "C" __global__ void adagrad_keras_##S(const __grid_constant__ Params params,    \
                                                 T lr, T eps, T wd) {                      \
        ROW adagrad_keras<T>(at<T>(r.p), at<T>(r.g), at<T>(r.a), r.n, lr, eps, wd);        \
    }                                                                                      \
    /* Polyak averaging: the target is `p`, its source `g`. */                             \
    extern "C" __global__ void polyak_##S(const __grid_constant__ Params params, T tau,    \
                                          T keep) {                                        \
        ROW polyak<T>(at<T>(r.p), at<T>(r.g), r.n, tau, keep);                             \
    }                                                                                      \
    extern "C" __global__ void clip_scale_##S(const T* largest, T* scale) {                \
        clip_scale<T>(largest, scale);                                                     \
    }                                                                                      \
    extern "C" __global__ void clip_plan_##S(double max_norm, const T* sums, T* out) {     \
        clip_plan<T>(max_norm, sums, out);                                                 \
    }

OPTIM_KERNELS(float, f32)
OPTIM_KERNELS(double, f64)
