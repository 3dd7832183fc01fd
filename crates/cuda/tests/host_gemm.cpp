// Runs the matmul kernels of src/cuda/matmul.cu on the host (host_device.hpp), for the
// host emulation test in src/matmul.rs. What this checks without a GPU is the
// kernels' indexing and order (tiles, vector loads, the k tail, edge tiles, batches);
// that the GPU's fma is IEEE's is what the GPU tests check.
//
// Reads cases from stdin until its end, each:
//   <f32|f64> <kernel> <grid x> <grid y> <grid z> <m> <n> <k> <batches>
//   <count> <stride>...                        (lda ldb, or a_rs a_cs b_rs b_cs)
//   <ndim> <offset> <dims>... <strides>...     (A's batch view, then B's)
//   <length> <hex bits>...                     (A's buffer, then B's)
//   <act> <length> <hex bits>...               (matmul_bias_* only: the activation's
//                                               code and the bias)
// and prints the output's bits in hex, one line each.
#include "host_device.hpp"
#include "matmul.cu"

template <typename T>
using StridedKernel = void (*)(const T*, Strided, u64, u64, const T*, Strided, u64, u64, T*,
                               u64, u64, u64, u64);
template <typename T>
using TiledKernel = void (*)(const T*, Strided, u64, const T*, Strided, u64, T*, u64, u64,
                             u64, u64);
template <typename T>
using BiasKernel = void (*)(const T*, Strided, u64, const T*, Strided, u64, T*, u64, u64, u64,
                            u64, const T*, int);

#define TILED_ENTRY(EDGE, LAYOUT, S) {"matmul_" #EDGE "_" #LAYOUT, matmul_##EDGE##_##LAYOUT##_##S}
#define TILED_TABLE(S)                                                                         \
    {TILED_ENTRY(128, nn, S), TILED_ENTRY(128, tn, S), TILED_ENTRY(128, nt, S),                \
     TILED_ENTRY(128, tt, S), TILED_ENTRY(64, nn, S),  TILED_ENTRY(64, tn, S),                 \
     TILED_ENTRY(64, nt, S),  TILED_ENTRY(64, tt, S),  TILED_ENTRY(32, nn, S),                 \
     TILED_ENTRY(32, tn, S),  TILED_ENTRY(32, nt, S),  TILED_ENTRY(32, tt, S)}

#define BIAS_ENTRY(EDGE, S) {"matmul_bias_" #EDGE "_nn", matmul_bias_##EDGE##_nn_##S}
#define BIAS_TABLE(S) {BIAS_ENTRY(64, S), BIAS_ENTRY(32, S)}

static Strided read_view() {
    Strided s{};
    std::cin >> s.ndim >> s.offset;
    for (u32 d = 0; d < s.ndim; ++d) std::cin >> s.dims[d];
    for (u32 d = 0; d < s.ndim; ++d) std::cin >> s.strides[d];
    return s;
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
        launch(grid, BLOCK, [&] {
            kernel(a, a_batch, strides[0], strides[1], b, b_batch, strides[2], strides[3], out,
                   m, n, k, batches);
        });
    } else if (count == 2 && name.rfind("matmul_bias_", 0) == 0) {
        int act;
        std::cin >> act;
        T* bias = read_buffer<T, Bits>();
        BiasKernel<T> kernel = nullptr;
        if constexpr (sizeof(T) == 4) {
            static const std::map<std::string, BiasKernel<float>> table = BIAS_TABLE(f32);
            if (table.count(name)) kernel = table.at(name);
        } else {
            static const std::map<std::string, BiasKernel<double>> table = BIAS_TABLE(f64);
            if (table.count(name)) kernel = table.at(name);
        }
        if (!kernel) return 2;
        launch(grid, BLOCK, [&] {
            kernel(a, a_batch, strides[0], b, b_batch, strides[1], out, m, n, k, batches, bias,
                   act);
        });
        std::free(bias);
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
        launch(grid, BLOCK, [&] {
            kernel(a, a_batch, strides[0], b, b_batch, strides[1], out, m, n, k, batches);
        });
    } else {
        return 2;
    }
    print_bits<T, Bits>(c);
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
