// The host-staging Collective (collective.h): ranks meet at a barrier over host copies of their
// parts. NCCL's lives in ops/cuda/collective_nccl.cpp when the build has it.
#include "ops/collective.h"

#include <cstring>

#include "core/error.h"
#include "ops/memory.h"
#include "ops/rank_barrier.h"
#include "ops/validate.h"

namespace ninfer::ops {
namespace {

// What the ranks of one host group share: the barrier and each rank's posted part (as F32).
class HostGroup : public RankBarrier {
public:
    explicit HostGroup(int n) : RankBarrier(n), parts_(size_t(n)), widths_(size_t(n)) {}

    std::vector<float>& part(int rank) { return parts_[size_t(rank)]; }
    int64_t& width(int rank) { return widths_[size_t(rank)]; }
    std::vector<float>& sum() { return sum_; }

private:
    std::vector<std::vector<float>> parts_;
    std::vector<int64_t> widths_;
    std::vector<float> sum_;
};

// x (on ctx's device, any float dtype) as F32 host values.
void stage_to_host(const ExecContext& ctx, const TensorView& x, std::vector<float>& out) {
    out.resize(size_t(x.numel()));
    if (x.numel() == 0) return;
    if (ctx.device.is_cpu() && x.dtype == DType::F32) {
        std::memcpy(out.data(), x.data, size_t(x.nbytes()));
        return;
    }
    std::vector<uint8_t> raw(size_t(x.nbytes()));
    download(ctx, x, TensorView::contiguous(raw.data(), x.dtype, Device::cpu(), {x.numel()}));
    synchronize(ctx);
    convert_to_f32(raw.data(), x.dtype, out.data(), x.numel());
}

// F32 host values into x (on ctx's device, any float dtype), rounded once.
void write_from_host(const ExecContext& ctx, const float* values, const TensorView& x) {
    if (x.numel() == 0) return;
    if (ctx.device.is_cpu() && x.dtype == DType::F32) {
        std::memcpy(x.data, values, size_t(x.nbytes()));
        return;
    }
    std::vector<uint8_t> raw(size_t(x.nbytes()));
    convert_from_f32(values, raw.data(), x.dtype, x.numel());
    upload(ctx, TensorView::contiguous(raw.data(), x.dtype, Device::cpu(), {x.numel()}), x);
    synchronize(ctx); // raw dies here
}

class HostCollective final : public GroupCollective<HostGroup> {
public:
    using GroupCollective::GroupCollective;
    std::string backend() const override { return "host"; }
    bool capturable() const override { return false; }

protected:
    void reduce(const ExecContext& ctx, const TensorView& x) override {
        HostGroup& g = *group_;
        stage_to_host(ctx, x, g.part(rank_));
        g.width(rank_) = x.numel();
        g.barrier(); // every part posted
        const int64_t n = x.numel();
        for (int r = 0; r < g.ranks(); ++r)
            require(g.width(r) == n, "all_reduce_sum: rank ", r, " posted ", g.width(r),
                    " values, rank ", rank_, " ", n);
        if (rank_ == 0) g.sum().assign(size_t(n), 0.0f);
        g.barrier(); // the sum buffer sized
        // Each rank sums its own slice of the elements, in rank order (the same bits everywhere).
        const int64_t begin = n * rank_ / g.ranks(), end = n * (rank_ + 1) / g.ranks();
        float* sum = g.sum().data();
        for (int r = 0; r < g.ranks(); ++r) {
            const float* p = g.part(r).data();
            for (int64_t i = begin; i < end; ++i) sum[i] = r == 0 ? p[i] : sum[i] + p[i];
        }
        g.barrier(); // the sum complete
        write_from_host(ctx, sum, x);
        g.barrier(); // every rank has read the sum: the buffers may be reused
    }

