#include "runtime/speculative/proposal_head.h"

#include <charconv>
#include <climits>
#include <fstream>
#include <unordered_set>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "ops/embedding.h"
#include "ops/memory.h"

namespace ninfer::runtime {
namespace {

constexpr const char* kFlag = "--draft-shortlist";

bool is_count(const std::string& s, int64_t& n) {
    const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), n);
    return ec == std::errc() && end == s.data() + s.size();
}

std::vector<int32_t> read_id_list(const std::string& path) {
    std::ifstream in(path);
    require(bool(in), kFlag, ": cannot open ", path);
    nlohmann::json j;
    try {
        j = nlohmann::json::parse(in);
    } catch (const nlohmann::json::exception& e) {
        fail_invalid(kFlag, ": ", path, " is not JSON (", e.what(), ")");
    }
    require(j.is_array(), kFlag, ": ", path, " must hold a JSON array of token ids");
    std::vector<int32_t> ids;
    for (const auto& v : j) {
        require(v.is_number_integer(), kFlag, ": ", path, " holds a non-integer entry ", v.dump());
        const int64_t id = v.get<int64_t>();
        require(id >= 0 && id <= INT32_MAX, kFlag, ": id ", id, " in ", path, " is negative or too large");
        ids.push_back(int32_t(id));
    }
    return ids;
}

} // namespace

std::vector<int32_t> parse_shortlist(const std::string& spec, int64_t vocab) {
    if (spec.empty()) return {};
    std::vector<int32_t> ids;
    int64_t n = 0;
    if (is_count(spec, n)) {
        require(n >= 1 && n <= vocab, kFlag, " ", spec, ": a count must be in [1, ", vocab, "]");
        for (int64_t i = 0; i < n; ++i) ids.push_back(int32_t(i));
        return ids;
    }
    ids = read_id_list(spec);
    require(!ids.empty(), kFlag, ": ", spec, " lists no ids");
    std::unordered_set<int32_t> seen;
    for (int32_t id : ids) {
        require(id < vocab, kFlag, ": id ", id, " in ", spec, " is outside the head's ", vocab,
                " rows");
        require(seen.insert(id).second, kFlag, ": id ", id, " repeats in ", spec);
    }
    return ids;
}

ProposalHead::ProposalHead(const ops::ExecContext& ctx, const TensorView& lm_head,
                           std::vector<int32_t> shortlist)
    : ids_(std::move(shortlist)), head_(lm_head) {
    if (ids_.empty()) return;
    const int64_t N = int64_t(ids_.size()), H = lm_head.size(1);
    prefix_ = true;
    for (int64_t i = 0; i < N && prefix_; ++i) prefix_ = ids_[size_t(i)] == i;
    if (prefix_) { // the first N rows as they are: contiguous, nothing to gather or map
        head_ = lm_head.narrow(0, 0, N);
        return;
    }
    Allocator& alloc = ops::device_allocator(ctx.device);
    Tensor d_ids = Tensor::empty(alloc, DType::I32, {N});
    ops::upload(ctx, TensorView::contiguous(ids_.data(), DType::I32, Device::cpu(), {N}), d_ids);
    gathered_ = Tensor::empty(alloc, lm_head.dtype, {N, H});
    ops::embedding(ctx, d_ids, lm_head, gathered_); // the shortlisted rows, in list order
    ops::synchronize(ctx);                           // d_ids dies here
    head_ = gathered_.view();
}

void ProposalHead::to_global(std::vector<int32_t>& ids) const {
    if (!maps_ids()) return;
    for (int32_t& id : ids) id = id >= 0 && size_t(id) < ids_.size() ? ids_[size_t(id)] : -1;
}

} // namespace ninfer::runtime
