// Collective: the communication of tensor parallelism (model/tensor_parallel.h) between the N
// ranks of one process, each rank with its own ExecContext (device, stream) and its own thread.
// Every rank calls the same collectives in the same order; a call returns on a rank once that
// rank's part of the result is in place (stream-ordered on its context).
//
//   all_reduce_sum(ctx, x):  x[i] <- sum over ranks r = 0..N-1 of x_r[i], on every rank
//     x: contiguous, F32 or BF16. Numerics: the sum is taken in F32 in rank order 0, 1, .., N-1
//     and rounded once to x's dtype, so every rank holds the same bits (the model relies on it:
//     ranks route MoE tokens and sample from identical residuals).
//   gather_columns(ctx, part, full):  full[:, c_r + j] <- part_r[:, j] on rank `root` only
//     part: [R, W_r] contiguous F32, W_r the rank's column count (ranks may differ), c_r the sum
//     of the earlier ranks' W; full: [R, sum W_r] contiguous F32 on the root, ignored (may be
//     empty) elsewhere. The vocabulary-split head's logits.
//
// Failure: a rank that throws between collectives must call abort(); every rank blocked in or
// entering a collective then throws too, so no thread waits forever. reset() (once every rank has
// left its collectives) makes the group usable again.
//
// Implementations:
//   - host staging (make_host_collectives): every rank copies its part to host memory, the ranks
//     meet at a barrier and sum there. Any device, any mix of streams (the test and CPU route; on
//     CUDA it synchronises each rank's stream at every call, so it is correct but slow);
//   - device (make_device_collectives, CUDA): each rank's kernel sums every rank's part straight
//     from its memory (the same GPU, or peers over NVLink/PCIe P2P), the ranks' streams ordered
//     by events and their threads meeting at a host barrier to exchange addresses: no host wait,
//     so capturable into the decode graphs; works for ranks that share one GPU, which NCCL
//     refuses. The gather: the root's pitched copies from each part;
//   - NCCL (make_nccl_collectives, CUDA, built with NINFER_NCCL): ncclAllReduce in place on each
//     rank's stream, the gather as sends to the root and one pitched copy per rank; rank r's
//     part must be columns rank_range(W, r, N) (floor boundaries), the head's split.
#pragma once

#include <exception>
#include <memory>
#include <string>
#include <vector>

#include "ops/exec_context.h"

namespace ninfer::ops {

class Collective {
public:
    virtual ~Collective() = default;
    virtual int rank() const = 0;
    virtual int ranks() const = 0;
    // Check the arguments (errors name the op and tensor), then run the implementation's.
    void all_reduce_sum(const ExecContext& ctx, const TensorView& x);
    void gather_columns(const ExecContext& ctx, const TensorView& part, const TensorView& full,
                        int root = 0);
    virtual void abort() = 0;
    virtual void reset() = 0;
    virtual std::string backend() const = 0; // "host", "device" or "nccl"
    // Whether every call only enqueues stream-ordered work (no host wait): the forward around it
    // can be captured into a CUDA graph.
    virtual bool capturable() const = 0;

protected:
    // Called with checked arguments: x contiguous F32 or BF16 on ctx's device; part [R, W]
    // contiguous F32; on the root, full [R, W'] contiguous F32.
    virtual void reduce(const ExecContext& ctx, const TensorView& x) = 0;
    virtual void gather(const ExecContext& ctx, const TensorView& part, const TensorView& full,
                        int root) = 0;
};

// The rank, the group and its failure handling, which every implementation holds alike (Group:
// ranks(), abort(), reset()).
template <typename Group> class GroupCollective : public Collective {
public:
    GroupCollective(std::shared_ptr<Group> group, int rank)
        : group_(std::move(group)), rank_(rank) {}
    int rank() const override { return rank_; }
    int ranks() const override { return group_->ranks(); }
    void abort() override { group_->abort(); }
    void reset() override { group_->reset(); }

protected:
    std::shared_ptr<Group> group_;
    int rank_;
};

// The error of a rank whose collective was abandoned because another rank failed (abort()),
// and its test: a caller that gathers the ranks' errors reports the cause, not these.
[[noreturn]] void fail_abandoned();
bool is_abandoned(const std::exception_ptr& error);

// One Collective per rank, sharing one group; ranks >= 1.
std::vector<std::shared_ptr<Collective>> make_host_collectives(int ranks);

// One device collective per context (CUDA devices, peer access between them enabled); a CUDA
// build's, else an error.
std::vector<std::shared_ptr<Collective>> make_device_collectives(
    const std::vector<ExecContext>& ranks);

// Whether this build can make NCCL collectives (NINFER_NCCL).
bool nccl_available();
// One NCCL communicator per context (CUDA devices, one rank each, no device twice: NCCL refuses
// two ranks on one GPU). Errors say what is missing when NCCL is not built in.
std::vector<std::shared_ptr<Collective>> make_nccl_collectives(
    const std::vector<ExecContext>& ranks);

} // namespace ninfer::ops
