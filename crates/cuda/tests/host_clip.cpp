// Runs the clip decisions of src/cuda/optim.cu (`clip_scale`, `clip_plan`) on the host
// (host_device.hpp), for the host emulation test in src/optim.rs: the branches, the
// exponents, the f64 arithmetic and the roundings to T, against the Rust formulas of
// rlgrad_core::kernels::clip. What it cannot see is the GPU's own IEEE arithmetic, which
// the GPU tests check.
//
// Reads cases from stdin until its end, each:
//   <f32|f64> plan 1 <max_norm> <sum> <largest> <scaled sum>
// (max_norm as hex bits of an f64, the sums as hex bits of their type) and prints the
// scale, the norm, the first and the second factor as hex bits, one line each.
#include "host_device.hpp"
#include "optim.cu"

template <typename T, typename Bits> static int run_case(const std::string& name, dim3 grid) {
    if (name != "plan") return 2;
    double max_norm = read_scalar<double, uint64_t>();
    T sums[3];
    for (T& sum : sums) sum = read_scalar<T, Bits>();
    std::vector<T> out(4, (T)12345);
    launch(grid, 1, [&] {
        if constexpr (sizeof(T) == 4) {
            clip_scale_f32(&sums[1], &out[0]);
            clip_plan_f32(max_norm, sums, &out[1]);
        } else {
            clip_scale_f64(&sums[1], &out[0]);
            clip_plan_f64(max_norm, sums, &out[1]);
        }
    });
    print_bits<T, Bits>(out);
    return 0;
}

RUN_TYPED_CASES(run_case)
