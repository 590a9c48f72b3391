// RankBarrier: where the threads of tensor-parallel ranks meet inside a collective
// (ops/collective.h). barrier() returns once every rank has arrived; after abort() every waiting
// or arriving rank throws instead, until reset().
#pragma once

#include <condition_variable>
#include <cstdint>
#include <mutex>

namespace ninfer::ops {

class RankBarrier {
public:
    explicit RankBarrier(int ranks) : ranks_(ranks) {}
    int ranks() const { return ranks_; }

    void barrier(); // throws Error (Internal) once aborted
    void abort();
    void reset();

private:
    void check_alive() const;

    const int ranks_;
    std::mutex mutex_;
    std::condition_variable wake_;
    int arrived_ = 0;
    uint64_t generation_ = 0;
    bool aborted_ = false;
};

} // namespace ninfer::ops
