// Splits work on the rows of a weight over the machine's threads: a real checkpoint converts or
// dequantizes tens of billions of values, and rows are independent. Internal to the formats.
#pragma once

#include <algorithm>
#include <cstdint>
#include <exception>
#include <thread>
#include <vector>

namespace ninfer::model {

// Values below which one thread does a tensor alone (thread start-up would dominate).
inline constexpr int64_t kValuesPerThread = int64_t(1) << 20;

// Runs body(begin, end) over row ranges that cover [0, rows); `values` sizes the split. An
// exception thrown by any range is rethrown here (the first range's first), after every thread
// has ended: a worker never takes the process down.
template <class Body> void parallel_rows(int64_t rows, int64_t values, const Body& body) {
    const int64_t threads = std::min<int64_t>(std::max(1u, std::thread::hardware_concurrency()),
                                              values / kValuesPerThread + 1);
    std::vector<std::exception_ptr> errors(static_cast<size_t>(threads));
    auto run = [&](int64_t t) {
        try {
            body(rows * t / threads, rows * (t + 1) / threads);
        } catch (...) {
            errors[size_t(t)] = std::current_exception();
        }
    };
    std::vector<std::thread> pool;
    for (int64_t t = 1; t < threads; ++t) pool.emplace_back(run, t);
    run(0);
    for (auto& th : pool) th.join();
    for (const std::exception_ptr& e : errors)
        if (e) std::rethrow_exception(e);
}

} // namespace ninfer::model
