// runtime/speculative/proposal_head.h: the shortlist specs on the CPU (the projections:
// tests/model/test_proposal_head_model.cpp).
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "core/error.h"
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

} // namespace
} // namespace ninfer::test
