// Runs `sum_contiguous` of src/cuda/reduce.cu on the host (host_device.hpp), for the host
// emulation test in src/reduce.rs: what it checks without a GPU is the kernel's indexing
// and order (lanes, leaves, groups, the persistent grid's walk, the combining tree's
// levels and tickets, the unaligned and checked loads) and that every ticket is back at 0
// after a launch. It cannot see the GPU's races between blocks (see host_device.hpp).
//
// Reads cases from stdin until its end, each:
//   <f32|f64> <grid x> <launches> <offset> <n> <divide> <divisor> <mean>
//       (divisor and mean in hex bits; <mean> is `-` for none)
//   <length> <hex bits>...   (offset + n elements; the run starts `offset` elements in)
// runs the kernel <launches> times (a second launch finds the tickets the first left) and
// prints each launch's result in hex, one line each. Exits with 3 if a ticket is left
// non-zero after any launch.
//
// Or, for `sum_columns_once` (level 1 and sum_finish in one launch, one block per column):
//   <f32|f64> columns <outer> <len> <inner> <divide> <divisor> <means>
//       (<means> is `-`, or one hex value per column)
//   <length> <hex bits>...   (the [outer, len, inner] array)
// and prints every column's result in hex, one line each.
#include <algorithm>

#include "host_device.hpp"
#include "reduce.cu"

template <typename T, typename Bits> static int run_case(dim3 grid) {
    u64 offset, n;
    int launches, divide;
    std::string mean_text;
    std::cin >> launches >> offset >> n >> divide;
    T divisor = read_scalar<T, Bits>();
    std::cin >> mean_text;
    T mean[1] = {(T)0};
    if (mean_text != "-") {
        Bits bits = (Bits)std::stoull(mean_text, nullptr, 16);
        std::memcpy(&mean[0], &bits, sizeof(T));
    }
    T* buffer = read_buffer<T, Bits>();
    // Room for every level of the combining tree (each at most half the one below).
    std::vector<T> partials(2 * LANES * (n / Contiguous<T>::GROUP_LEN + 1));
    for (int launch_count = 0; launch_count < launches; ++launch_count) {
        // A value no kernel computes, so that a missing write, or a read of a vector
        // no block wrote, shows.
        std::vector<T> out(1, (T)12345);
        std::fill(partials.begin(), partials.end(), (T)12345);
        launch(grid, BLOCK, [&] {
            if constexpr (sizeof(T) == 4) {
                sum_contiguous_f32(buffer + offset, n, mean_text == "-" ? nullptr : mean,
                                   divide, divisor, partials.data(), out.data());
            } else {
                sum_contiguous_f64(buffer + offset, n, mean_text == "-" ? nullptr : mean,
                                   divide, divisor, partials.data(), out.data());
            }
        });
        print_bits<T, Bits>(out);
        for (u32 ticket : sum_tickets) {
            if (ticket != 0) return 3;
        }
    }
    std::free(buffer);
    return 0;
}

template <typename T, typename Bits> static int run_columns() {
    u64 outer, len, inner;
    int divide;
    std::string means_text;
    std::cin >> outer >> len >> inner >> divide;
    T divisor = read_scalar<T, Bits>();
    std::cin >> means_text;
    u64 columns = outer * inner;
    std::vector<T> means;
    if (means_text != "-") {
        Bits bits = (Bits)std::stoull(means_text, nullptr, 16);
        T first;
        std::memcpy(&first, &bits, sizeof(T));
        means.push_back(first);
        for (u64 o = 1; o < columns; ++o) means.push_back(read_scalar<T, Bits>());
    }
    T* buffer = read_buffer<T, Bits>();
    std::vector<T> out(columns, (T)12345);
    launch(dim3{(unsigned)columns, 1, 1}, BLOCK, [&] {
        const T* m = means.empty() ? nullptr : means.data();
        if constexpr (sizeof(T) == 4) {
            sum_columns_once_f32(buffer, m, len, inner, divide, divisor, nullptr, out.data());
        } else {
            sum_columns_once_f64(buffer, m, len, inner, divide, divisor, nullptr, out.data());
        }
    });
    print_bits<T, Bits>(out);
    std::free(buffer);
    return 0;
}

int main() {
    std::string type, word;
    dim3 grid{1, 1, 1};
    while (std::cin >> type >> word) {
        int status;
        if (word == "columns") {
            status = type == "f32" ? run_columns<float, uint32_t>()
                                   : run_columns<double, uint64_t>();
            if (status != 0) return status;
            std::fflush(stdout);
            continue;
        }
        grid.x = (unsigned)std::stoul(word);
        status = type == "f32" ? run_case<float, uint32_t>(grid)
                               : run_case<double, uint64_t>(grid);
        if (status != 0) return status;
        std::fflush(stdout);
    }
    return 0;
}
