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
    // The dtype of weights and activations on this context: F32 on the CPU; BF16 on CUDA by
    // default (F32 there too for exact-parity runs). Logits are always F32; the GDN recurrent
    // state is F32 unless --gdn-state-dtype bf16 (model::CacheSpec::recurrent_dtype).
    DType dtype = DType::F32;
    void* stream = nullptr; // cudaStream_t on CUDA devices (nullptr: the default stream)
    // CPU only: every block-wise fp8 projection (linear, the MoE experts) first quantizes its
    // input rows to e4m3 per block_cols columns (s = max(amax, 1e-12) / 448, code = e4m3_rn(x /
    // s), then code * s), the numerics of CUDA's W8A8 routes (EngineOptions::fp8_weights "w8a8").
    bool cpu_w8a8 = false;

    static ExecContext cpu(CpuMode mode = CpuMode::Fast) {
        return {Device::cpu(), mode, DType::F32, nullptr, false};
    }
    static ExecContext cuda(int index, DType dtype = DType::BF16) {
        return {Device::cuda(index), CpuMode::Fast, dtype, nullptr, false};
    }
    bool reference() const { return cpu_mode == CpuMode::Reference; }
};

// Sets the thread count of the CPU backend (OpenMP loops and OpenBLAS). n <= 0: OMP_NUM_THREADS
// when the user set it, else default_cpu_threads() (ops/cpu/threads.h: the CPUs this process may
// use, by affinity and cgroup quota, less a spare core when that is the whole machine).
void set_cpu_threads(int n);

} // namespace ninfer::ops
