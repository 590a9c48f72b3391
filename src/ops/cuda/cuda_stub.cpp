// Stand-ins for the CUDA bodies in builds without CUDA (NINFER_CUDA=OFF): each raises
// Unsupported, so a CUDA device is a clear error rather than a link failure.
#include "core/error.h"
#include "ops/cuda/attention_cudnn.h"
#include "ops/cuda/cuda_ops.h"
#include "ops/cuda/device_caps.h"
#include "ops/cuda/dflash_ops.h"
#include "ops/cuda/linear_fp8.h"
#include "ops/cuda/linear_grouped.h"
#include "ops/cuda/vision_ops.h"

namespace ninfer::ops::cuda {
namespace {

[[noreturn]] void no_cuda(const char* what) {
    // The user asked for a CUDA device: name that, and how to get one; the op only at the end.
    fail(ErrorCategory::Unsupported,
         "a CUDA device needs a CUDA build, and this build of ninfer has no CUDA backend (built "
         "without CUDA: rebuild with nvcc installed and -DNINFER_CUDA=ON, or use --device cpu; "
         "from ", what, ")");
}

} // namespace

// One line per stand-in, so the list reads as a table.
// clang-format off
Allocator& allocator(Device) { no_cuda("allocator"); }
DeviceCaps device_caps(int) { no_cuda("device_caps"); }
std::string device_name(int) { no_cuda("device_name"); }
int cuda_runtime_version() { no_cuda("cuda_runtime_version"); }
void upload(const ExecContext&, const TensorView&, const TensorView&) { no_cuda("upload"); }
void download(const ExecContext&, const TensorView&, const TensorView&) { no_cuda("download"); }
void fill_zero(const ExecContext&, const TensorView&) { no_cuda("fill_zero"); }
void copy(const ExecContext&, const TensorView&, const TensorView&) { no_cuda("copy"); }
void copy_across(const ExecContext&, const TensorView&, const ExecContext&, const TensorView&) { no_cuda("copy_across"); }
void stream_wait(const ExecContext&, const ExecContext&) { no_cuda("stream_wait"); }
void enable_peer_access(int, int) { no_cuda("enable_peer_access"); }
void copy_many(const ExecContext&, const std::vector<TensorView>&, const std::vector<TensorView>&) {
    no_cuda("copy_many");
}
void synchronize(const ExecContext&) { no_cuda("synchronize"); }
bool capturing(const ExecContext&) { no_cuda("capturing"); }
DeviceMemory device_memory(const ExecContext&) { no_cuda("device_memory"); }
void reset_memory_peak(const ExecContext&) { no_cuda("reset_memory_peak"); }
int64_t memory_in_use(const ExecContext&) { no_cuda("memory_in_use"); }
int64_t memory_peak(const ExecContext&) { no_cuda("memory_peak"); }
void bind_device(const ExecContext&) { no_cuda("bind_device"); }
std::shared_ptr<void> create_stream(Device) { no_cuda("create_stream"); }
std::unique_ptr<Graph> capture_graph(const ExecContext&, const std::function<void()>&) {
    no_cuda("capture_graph");
}
void fill_random(const ExecContext&, const TensorView&, uint64_t, float, float) { no_cuda("fill_random"); }
void embedding(const ExecContext&, const TensorView&, const TensorView&, const TensorView&) { no_cuda("embedding"); }
void embedding_bag_add(const ExecContext&, const TensorView&, const TensorView&, const TensorView&, const TensorView&) { no_cuda("embedding_bag_add"); }
void rms_norm(const ExecContext&, const TensorView&, const TensorView&, float, const TensorView&, float) { no_cuda("rms_norm"); }
void gated_rms_norm(const ExecContext&, const TensorView&, const TensorView&, const TensorView&, float, const TensorView&) { no_cuda("gated_rms_norm"); }
void linear(const ExecContext&, const TensorView&, const TensorView&, const TensorView&, bool) { no_cuda("linear"); }
bool rms_norm_linear_fused(const ExecContext&, const TensorView&, const TensorView&, float, const WeightView&, const TensorView&, const TensorView&, const WeightView*, const TensorView*) { no_cuda("rms_norm_linear"); }
bool linear_tc_fp8_fits(const TensorView&, const WeightView&, const TensorView&) { no_cuda("linear"); }
void linear_tc_fp8(const ExecContext&, const TensorView&, const WeightView&, const TensorView&, bool) { no_cuda("linear"); }
bool linear_w8a8_fits(const TensorView&, const WeightView&, const TensorView&) { no_cuda("linear"); }
bool linear_w8a8(const ExecContext&, const TensorView&, const WeightView&, const TensorView&, bool) { no_cuda("linear"); }
void quantize_rows_fp8(const ExecContext&, const TensorView&, const TensorView&, const TensorView&) { no_cuda("quantize_rows_fp8"); }
Fp8LinearRoute linear_fp8_route(const TensorView&, const WeightView&, const TensorView&) { no_cuda("linear"); }
void linear_fp8(const ExecContext&, const TensorView&, const WeightView&, const TensorView&, bool) { no_cuda("linear"); }
void dequantize_fp8(const ExecContext&, const WeightView&, const TensorView&, const TensorView&) { no_cuda("dequantize_fp8"); }
bool linear_gemv_grouped_fits(const TensorView&, const WeightView&) { no_cuda("linear"); }
void linear_gemv_grouped(const ExecContext&, const TensorView&, const WeightView&, const TensorView&, bool) { no_cuda("linear"); }
void linear_grouped(const ExecContext&, const TensorView&, const WeightView&, const TensorView&, bool) { no_cuda("linear"); }
void dequantize_grouped(const ExecContext&, const WeightView&, const TensorView&, const TensorView&) { no_cuda("dequantize_grouped"); }
void mark_used_experts(const ExecContext&, const TensorView&, const TensorView&) { no_cuda("moe_block"); }
bool moe_experts_fp8_fits(const TensorView&, const WeightView&, const WeightView&) { no_cuda("moe_block"); }
void moe_experts_fp8(const ExecContext&, const TensorView&, const WeightView&, const WeightView&, const TensorView&, const TensorView&, const TensorView&) { no_cuda("moe_block"); }
void add(const ExecContext&, const TensorView&, const TensorView&, const TensorView&) { no_cuda("add"); }
void sigmoid_mul(const ExecContext&, const TensorView&, const TensorView&, const TensorView&) { no_cuda("sigmoid_mul"); }
void silu_mul(const ExecContext&, const TensorView&, const TensorView&) { no_cuda("silu_mul"); }
void causal_conv1d_silu(const ExecContext&, const TensorView&, const TensorView&, const SeqBatch&, const TensorView&, const TensorView&) { no_cuda("causal_conv1d_silu"); }
void gdn_gates(const ExecContext&, const TensorView&, const TensorView&, const TensorView&, const TensorView&, const TensorView&, const TensorView&) { no_cuda("gdn_gates"); }
void gated_delta_rule(const ExecContext&, const TensorView&, const TensorView&, const TensorView&, const TensorView&, const TensorView&, const SeqBatch&, const TensorView&, const TensorView&, GdnAlgo) { no_cuda("gated_delta_rule"); }
bool gdn_core_fused_fits(const SeqBatch&, const TensorView&, const TensorView&, int64_t) { no_cuda("gdn_core_fused"); }
void gdn_core_fused(const ExecContext&, const TensorView&, const TensorView&, const TensorView&, const TensorView&, const TensorView&, const TensorView&, const TensorView&, const TensorView&, float, const SeqBatch&, const TensorView&, const TensorView&, const TensorView&) { no_cuda("gdn_core_fused"); }
void rope(const ExecContext&, const TensorView&, const TensorView&, int64_t, double) { no_cuda("rope"); }
void kv_cache_write(const ExecContext&, const TensorView&, const TensorView&, const SeqBatch&, const KvPlane&, const KvPlane&) { no_cuda("kv_cache_write"); }
void paged_attention(const ExecContext&, const TensorView&, const KvPlane&, const KvPlane&, const SeqBatch&, float, const TensorView&) { no_cuda("paged_attention"); }
bool cudnn_prefill(const ExecContext&, const TensorView&, const KvPlane&, const KvPlane&, const SeqBatch&, float, const TensorView&) { no_cuda("paged_attention"); }
bool cudnn_available() { return false; }
std::string cudnn_status() { return "not in this build (no CUDA backend)"; }
uint64_t cudnn_prefill_runs() { return 0; }
void set_cudnn_prefill_sabotage(bool) {}
CudnnSdpaMeta cudnn_sdpa_meta(const ExecContext&, const SeqBatch&, int32_t, int32_t, int64_t, int64_t, int32_t, size_t) { no_cuda("paged_attention"); }
bool attention_prep_fused_fits(const TensorView&, const TensorView&, const TensorView&, const TensorView&, const TensorView&, int64_t, const TensorView&, const KvPlane&, const KvPlane&) { no_cuda("attention_prep"); }
void attention_prep_fused(const ExecContext&, const TensorView&, const TensorView&, const TensorView&, const TensorView&, const TensorView&, float, const TensorView&, int64_t, double, const SeqBatch&, const TensorView&, const KvPlane&, const KvPlane&) { no_cuda("attention_prep"); }
void moe_route(const ExecContext&, const TensorView&, int64_t, const TensorView&, const TensorView&, int64_t, int64_t) { no_cuda("moe_route"); }
void moe_experts(const ExecContext&, const TensorView&, const TensorView&, const TensorView&, const TensorView&, const TensorView&, const TensorView&) { no_cuda("moe_experts"); }
bool moe_experts_capturable(int64_t, int64_t, int64_t) { no_cuda("moe_experts_capturable"); }
void add_sigmoid_scaled(const ExecContext&, const TensorView&, const TensorView&, const TensorView&) { no_cuda("add_sigmoid_scaled"); }
bool moe_block_decode_fits(const TensorView&, const TensorView&, int64_t, const WeightView&, const WeightView&, const WeightView&, const WeightView&) { no_cuda("moe_block"); }
void moe_block_decode(const ExecContext&, const TensorView&, const TensorView&, int64_t, const WeightView&, const WeightView&, const WeightView&, const WeightView&, const TensorView&, int64_t) { no_cuda("moe_block"); }
void logprobs_top_k(const ExecContext&, const TensorView&, int64_t, const TensorView&, const TensorView&, const TensorView&) { no_cuda("logprobs_top_k"); }
void apply_penalties(const ExecContext&, const TensorView&, const SamplingParamsRow*, const TensorView&, const TensorView&, const TensorView&, const TensorView&) { no_cuda("apply_penalties"); }
void sample_tokens(const ExecContext&, const TensorView&, int64_t, const SamplingParamsRow*, const TensorView&, const TensorView&, const TensorView&, const TensorView&, const SampleDrafts&) { no_cuda("sample_tokens"); }

void layer_norm(const ExecContext&, const TensorView&, const TensorView&, const TensorView&, float, const TensorView&) { no_cuda("layer_norm"); }
void bias_act(const ExecContext&, const TensorView&, const TensorView&, Activation) { no_cuda("bias_act"); }
void rope_table(const ExecContext&, const TensorView&, const TensorView&, const TensorView&, int64_t) { no_cuda("rope_table"); }
void segment_attention(const ExecContext&, const TensorView&, const TensorView&, const TensorView&, const int32_t*, const TensorView&, float, const TensorView&) { no_cuda("segment_attention"); }
bool segment_attention_flash_supported(const TensorView&, const TensorView&, const TensorView&, const TensorView&) { no_cuda("segment_attention"); }
void segment_attention_flash(const ExecContext&, const TensorView&, const TensorView&, const TensorView&, const int32_t*, const TensorView&, float, const TensorView&) { no_cuda("segment_attention"); }
void segment_attention_general(const ExecContext&, const TensorView&, const TensorView&, const TensorView&, const int32_t*, const TensorView&, float, const TensorView&) { no_cuda("segment_attention"); }
void span_attention(const ExecContext&, const TensorView&, const TensorView&, const TensorView&, const SpanBatch&, float, const TensorView&) { no_cuda("span_attention"); }
void grouped_dynamic_conv(const ExecContext&, const TensorView&, const TensorView&, const TensorView&, int64_t, const int32_t*, const TensorView&, const TensorView&) { no_cuda("grouped_dynamic_conv"); }
void dflash_select(const ExecContext&, const TensorView&, const TensorView&, const TensorView&, const TensorView&, const TensorView&, const TensorView&, const TensorView&, float, const TensorView&, const TensorView&) { no_cuda("dflash_select"); }
// clang-format on

} // namespace ninfer::ops::cuda