    void gather(const ExecContext& ctx, const TensorView& part, const TensorView& full,
                int root) override {
        HostGroup& g = *group_;
        stage_to_host(ctx, part, g.part(rank_));
        g.width(rank_) = part.size(1);
        g.barrier();
        if (rank_ == root) {
            const int64_t R = part.size(0), W = full.size(1);
            int64_t total = 0;
            for (int r = 0; r < g.ranks(); ++r) total += g.width(r);
            require(total == W, "gather_columns: ", full.describe(), " does not hold the ranks' ",
                    total, " columns");
            std::vector<float> rows(size_t(R * W));
            int64_t col = 0;
            for (int r = 0; r < g.ranks(); ++r) {
                const int64_t w = g.width(r);
                const float* p = g.part(r).data();
                for (int64_t i = 0; i < R; ++i)
                    std::memcpy(&rows[size_t(i * W + col)], p + i * w, size_t(w) * sizeof(float));
                col += w;
            }
            write_from_host(ctx, rows.data(), full);
        }
        g.barrier(); // the root has read every part
    }

};

} // namespace

void Collective::all_reduce_sum(const ExecContext& ctx, const TensorView& x) {
    check_device(ctx, "all_reduce_sum", "x", x);
    check_contiguous("all_reduce_sum", "x", x);
    require(x.dtype == DType::F32 || x.dtype == DType::BF16, "all_reduce_sum: ", x.describe(),
            " (F32 or BF16)");
    reduce(ctx, x);
}

void Collective::gather_columns(const ExecContext& ctx, const TensorView& part,
                                const TensorView& full, int root) {
    check_device(ctx, "gather_columns", "part", part);
    check_contiguous("gather_columns", "part", part);
    check_dtype("gather_columns", "part", part, DType::F32);
    require(part.ndim == 2, "gather_columns: part ", part.describe(), " is not [R, W]");
    require(root >= 0 && root < ranks(), "gather_columns: no rank ", root);
    if (rank() == root) {
        check_device(ctx, "gather_columns", "full", full);
        check_contiguous("gather_columns", "full", full);
        check_dtype("gather_columns", "full", full, DType::F32);
        require(full.ndim == 2 && full.size(0) == part.size(0), "gather_columns: ",
                full.describe(), " for ", part.size(0), " rows");
    }
    gather(ctx, part, full, root);
}

namespace {
constexpr const char* kAbandoned =
    "tensor parallelism: another rank failed, this collective was abandoned";
} // namespace

void fail_abandoned() {
    fail(ErrorCategory::Internal, kAbandoned);
}

bool is_abandoned(const std::exception_ptr& error) {
    try {
        std::rethrow_exception(error);
    } catch (const Error& e) {
        return std::string(e.what()) == kAbandoned;
    } catch (...) {
        return false;
    }
}

void RankBarrier::check_alive() const {
    if (aborted_) fail_abandoned();
}

void RankBarrier::barrier() {
    std::unique_lock<std::mutex> lock(mutex_);
    check_alive();
    const uint64_t generation = generation_;
    if (++arrived_ == ranks_) {
        arrived_ = 0;
        ++generation_;
        wake_.notify_all();
        return;
    }
    wake_.wait(lock, [&] { return generation_ != generation || aborted_; });
    check_alive();
}

void RankBarrier::abort() {
    std::lock_guard<std::mutex> lock(mutex_);
    aborted_ = true;
    wake_.notify_all();
}

void RankBarrier::reset() {
    std::lock_guard<std::mutex> lock(mutex_);
    aborted_ = false;
    arrived_ = 0;
}

std::vector<std::shared_ptr<Collective>> make_host_collectives(int ranks) {
    require(ranks >= 1, "a collective group needs one rank or more, got ", ranks);
    auto group = std::make_shared<HostGroup>(ranks);
    std::vector<std::shared_ptr<Collective>> out;
    for (int r = 0; r < ranks; ++r) out.push_back(std::make_shared<HostCollective>(group, r));
    return out;
}

#ifndef NINFER_HAS_CUDA
std::vector<std::shared_ptr<Collective>> make_device_collectives(const std::vector<ExecContext>&) {
    fail(ErrorCategory::Unsupported,
         "--collective device: this build has no CUDA backend (the CPU's ranks use host)");
}
#endif

#ifndef NINFER_HAS_NCCL
bool nccl_available() {
    return false;
}

std::vector<std::shared_ptr<Collective>> make_nccl_collectives(const std::vector<ExecContext>&) {
    fail(ErrorCategory::Unsupported,
         "this build has no NCCL: tensor parallelism over NCCL needs a CUDA build with "
         "-DNINFER_NCCL=ON (NCCL from PyPI: pip install nvidia-nccl-cu13); the host-staged "
         "collective (--collective host) works without it");
}
#endif

} // namespace ninfer::ops
