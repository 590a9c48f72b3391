// ExecContext: where and how an op runs. Ops take it first; it carries no model state.
#pragma once

#include "core/tensor.h"

namespace ninfer::ops {

// CPU ops have two modes: Reference (naive loops from the contract, FP64 accumulation: the oracle
// for every other path) and Fast (f32, BLAS, threads).
enum class CpuMode { Reference, Fast };

struct ExecContext {
    Device device = Device::cpu();
    CpuMode cpu_mode = CpuMode::Fast;
    void* stream = nullptr; // cudaStream_t on CUDA devices

    static ExecContext cpu(CpuMode mode = CpuMode::Fast) { return {Device::cpu(), mode, nullptr}; }
    bool reference() const { return cpu_mode == CpuMode::Reference; }
};

} // namespace ninfer::ops

namespace ninfer::ops {

// Sets the thread count of the CPU backend (OpenMP loops and OpenBLAS); n <= 0 keeps all cores.
void set_cpu_threads(int n);

} // namespace ninfer::ops
