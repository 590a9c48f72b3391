// runtime/speculative/proposal_head.h: the shortlist specs and the id map on the CPU.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "core/error.h"
#include "ops/exec_context.h"
#include "runtime/speculative/proposal_head.h"

namespace ninfer::test {
namespace {

std::string write_list(const std::string& name, const std::string& text) {
    const auto p = std::filesystem::temp_directory_path() / ("ninfer_unit_shortlist_" + name);
    std::ofstream(p) << text;
    return p.string();
}

TEST(ProposalHead, ParsesCountsAndIdLists) {
    EXPECT_TRUE(runtime::parse_shortlist("", 10).empty());
    EXPECT_EQ(runtime::parse_shortlist("3", 10), (std::vector<int32_t>{0, 1, 2}));
    EXPECT_EQ(runtime::parse_shortlist("10", 10).size(), 10u);
    EXPECT_EQ(runtime::parse_shortlist(write_list("ok", "[9, 2, 5]"), 10),
              (std::vector<int32_t>{9, 2, 5}));
    for (const std::string& bad : {std::string("11"), std::string("0"), std::string("-2"),
                                   write_list("dup", "[1, 1]"), write_list("far", "[10]"),
                                   write_list("neg", "[-1]"), write_list("empty", "[]"),
                                   write_list("float", "[1.5]"), write_list("obj", "{}"),
                                   std::string("/no/such/shortlist.json")})
        EXPECT_THROW(runtime::parse_shortlist(bad, 10), Error) << bad;
}

TEST(ProposalHead, GathersTheShortlistedRowsAndMapsIdsBack) {
    const ops::ExecContext ctx = ops::ExecContext::cpu();
    Tensor head = Tensor::empty(cpu_allocator(), DType::F32, {6, 2});
    for (int64_t i = 0; i < 12; ++i) head.ptr<float>()[i] = float(i);
    runtime::ProposalHead full(ctx, head, {});
    EXPECT_FALSE(full.shortlisted());
    EXPECT_EQ(full.rows(), 6);
    EXPECT_EQ(full.weight().data, head.view().data);
    runtime::ProposalHead sl(ctx, head, {4, 1});
    ASSERT_TRUE(sl.shortlisted());
    ASSERT_EQ(sl.rows(), 2);
    const float* w = sl.weight().ptr<float>();
    EXPECT_EQ(std::vector<float>(w, w + 4), (std::vector<float>{8, 9, 2, 3})); // rows 4 and 1
    std::vector<int32_t> ids{1, 0, 0, 5};
    sl.to_global(ids);
    EXPECT_EQ(ids, (std::vector<int32_t>{1, 4, 4, -1})); // 5: outside the shortlist
    EXPECT_TRUE(sl.maps_ids());
}

TEST(ProposalHead, TheFirstRowsInOrderAreAViewWithoutAMap) {
    const ops::ExecContext ctx = ops::ExecContext::cpu();
    Tensor head = Tensor::empty(cpu_allocator(), DType::F32, {6, 2});
    for (int64_t i = 0; i < 12; ++i) head.ptr<float>()[i] = float(i);
    runtime::ProposalHead prefix(ctx, head, runtime::parse_shortlist("3", 6));
    ASSERT_TRUE(prefix.shortlisted());
    EXPECT_FALSE(prefix.maps_ids());
    EXPECT_EQ(prefix.rows(), 3);
    EXPECT_EQ(prefix.weight().data, head.view().data); // no copy
    std::vector<int32_t> ids{2, 0};
    prefix.to_global(ids);
    EXPECT_EQ(ids, (std::vector<int32_t>{2, 0}));
    runtime::ProposalHead swapped(ctx, head, {1, 0, 2}); // the same rows, not in order
    EXPECT_TRUE(swapped.maps_ids());
    EXPECT_NE(swapped.weight().data, head.view().data);
}

} // namespace
} // namespace ninfer::test
