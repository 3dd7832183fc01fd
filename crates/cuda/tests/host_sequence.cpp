// Runs `pad` and `unpad` of src/cuda/sequence.cu on the host (host_device.hpp), for the
// host emulation test in src/sequence.rs: what it checks without a GPU is the kernels'
// indexing (items, the threads' steps through rows, the units of each feature count, both
// pad orders, the last partial item of a sequence) and that unpad reads no padding and
// pad writes every element. It cannot see the GPU's timing or its coalescing.
//
// Reads cases from stdin until its end, each:
//   <f32|f64> <pad|unpad> <grid x> <batch> <max_len> <features> <time_major> <rows> <out>
//   <length> <hex bits>...   (lengths, then offsets, as u64)
//   <length> <hex bits>...   (the input)
// and prints the `out` elements of the output in hex, one line each.
#include "host_device.hpp"
#include "sequence.cu"

template <typename T, typename Bits>
static int run_case(const std::string& name, dim3 grid) {
    u64 batch, max_len, features, rows, out_len;
    int time_major;
    std::cin >> batch >> max_len >> features >> time_major >> rows >> out_len;
    u64* lengths = read_buffer<u64, u64>();
    u64* offsets = read_buffer<u64, u64>();
    T* input = read_buffer<T, Bits>();
    // A value no kernel computes, so that a missing write shows.
    std::vector<T> out(out_len, (T)12345);
    bool pad = name == "pad";
    launch(grid, BLOCK, [&] {
        if constexpr (sizeof(T) == 4) {
            (pad ? pad_f32 : unpad_f32)(input, lengths, offsets, batch, max_len, features,
                                        time_major, rows, out.data());
        } else {
            (pad ? pad_f64 : unpad_f64)(input, lengths, offsets, batch, max_len, features,
                                        time_major, rows, out.data());
        }
    });
    print_bits<T, Bits>(out);
    std::free(lengths);
    std::free(offsets);
    std::free(input);
    return 0;
}

RUN_TYPED_CASES(run_case)
