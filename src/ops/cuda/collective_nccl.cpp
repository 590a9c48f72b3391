// The NCCL Collective (ops/collective.h), built with -DNINFER_NCCL=ON: one communicator per rank
// from ncclCommInitAll (one process, one GPU a rank), every call enqueued on the rank's stream.
#include <cuda_runtime.h>
#include <nccl.h>

#include <mutex>
#include <set>

#include "core/error.h"
#include "ops/collective.h"
#include "ops/memory.h"
#include "ops/validate.h"

namespace ninfer::ops {
namespace {

void check_nccl(ncclResult_t r, const char* what) {
    if (r != ncclSuccess)
        fail(ErrorCategory::Cuda, "NCCL ", what, ": ", ncclGetErrorString(r));
}

void check_cuda(cudaError_t e, const char* what) {
    if (e != cudaSuccess) fail(ErrorCategory::Cuda, what, ": ", cudaGetErrorString(e));
}

ncclDataType_t nccl_type(DType d) {
    switch (d) {
    case DType::F32: return ncclFloat32;
    case DType::BF16: return ncclBfloat16;
    case DType::F16: return ncclFloat16;
    default: fail_invalid("NCCL all-reduce: ", dtype_name(d), " is not a float dtype");
    }
}

// The communicators of one group. abort() tears them down (freeing ranks blocked in a
// collective); reset() makes new ones.
class NcclGroup {
public:
    explicit NcclGroup(std::vector<int> devices) : devices_(std::move(devices)) { init(); }
    ~NcclGroup() { destroy(); }

    ncclComm_t comm(int rank) {
        std::lock_guard<std::mutex> lock(mutex_);
        if (aborted_) fail_abandoned();
        return comms_[size_t(rank)];
    }
    int ranks() const { return int(devices_.size()); }

    void abort() {
        std::lock_guard<std::mutex> lock(mutex_);
        if (aborted_) return;
        aborted_ = true;
        for (ncclComm_t c : comms_) ncclCommAbort(c);
        comms_.clear();
    }

    void reset() {
        std::lock_guard<std::mutex> lock(mutex_);
        if (!aborted_) return;
        init();
        aborted_ = false;
    }

private:
    void init() {
        comms_.assign(devices_.size(), nullptr);
        check_nccl(ncclCommInitAll(comms_.data(), int(devices_.size()), devices_.data()),
                   "ncclCommInitAll");
    }
    void destroy() {
        for (ncclComm_t c : comms_)
            if (c) ncclCommDestroy(c);
        comms_.clear();
    }

    std::vector<int> devices_;
    std::mutex mutex_;
    std::vector<ncclComm_t> comms_;
    bool aborted_ = false;
};

class NcclCollective final : public GroupCollective<NcclGroup> {
public:
    using GroupCollective::GroupCollective;
    std::string backend() const override { return "nccl"; }
    bool capturable() const override { return true; }

protected:
    void reduce(const ExecContext& ctx, const TensorView& x) override {
        check_nccl(ncclAllReduce(x.data, x.data, size_t(x.numel()), nccl_type(x.dtype), ncclSum,
                                 group_->comm(rank_), cudaStream_t(ctx.stream)),
                   "all-reduce");
    }

    // Rank r's columns are rank_range(W, r, N) of the root's [R, W] (the vocabulary split): the
    // root receives each part whole, then one pitched copy puts its columns in place.
    void gather(const ExecContext& ctx, const TensorView& part, const TensorView& full,
                int root) override {
        const int N = ranks();
        const cudaStream_t stream = cudaStream_t(ctx.stream);
        ncclComm_t comm = group_->comm(rank_);
        const int64_t R = part.size(0);
        if (rank_ != root) {
            check_nccl(ncclSend(part.data, size_t(part.numel()), ncclFloat32, root, comm, stream),
                       "send");
            return;
        }
        const int64_t W = full.size(1);
        auto begin = [&](int r) { return W * r / N; };
        int64_t most = 0;
        for (int r = 0; r < N; ++r) most = std::max(most, begin(r + 1) - begin(r));
        require(part.size(1) == begin(rank_ + 1) - begin(rank_), "gather_columns: the root's ",
                part.describe(), " is not its share of ", W, " columns");
        if (staging_bytes_ < R * most * 4 * N) {
            staging_bytes_ = R * most * 4 * N;
            staging_ = device_allocator(ctx.device).allocate(staging_bytes_);
        }
        auto* staged = static_cast<float*>(staging_.get());
        check_nccl(ncclGroupStart(), "group start");
        for (int r = 0; r < N; ++r)
            if (r != root)
                check_nccl(ncclRecv(staged + r * R * most, size_t(R * (begin(r + 1) - begin(r))),
                                    ncclFloat32, r, comm, stream),
                           "receive");
        check_nccl(ncclGroupEnd(), "group end");
        for (int r = 0; r < N; ++r) {
            const int64_t w = begin(r + 1) - begin(r);
            const float* src = r == root ? part.ptr<float>() : staged + r * R * most;
            check_cuda(cudaMemcpy2DAsync(full.ptr<float>() + begin(r), size_t(W) * 4, src,
                                         size_t(w) * 4, size_t(w) * 4, size_t(R),
                                         cudaMemcpyDeviceToDevice, stream),
                       "gather_columns copy");
        }
    }

private:
    Buffer staging_;
    int64_t staging_bytes_ = 0;
};

} // namespace

bool nccl_available() {
    return true;
}

std::vector<std::shared_ptr<Collective>> make_nccl_collectives(
    const std::vector<ExecContext>& ranks) {
    std::vector<int> devices;
    std::set<int> seen;
    for (const ExecContext& c : ranks) {
        require(!c.device.is_cpu(), "--collective nccl: NCCL runs on CUDA devices, not the CPU");
        require(seen.insert(c.device.index).second, "--collective nccl: cuda:", c.device.index,
                " twice (NCCL takes one rank a GPU; --collective host runs ranks that share one)");
        devices.push_back(c.device.index);
    }
    auto group = std::make_shared<NcclGroup>(devices);
    std::vector<std::shared_ptr<Collective>> out;
    for (int r = 0; r < int(ranks.size()); ++r)
        out.push_back(std::make_shared<NcclCollective>(group, r));
    return out;
}

} // namespace ninfer::ops
