// runtime/speculative/proposal_head.h over a fixture's head (CPU reference ops): the full head, a
// shortlist gathered in list order with its id map, and ids [0, N) as a view of the head; each
// projects exactly the head's rows (an FP64 loop over the lm_head is the oracle). Under tensor
// parallelism (2 and 4 CPU ranks) no rank holds the whole head: the full projection runs on every
// rank and is gathered on rank 0 (Qwen35Model::project_to_vocab), a shortlist's rows are gathered
// from the ranks that hold them (head_rows), and both equal one device's. A collective that skips
// the gather (the sabotage arm) is caught.
#include <memory>
#include <vector>

#include "model/fixture_util.h"
#include "model/parallel_fixture.h"
#include "model/qwen3_5.h"
#include "ops/collective.h"
#include "runtime/speculative/proposal_head.h"

namespace ninfer::test {
namespace {

const ops::ExecContext kRef = ops::ExecContext::cpu(ops::CpuMode::Reference);

Fixture fixture() {
    for (const Fixture& f : load_fixtures())
        if (divides(f, 2)) return f;
    throw Error(ErrorCategory::Internal, "no fixture divides into 2 ranks");
}

std::unique_ptr<model::Qwen35Model> load(const Fixture& f, int ranks, bool sabotage = false) {
    if (ranks == 1) return model::Qwen35Model::load(f.dir, kRef);
    std::vector<std::shared_ptr<ops::Collective>> c = ops::make_host_collectives(ranks);
    if (sabotage)
        for (auto& one : c) one = std::make_shared<Sabotaged>(one, Skip::Gather);
    return model::Qwen35Model::load_parallel(
        f.dir, std::vector<ops::ExecContext>(size_t(ranks), kRef), c, {}, {}, {});
}

// rows [n, H] . head^T over the given head rows (all of them when ids is empty), in FP64.
Tensor oracle(const model::Qwen35Model& one, const Tensor& rows, std::vector<int32_t> ids) {
    const Tensor head = clone(one.weights().lm_head.view());
    const int64_t n = rows.size(0), H = rows.size(1);
    if (ids.empty())
        for (int32_t v = 0; v < int32_t(head.size(0)); ++v) ids.push_back(v);
    Tensor out = zeros({n, int64_t(ids.size())});
    for (int64_t i = 0; i < n; ++i)
        for (size_t j = 0; j < ids.size(); ++j) {
            double s = 0;
            for (int64_t k = 0; k < H; ++k)
                s += double(rows.ptr<float>()[i * H + k]) *
                     double(head.ptr<float>()[int64_t(ids[j]) * H + k]);
            out.ptr<float>()[i * int64_t(ids.size()) + int64_t(j)] = float(s);
        }
    return out;
}

Tensor project(const runtime::ProposalHead& head, const Tensor& rows) {
    Tensor logits = zeros({rows.size(0), head.rows()});
    head.project(kRef, rows, logits);
    return logits;
}

TEST(ProposalHeadModel, FullShortlistAndPrefixProjectTheHeadsRows) {
    const Fixture f = fixture();
    auto one = load(f, 1);
    const int64_t V = one->config().vocab_size, H = one->config().hidden_size;
    const Tensor rows = random_tensor({5, H}, 901);
    runtime::ProposalHead full(kRef, *one, {});
    EXPECT_FALSE(full.shortlisted());
    EXPECT_FALSE(full.copies_rows());
    EXPECT_EQ(full.rows(), V);
    EXPECT_TRUE(near(project(full, rows), oracle(*one, rows, {}), kReductionF32));

    const std::vector<int32_t> ids{int32_t(V - 1), 3, 0, int32_t(V / 2 + 1)};
    runtime::ProposalHead sl(kRef, *one, ids);
    ASSERT_TRUE(sl.shortlisted());
    EXPECT_TRUE(sl.maps_ids());
    EXPECT_TRUE(sl.copies_rows());
    EXPECT_TRUE(near(project(sl, rows), oracle(*one, rows, ids), kReductionF32));
    std::vector<int32_t> local{1, 0, 3, 4};
    sl.to_global(local);
    EXPECT_EQ(local, (std::vector<int32_t>{3, int32_t(V - 1), int32_t(V / 2 + 1), -1}));

    runtime::ProposalHead prefix(kRef, *one, runtime::parse_shortlist("3", V));
    EXPECT_FALSE(prefix.maps_ids());
    EXPECT_FALSE(prefix.copies_rows()); // a view of the head's first rows
    EXPECT_TRUE(near(project(prefix, rows), oracle(*one, rows, {0, 1, 2}), kReductionF32));
}

TEST(ProposalHeadModel, TensorParallelHeadStaysSplitAndProjectsAsOneDevice) {
    const Fixture f = fixture();
    auto one = load(f, 1);
    const int64_t V = one->config().vocab_size, H = one->config().hidden_size;
    const Tensor rows = random_tensor({3, H}, 902);
    const std::vector<int32_t> ids{int32_t(V - 2), 1, int32_t(V / 2), 0, int32_t(V / 2 - 1)};
    for (int ranks : {2, 4}) {
        if (!divides(f, ranks)) continue;
        auto tp = load(f, ranks);
        const std::string what = f.name + " ranks=" + std::to_string(ranks);
        runtime::ProposalHead full(kRef, *tp, {});
        EXPECT_FALSE(full.copies_rows()) << what << ": no rank keeps the whole head";
        EXPECT_EQ(full.rows(), V) << what;
        EXPECT_TRUE(near(project(full, rows), oracle(*one, rows, {}), kReductionF32)) << what;
        // The shortlist's ids lie on several ranks' vocabulary runs.
        runtime::ProposalHead sl(kRef, *tp, ids);
        EXPECT_TRUE(near(project(sl, rows), oracle(*one, rows, ids), kReductionF32)) << what;
        // A prefix longer than rank 0's run is gathered; within it, a view.
        runtime::ProposalHead wide(kRef, *tp, runtime::parse_shortlist(std::to_string(V - 1), V));
        EXPECT_TRUE(wide.copies_rows()) << what;
        EXPECT_TRUE(near(project(wide, rows), oracle(*one, rows, runtime::parse_shortlist(
                                                                     std::to_string(V - 1), V)),
                         kReductionF32))
            << what;
        runtime::ProposalHead narrow(kRef, *tp, runtime::parse_shortlist("2", V));
        EXPECT_FALSE(narrow.copies_rows()) << what;
    }
    // Sabotage: ranks whose gather writes nothing leave the other ranks' columns at zero.
    auto broken = load(f, 2, /*sabotage=*/true);
    runtime::ProposalHead full(kRef, *broken, {});
    EXPECT_FALSE(near(project(full, rows), oracle(*one, rows, {}), kReductionF32));
}

} // namespace
} // namespace ninfer::test
