// Splits a dequantization over the machine's threads: a real checkpoint dequantizes tens of
// billions of values at load, and rows are independent. Internal to the weight formats.
#pragma once

#include <algorithm>
#include <cstdint>
#include <thread>
#include <vector>

namespace ninfer::model {

// Values below which one thread does a tensor alone (thread start-up would dominate).
inline constexpr int64_t kValuesPerThread = int64_t(1) << 20;

// Runs body(begin, end) over row ranges that cover [0, rows); `values` sizes the split.
template <class Body> void parallel_rows(int64_t rows, int64_t values, const Body& body) {
    const int64_t threads = std::min<int64_t>(std::max(1u, std::thread::hardware_concurrency()),
                                              values / kValuesPerThread + 1);
    std::vector<std::thread> pool;
    for (int64_t t = 1; t < threads; ++t)
        pool.emplace_back(body, rows * t / threads, rows * (t + 1) / threads);
    body(int64_t(0), rows / threads);
    for (auto& th : pool) th.join();
}

} // namespace ninfer::model
