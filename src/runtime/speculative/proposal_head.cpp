#include "runtime/speculative/proposal_head.h"

#include <charconv>
#include <climits>
#include <fstream>
#include <unordered_set>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "ops/linear.h"

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

ProposalHead::ProposalHead(const ops::ExecContext& ctx, model::Qwen35Model& model,
                           std::vector<int32_t> shortlist)
    : model_(&model), ids_(std::move(shortlist)) {
    const int64_t V = model.config().vocab_size;
    if (ids_.empty()) { // the full head: this device's whole head, or the ranks' split one
        rows_ = V;
        head_ = model.head_prefix(V);
        return;
    }
    rows_ = int64_t(ids_.size());
    prefix_ = true;
    for (int64_t i = 0; i < rows_ && prefix_; ++i) prefix_ = ids_[size_t(i)] == i;
    if (prefix_) head_ = model.head_prefix(rows_); // the first N rows as they are, where held
    if (head_.empty()) {
        gathered_ = model.head_rows(ctx, ids_); // the shortlisted rows, in list order
        head_ = gathered_.view();
    }
}

void ProposalHead::project(const ops::ExecContext& ctx, const TensorView& rows,
                           const TensorView& logits) const {
    if (head_.empty()) return model_->project_to_vocab(ctx, rows, logits);
    ops::linear(ctx, rows, head_, logits, /*accumulate=*/false);
}

void ProposalHead::to_global(std::vector<int32_t>& ids) const {
    if (!maps_ids()) return;
    for (int32_t& id : ids) id = id >= 0 && size_t(id) < ids_.size() ? ids_[size_t(id)] : -1;
}

} // namespace ninfer::runtime
