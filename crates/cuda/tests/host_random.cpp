// Runs the random kernels of src/cuda/random.cu on the host (host_device.hpp), for the
// host emulation test in src/random.rs: the stream's jumps and steps, the chunks, the
// conversions and the Box-Muller pairs (with math.cuh's log, sin and cos), checked against
// the Cpu's draws. What it cannot see is the GPU's own 64-bit multiplies and IEEE
// arithmetic, which the GPU test checks.
//
// Reads cases from stdin until its end, each:
//   <f32|f64> uniform <grid x> <state lo> <state hi> <inc lo> <inc hi> <n> <low> <high>
//   <f32|f64> normal <grid x> <state lo> <state hi> <inc lo> <inc hi> <n> <has spare>
//                    <spare> <mean> <std>
// (the words in hex, the scalars as hex bits of their type, f64 for the normals') and
// prints the outputs' bits in hex, one line each.
#include "host_device.hpp"
#include "random.cu"

template <typename T, typename Bits>
static int run_case(const std::string& name, dim3 grid) {
    u64 s_lo, s_hi, i_lo, i_hi, n;
    std::cin >> std::hex >> s_lo >> s_hi >> i_lo >> i_hi >> std::dec >> n;
    std::vector<T> out(n, (T)12345);
    if (name == "uniform") {
        T low = read_scalar<T, Bits>(), high = read_scalar<T, Bits>();
        launch(grid, BLOCK, [&] {
            if constexpr (sizeof(T) == 4) rng_uniform_f32(s_lo, s_hi, i_lo, i_hi, n, low, high, out.data());
            else rng_uniform_f64(s_lo, s_hi, i_lo, i_hi, n, low, high, out.data());
        });
    } else if (name == "normal") {
        int has_spare;
        std::cin >> has_spare;
        double spare = read_scalar<double, u64>(), mean = read_scalar<double, u64>(),
               deviation = read_scalar<double, u64>();
        launch(grid, BLOCK, [&] {
            if constexpr (sizeof(T) == 4)
                rng_normal_f32(s_lo, s_hi, i_lo, i_hi, n, has_spare, spare, mean, deviation, out.data());
            else rng_normal_f64(s_lo, s_hi, i_lo, i_hi, n, has_spare, spare, mean, deviation, out.data());
        });
    } else {
        return 2;
    }
    print_bits<T, Bits>(out);
    return 0;
}

RUN_TYPED_CASES(run_case)
