// Per-stream resources of the CUDA backend (host code: the .cu files and the host .cpp routes).
#pragma once

#include <functional>

namespace ninfer::ops::cuda {

// Runs `release` once when `stream` (made by create_stream) is destroyed, after its work has
// drained and before the stream itself goes: per-stream resources (workspaces, cuBLAS and cuDNN
// handles) free themselves through it. Streams not made by create_stream (the default stream)
// never run it: their resources live as long as the process.
void on_stream_release(void* stream, std::function<void()> release);

} // namespace ninfer::ops::cuda
