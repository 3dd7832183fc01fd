// Runs the recurrence kernels of src/cuda/recurrence.cu on the host (host_device.hpp), for
// the host emulation test in src/recurrence.rs: what it checks without a GPU is the
// kernels' indexing and order (slices, tiles, the producers' ownership of slices, the
// shared buffers, the last partial tile, columns beyond b) and the episode modes.
//
// Reads cases from stdin until its end, each:
//   <f32|f64> <kernel> <grid x> <threads> <steps> <b> <n>
//   <gamma> <lambda> <clip_rho> <clip_pg_rho>      (hex bits)
//   <length> <hex bits>...   (rewards, discounts, terminated, truncated, final_values,
//                             values, bootstrap, rhos; length 0 for a null pointer)
// and prints the bits of the outputs in hex, one line each: the first output's T x B,
// then the second's (GAE's returns, V-trace's pg advantages) where there is one.
#include <functional>

#include "host_device.hpp"
#include "recurrence.cu"

template <typename T> struct Case {
    u64 steps, b, n;
    T gamma, lambda, clip_rho, clip_pg_rho;
    T *rewards, *discounts, *terminated, *truncated, *final_values, *values, *bootstrap, *rhos;
    T *out, *second;
};

#define CASE_EPISODES                                                                      \
    c.steps, c.b, c.rewards, c.discounts, c.terminated, c.truncated, c.final_values, c.gamma

#define MODE_ENTRIES(T, S, M)                                                              \
    {"returns_" #M, {false, [](Case<T>& c) {                                               \
         returns_##M##_##S(CASE_EPISODES, c.bootstrap, c.out);                             \
     }}},                                                                                  \
    {"gae_" #M, {false, [](Case<T>& c) {                                                   \
         gae_##M##_##S(CASE_EPISODES, c.values, c.bootstrap, c.lambda, c.out);             \
     }}},                                                                                  \
    {"gae_returns_" #M, {true, [](Case<T>& c) {                                            \
         gae_returns_##M##_##S(CASE_EPISODES, c.values, c.bootstrap, c.lambda, c.out,      \
                               c.second);                                                  \
     }}},                                                                                  \
    {"lambda_returns_" #M, {false, [](Case<T>& c) {                                        \
         lambda_returns_##M##_##S(CASE_EPISODES, c.values, c.lambda, (T)1 - c.lambda,      \
                                  c.out);                                                  \
     }}},                                                                                  \
    {"vtrace_" #M, {true, [](Case<T>& c) {                                                 \
         vtrace_##M##_##S(CASE_EPISODES, c.values, c.bootstrap, c.rhos, c.lambda,          \
                          (T)1 - c.lambda, c.clip_rho, c.clip_pg_rho, c.out, c.second);    \
     }}},                                                                                  \
    {"n_step_" #M, {false, [](Case<T>& c) {                                                \
         n_step_##M##_##S(CASE_EPISODES, c.values, c.n, c.out);                            \
     }}},

// Each kernel: whether it has a second output, and its call.
template <typename T> using Entry = std::pair<bool, std::function<void(Case<T>&)>>;
#define KERNEL_TABLE(T, S)                                                                 \
    {MODE_ENTRIES(T, S, constant) MODE_ENTRIES(T, S, discounts)                           \
         MODE_ENTRIES(T, S, terminations) MODE_ENTRIES(T, S, truncations)}

template <typename T, typename Bits>
static int run_case(const std::string& name, dim3 grid, unsigned threads) {
    Case<T> c{};
    std::cin >> c.steps >> c.b >> c.n;
    c.gamma = read_scalar<T, Bits>();
    c.lambda = read_scalar<T, Bits>();
    c.clip_rho = read_scalar<T, Bits>();
    c.clip_pg_rho = read_scalar<T, Bits>();
    T** inputs[] = {&c.rewards, &c.discounts, &c.terminated, &c.truncated,
                    &c.final_values, &c.values, &c.bootstrap, &c.rhos};
    for (T** input : inputs) *input = read_buffer<T, Bits>();
    const Entry<T>* entry = nullptr;
    if constexpr (sizeof(T) == 4) {
        static const std::map<std::string, Entry<float>> table = KERNEL_TABLE(float, f32);
        if (table.count(name)) entry = &table.at(name);
    } else {
        static const std::map<std::string, Entry<double>> table = KERNEL_TABLE(double, f64);
        if (table.count(name)) entry = &table.at(name);
    }
    if (!entry) return 2;
    // A value no kernel computes, so that an output it fails to write shows.
    std::vector<T> out(c.steps * c.b, (T)12345), second(c.steps * c.b, (T)12345);
    c.out = out.data();
    c.second = second.data();
    launch(grid, threads, [&] { entry->second(c); });
    print_bits<T, Bits>(out);
    if (entry->first) print_bits<T, Bits>(second);
    for (T** input : inputs) std::free(*input);
    return 0;
}

int main() {
    std::string type, name;
    dim3 grid{1, 1, 1};
    unsigned threads;
    while (std::cin >> type >> name >> grid.x >> threads) {
        int status = type == "f32" ? run_case<float, uint32_t>(name, grid, threads)
                                   : run_case<double, uint64_t>(name, grid, threads);
        if (status != 0) return status;
        std::fflush(stdout);
    }
    return 0;
}
