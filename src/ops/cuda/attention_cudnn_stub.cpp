// The cuDNN prefill route in a CUDA build without cuDNN's headers (cmake/cudnn.cmake did not find
// them): never taken, and `ninfer info` says why.
#include "ops/cuda/attention_cudnn.h"

namespace ninfer::ops::cuda {

bool cudnn_prefill(const ExecContext&, const TensorView&, const KvPlane&, const KvPlane&,
                   const SeqBatch&, float, const TensorView&) {
    return false;
}
bool cudnn_available() {
    return false;
}
std::string cudnn_status() {
    return "not in this build (cuDNN's headers were not found when it was built: "
           "bash tools/cudnn_headers.sh, then reconfigure)";
}
uint64_t cudnn_prefill_runs() {
    return 0;
}
void set_cudnn_prefill_sabotage(bool) {}

} // namespace ninfer::ops::cuda
