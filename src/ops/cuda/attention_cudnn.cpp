// The cuDNN prefill route of paged_attention (attention_cudnn.h): loading libcudnn, building and
// caching the SDPA graphs, running them. Compiled only where cmake/cudnn.cmake found the headers
// (else attention_cudnn_stub.cpp); the library itself is opened at run time.
#include "ops/cuda/attention_cudnn.h"

#include <dlfcn.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <tuple>
#include <unordered_map>
#include <algorithm>

#include <cuda_runtime.h>
#include <cudnn_frontend.h>

#include "core/error.h"
#include "ops/cuda/cuda_ops.h"
#include "ops/cuda/stream_release.h"

// The frontend's dynamic-loading shim reads cuDNN's symbols through this handle
// (NV_CUDNN_FRONTEND_USE_DYNAMIC_LOADING); load_library sets it before any frontend call.
namespace cudnn_frontend {
void* cudnn_dlhandle = nullptr;
}

namespace ninfer::ops::cuda {
namespace {

namespace fe = cudnn_frontend;

// 9.10.2: paged K/V with head dims over 128 (9.10+; 9.10.0 and 9.10.1 have known SDPA bugs),
// ragged Q with paged K/V (9.8+), bottom-right causal masks (9.7+).
constexpr size_t kMinVersion = 91002;
constexpr int kMaxDim = 256;

enum Uid : int64_t { kQ = 1, kK, kV, kO, kSeqQ, kSeqKv, kPageK, kPageV, kQOffset, kOOffset };

struct Library {
    bool loaded = false;
    std::string status;
};

const Library& library() {
    static const Library lib = [] {
        Library l;
        const char* env = std::getenv("NINFER_CUDNN_LIBRARY");
        const char* name = env && *env ? env : "libcudnn.so.9";
        void* handle = dlopen(name, RTLD_NOW | RTLD_LOCAL);
        if (!handle) {
            const char* why = dlerror();
            l.status = std::string("not loaded (") + name + ": " + (why ? why : "not found") +
                       "; set NINFER_CUDNN_LIBRARY or LD_LIBRARY_PATH)";
            return l;
        }
        fe::cudnn_dlhandle = handle;
        // The shim opens libcudart itself (libcudart.so.12 first when both are there): the one
        // of this build's runtime, unless the user named another.
        const std::string cudart = "libcudart.so." + std::to_string(CUDART_VERSION / 1000);
        setenv("CUDNN_FRONTEND_CUDART_LIB_NAME", cudart.c_str(), /*overwrite=*/0);
        size_t version = 0;
        try {
            version = fe::detail::get_backend_version();
        } catch (const std::exception& e) {
            l.status = std::string("not usable (") + name + ": " + e.what() + ")";
            return l;
        }
        const std::string v = std::to_string(version / 10000) + "." +
                              std::to_string(version / 100 % 100) + "." +
                              std::to_string(version % 100);
        if (version < kMinVersion) {
            l.status = "cuDNN " + v + " from " + name + " is older than 9.10.2: not used";
            return l;
        }
        l.loaded = true;
        l.status = "cuDNN " + v + " from " + name;
        return l;
    }();
    return lib;
}

std::atomic<bool> g_sabotage{false};
std::atomic<uint64_t> g_runs{0};

// What a graph is built for: the buckets and every stride and size the graph declares.
struct GraphKey {
    int64_t seqs, rows, context, nH, nKV, D, bs, blocks;
    int64_t q_s0, q_s1, o_s0, o_s1, k_s[3], v_s[3];
    uint32_t scale_bits;
    auto tie() const {
        return std::tie(seqs, rows, context, nH, nKV, D, bs, blocks, q_s0, q_s1, o_s0, o_s1,
                        k_s[0], k_s[1], k_s[2], v_s[0], v_s[1], v_s[2], scale_bits);
    }
    bool operator<(const GraphKey& o) const { return tie() < o.tie(); }
};

struct BuiltGraph {
    std::shared_ptr<fe::graph::Graph> graph; // null: no plan for this shape
    int64_t workspace = 0;
};

// A stream's cuDNN handle and graphs (handles are not shared across threads; each stream belongs
// to one thread of work).
struct StreamState {
    cudnnHandle_t handle = nullptr;
    std::map<GraphKey, BuiltGraph> graphs;
};

struct States {
    std::mutex mutex;
    std::map<std::pair<int, void*>, std::unique_ptr<StreamState>> by_stream;
};
States& states() {
    static States* s = new States; // outlives every stream release at exit
    return *s;
}

StreamState* stream_state(const ExecContext& ctx) {
    States& all = states();
    std::lock_guard lock(all.mutex);
    const std::pair<int, void*> key{ctx.device.index, ctx.stream};
    auto it = all.by_stream.find(key);
    if (it != all.by_stream.end()) return it->second.get();
    auto state = std::make_unique<StreamState>();
    if (fe::detail::create_handle(&state->handle) != CUDNN_STATUS_SUCCESS) return nullptr;
    StreamState* raw = state.get();
    all.by_stream.emplace(key, std::move(state));
    if (ctx.stream)
        on_stream_release(ctx.stream, [key] {
            States& every = states();
            std::lock_guard released(every.mutex);
            auto found = every.by_stream.find(key);
            if (found == every.by_stream.end()) return;
            found->second->graphs.clear();
            fe::detail::destroy_handle(found->second->handle);
            every.by_stream.erase(found);
        });
    return raw;
}

std::shared_ptr<fe::graph::Tensor_attributes> int_tensor(fe::graph::Graph& g, const char* name,
                                                         int64_t uid, int64_t n,
                                                         int64_t cols = 1) {
    return g.tensor(fe::graph::Tensor_attributes()
                        .set_name(name)
                        .set_uid(uid)
                        .set_dim({n, 1, cols, 1})
                        .set_stride({cols, cols, 1, 1})
                        .set_data_type(fe::DataType_t::INT32));
}

// The SDPA graph of `k` (attention_cudnn.h), built on `handle`; the error message when cuDNN has
// no plan for it.
BuiltGraph build_graph(cudnnHandle_t handle, const GraphKey& k, float scale, std::string& why) {
    auto g = std::make_shared<fe::graph::Graph>();
    g->set_io_data_type(fe::DataType_t::BFLOAT16)
        .set_intermediate_data_type(fe::DataType_t::FLOAT)
        .set_compute_data_type(fe::DataType_t::FLOAT);
    const int64_t table = k.context / k.bs;
    // Q [seqs, nH, rows, D] over the packed rows: row stride q_s0, head stride q_s1, each
    // sequence's first row at its ragged offset (elements).
    auto q = g->tensor(fe::graph::Tensor_attributes()
                           .set_name("q")
                           .set_uid(kQ)
                           .set_dim({k.seqs, k.nH, k.rows, k.D})
                           .set_stride({k.rows * k.q_s0, k.q_s1, k.q_s0, 1})
                           .set_ragged_offset(int_tensor(*g, "q_offset", kQOffset, k.seqs + 1)));
    // The planes [blocks, bs, nKV, D] as cuDNN's containers [blocks, nKV, bs, D].
    auto container = [&](const char* name, int64_t uid, const int64_t (&s)[3]) {
        return g->tensor(fe::graph::Tensor_attributes()
                             .set_name(name)
                             .set_uid(uid)
                             .set_dim({k.blocks, k.nKV, k.bs, k.D})
                             .set_stride({s[0], s[2], s[1], 1}));
    };
    auto kc = container("k_cache", kK, k.k_s), vc = container("v_cache", kV, k.v_s);
    auto options = fe::graph::SDPA_attributes()
                       .set_name("paged_prefill")
                       .set_generate_stats(false)
                       .set_attn_scale(scale)
                       .set_padding_mask(true)
                       .set_seq_len_q(int_tensor(*g, "seq_q", kSeqQ, k.seqs))
                       .set_seq_len_kv(int_tensor(*g, "seq_kv", kSeqKv, k.seqs))
                       .set_diagonal_alignment(fe::DiagonalAlignment_t::BOTTOM_RIGHT)
                       .set_diagonal_band_right_bound(0)
                       .set_paged_attention_k_table(int_tensor(*g, "page_k", kPageK, k.seqs, table))
                       .set_paged_attention_v_table(int_tensor(*g, "page_v", kPageV, k.seqs, table))
                       .set_paged_attention_max_seq_len_kv(int(k.context));
    auto [o, stats] = g->sdpa(q, kc, vc, options);
    (void)stats;
    o->set_output(true)
        .set_uid(kO)
        .set_dim({k.seqs, k.nH, k.rows, k.D})
        .set_stride({k.rows * k.o_s0, k.o_s1, k.o_s0, 1})
        .set_ragged_offset(int_tensor(*g, "o_offset", kOOffset, k.seqs + 1));
    fe::error_t built = g->build(handle, {fe::HeurMode_t::A, fe::HeurMode_t::FALLBACK});
    if (built.is_bad()) {
        why = built.get_message();
        return {};
    }
    BuiltGraph out{g, 0};
    if (g->get_workspace_size(out.workspace).is_bad()) {
        why = "no workspace size";
        return {};
    }
    return out;
}

bool supported_layout(const TensorView& q, const KvPlane& k_cache, const KvPlane& v_cache,
                      const TensorView& out) {
    auto rows16 = [](const TensorView& t) { // 16-byte aligned base and row strides, D contiguous
        return reinterpret_cast<uintptr_t>(t.data) % 16 == 0 && t.stride[t.ndim - 1] == 1 &&
               t.stride[0] % 8 == 0 && t.stride[1] % 8 == 0 && (t.ndim < 4 || t.stride[2] % 8 == 0);
    };
    const int64_t D = q.size(2);
    return q.dtype == DType::BF16 && out.dtype == DType::BF16 && !k_cache.quantized() &&
           !v_cache.quantized() && k_cache.data.dtype == DType::BF16 &&
           v_cache.data.dtype == DType::BF16 && D % 8 == 0 && D <= kMaxDim &&
           k_cache.data.size(3) == D && rows16(q) && rows16(out) && rows16(k_cache.data) &&
           rows16(v_cache.data) && k_cache.data.shape[0] == v_cache.data.shape[0];
}

} // namespace

bool cudnn_available() {
    return library().loaded;
}

std::string cudnn_status() {
    return library().status;
}

uint64_t cudnn_prefill_runs() {
    return g_runs;
}

void set_cudnn_prefill_sabotage(bool drop_last_key) {
    g_sabotage = drop_last_key;
}

bool cudnn_prefill(const ExecContext& ctx, const TensorView& q, const KvPlane& k_cache,
                   const KvPlane& v_cache, const SeqBatch& batch, float scale,
                   const TensorView& out) {
    if (!cudnn_available() || !supported_layout(q, k_cache, v_cache, out) || cuda::capturing(ctx))
        return false;
    const TensorView& kc = k_cache.data;
    const TensorView& vc = v_cache.data;
    GraphKey key{};
    key.seqs = pow2_at_least(batch.num_seqs, 1);
    key.rows = pow2_at_least(batch.max_rows_per_seq, 64);
    key.bs = batch.block_size;
    // The context bucket in whole KV blocks (a power of two of at least 256 tokens), at most the
    // block table's width.
    key.context = std::min<int64_t>(pow2_at_least(batch.max_context, 256),
                                    int64_t(batch.block_table_stride) * key.bs);
    key.context = (key.context + key.bs - 1) / key.bs * key.bs;
    if (key.context < batch.max_context) return false;
    key.nH = q.size(1), key.nKV = kc.size(2), key.D = q.size(2), key.blocks = kc.size(0);
    key.q_s0 = q.stride[0], key.q_s1 = q.stride[1], key.o_s0 = out.stride[0];
    key.o_s1 = out.stride[1];
    for (int i = 0; i < 3; ++i) key.k_s[i] = kc.stride[i], key.v_s[i] = vc.stride[i];
    std::memcpy(&key.scale_bits, &scale, sizeof(scale));
    // Offsets are int32 elements.
    if (int64_t(batch.num_rows) * std::max(key.q_s0, key.o_s0) >= INT32_MAX) return false;

    StreamState* state = nullptr;
    try {
        state = stream_state(ctx);
    } catch (const std::exception&) {
        return false;
    }
    if (!state) return false;
    auto found = state->graphs.find(key);
    if (found == state->graphs.end()) {
        std::string why;
        BuiltGraph built;
        try {
            if (fe::detail::set_stream(state->handle, static_cast<cudaStream_t>(ctx.stream)) ==
                CUDNN_STATUS_SUCCESS)
                built = build_graph(state->handle, key, scale, why);
            else
                why = "cudnnSetStream failed";
        } catch (const std::exception& e) {
            why = e.what();
        }
        if (!built.graph)
            std::fprintf(stderr,
                         "ninfer: cuDNN has no attention plan for %lld sequences x %lld rows, "
                         "context %lld, %lld/%lld heads, head dim %lld (%s); the built-in "
                         "kernel serves it\n",
                         (long long)key.seqs, (long long)key.rows, (long long)key.context,
                         (long long)key.nH, (long long)key.nKV, (long long)key.D, why.c_str());
        found = state->graphs.emplace(key, std::move(built)).first;
    }
    const BuiltGraph& g = found->second;
    if (!g.graph) return false;

    const CudnnSdpaMeta m = cudnn_sdpa_meta(
        ctx, batch, int32_t(key.seqs), int32_t(key.context / key.bs), key.q_s0, key.o_s0,
        g_sabotage ? -1 : 0, size_t(g.workspace));
    std::unordered_map<int64_t, void*> pack = {
        {kQ, q.data},           {kK, kc.data},           {kV, vc.data},
        {kO, out.data},         {kSeqQ, m.seq_q},        {kSeqKv, m.seq_kv},
        {kPageK, m.page_table}, {kPageV, m.page_table},  {kQOffset, m.q_offset},
        {kOOffset, m.o_offset}};
    fe::error_t ran;
    try {
        require(fe::detail::set_stream(state->handle, static_cast<cudaStream_t>(ctx.stream)) ==
                    CUDNN_STATUS_SUCCESS,
                "cudnnSetStream failed");
        ran = g.graph->execute(state->handle, pack, m.workspace);
    } catch (const std::exception& e) {
        // The metadata kernel may already be queued: only a failure before cuDNN's launch can
        // fall back cleanly, so a failure here is an error, not a silent second route.
        fail(ErrorCategory::Cuda, "paged_attention: cuDNN's SDPA failed: ", e.what());
    }
    if (ran.is_bad())
        fail(ErrorCategory::Cuda, "paged_attention: cuDNN's SDPA failed: ", ran.get_message());
    ++g_runs;
    return true;
}

} // namespace ninfer::ops::cuda
