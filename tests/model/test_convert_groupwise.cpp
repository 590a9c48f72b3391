// ninfer convert --to w8|q4 from an fp8 checkpoint (model/convert.h): the official FP8 layout's
// weights are dequantized exactly (model/fp8.h) and quantized again (model/groupwise.h), their
// scales and activation scales dropped; the result loads and runs; fp8 to fp8 is refused. The
// bf16 path is checked byte for byte against a plain-Python reading of the layout in
// tests/e2e/check_groupwise.py.
#include <cmath>
#include <cstring>
#include <filesystem>

#include "model/convert.h"
#include "model/fixture_util.h"
#include "model/fp8.h"
#include "model/groupwise.h"

namespace ninfer::test {
namespace {

namespace fs = std::filesystem;

TEST(ConvertGroupwise, FromAnFp8CheckpointQuantizesItsExactDequantization) {
    const fs::path src = quant_fixture_dir("moe_fp8");
    const fs::path out = scratch_path("ninfer_convert_fp8_to_q4");
    fs::remove_all(out);
    model::ConvertOptions o;
    o.format = model::QuantFormat::Q4;
    const model::ConvertReport r = model::convert_checkpoint(src, out, o);
    EXPECT_GT(r.quantized, 0);
    const io::ModelConfig in_cfg = io::load_hf_config(src), out_cfg = io::load_hf_config(out);
    ASSERT_TRUE(in_cfg.fp8);
    EXPECT_FALSE(out_cfg.fp8);
    EXPECT_EQ(out_cfg.group_bits, 4);
    const auto in = io::SafetensorsCheckpoint::open(src);
    const auto got = io::SafetensorsCheckpoint::open(out);
    int64_t checked = 0;
    for (const auto& [name, e] : in.entries()) {
        const bool scale =
            name.size() > 10 && name.compare(name.size() - 10, 10, "_scale_inv") == 0;
        if (scale || e.dtype_name != "F8_E4M3") {
            if (scale) {
                EXPECT_EQ(got.find(name), nullptr) << name << " should be dropped";
            }
            continue;
        }
        const io::TensorEntry* codes = got.find(name);
        const io::TensorEntry* s = got.find(name + "_scale");
        ASSERT_TRUE(codes && s) << name;
        const std::vector<float> w = model::dequantize_fp8(
            e, *in.find(name + "_scale_inv"), in_cfg.fp8_block[0], in_cfg.fp8_block[1]);
        const model::GroupwiseTensor want =
            model::quantize_groupwise(w.data(), e.shape[0], e.shape[1], 4, 32, DType::F16, name);
        ASSERT_EQ(codes->nbytes, int64_t(want.codes.size())) << name;
        EXPECT_EQ(std::memcmp(codes->data, want.codes.data(), want.codes.size()), 0) << name;
        ASSERT_EQ(s->nbytes, int64_t(want.scale.size())) << name;
        EXPECT_EQ(std::memcmp(s->data, want.scale.data(), want.scale.size()), 0) << name;
        ++checked;
    }
    EXPECT_EQ(checked, r.quantized);
    expect_loads_and_generates(out);
    // fp8 to fp8 is refused (the checkpoint is already in that layout).
    model::ConvertOptions again;
    EXPECT_THROW(model::convert_checkpoint(src, scratch_path("ninfer_convert_fp8_again"), again),
                 Error);
}

TEST(ConvertGroupwise, ReportsProgressOverTheOutputBytes) {
    const fs::path out = scratch_path("ninfer_convert_progress");
    fs::remove_all(out);
    model::ConvertOptions o;
    o.format = model::QuantFormat::W8;
    std::vector<std::pair<int64_t, int64_t>> seen;
    o.progress = [&](int64_t done, int64_t total) { seen.emplace_back(done, total); };
    const model::ConvertReport r =
        model::convert_checkpoint(fs::path(fixtures_dir()) / "moe_text_fused", out, o);
    ASSERT_GT(seen.size(), size_t(r.quantized)); // a report per tensor, and the two ends
    EXPECT_EQ(seen.front(), std::make_pair(int64_t(0), r.bytes_out));
    EXPECT_EQ(seen.back(), std::make_pair(r.bytes_out, r.bytes_out));
    for (size_t i = 1; i < seen.size(); ++i) {
        EXPECT_LE(seen[i - 1].first, seen[i].first) << i;
        EXPECT_EQ(seen[i].second, r.bytes_out);
    }
}

} // namespace
} // namespace ninfer::test
