// Helpers shared by the tests: seeded random host tensors and tolerance comparisons.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <random>
#include <string>
#include <vector>

#include "common/tolerance.h"
#include "core/tensor.h"
#include "ninfer/error.h"

namespace ninfer::test {

// An environment variable set (or unset: nullptr) for a scope, for switches a library reads at
// every call; the destructor restores its previous value, or its absence.
class ScopedEnv {
public:
    explicit ScopedEnv(const char* name) : name_(name) {
        const char* v = std::getenv(name);
        had_ = v != nullptr;
        if (had_) old_ = v;
    }
    ~ScopedEnv() { had_ ? setenv(name_, old_.c_str(), 1) : unsetenv(name_); }
    ScopedEnv(const ScopedEnv&) = delete;
    ScopedEnv& operator=(const ScopedEnv&) = delete;
    void set(const char* value) const { value ? setenv(name_, value, 1) : unsetenv(name_); }

private:
    const char* name_;
    bool had_ = false;
    std::string old_;
};

// An owning F32 host tensor filled with N(0, scale) values from a seeded generator.
Tensor random_tensor(std::initializer_list<int64_t> dims, uint64_t seed, float scale = 1.0f);
Tensor zeros(std::initializer_list<int64_t> dims, DType dtype = DType::F32);
// A deep copy (contiguous) of a view.
Tensor clone(const TensorView& v);
// Every element of a view as double, in row-major index order (any strides, rank <= 4).
std::vector<double> to_doubles(const TensorView& v);

// gtest assertion: actual matches expected within the preset (reports both norms on failure).
::testing::AssertionResult near(const TensorView& actual, const TensorView& expected,
                                const Tolerance& tol);

// The largest |got[i] - want[i]| over the largest |want[i]| (same sizes).
double max_gap_relative(const std::vector<float>& got, const std::vector<float>& want);

// The directory of the committed HF fixtures (tests/fixtures).
std::string fixtures_dir();

// `name` under the system temp directory, made unique to this process. ctest runs every test
// case as its own process, two or more at a time, so a fixed temp name is a race: one case
// rewrites a drafter directory while another reads it.
std::filesystem::path scratch_path(const std::string& name);

} // namespace ninfer::test
