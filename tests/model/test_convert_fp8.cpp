// ninfer convert --to fp8 (model/convert.h): the converted checkpoint equals, tensor by
// tensor and bit for bit, the FP8 fixtures made by PyTorch (torch's e4m3 cast) with the same
// recipe (tools/reference/make_fp8_fixture.py); fused 3-D experts come out per expert and
// dequantize to within e4m3's rounding of the original; converting twice gives the same bytes;
// the result loads and runs; an fp8 checkpoint is refused.
#include <cmath>
#include <filesystem>
#include <fstream>
#include <iterator>

#include "model/convert.h"
#include "model/fixture_util.h"
#include "model/fp8.h"

namespace ninfer::test {
namespace {

namespace fs = std::filesystem;

fs::path fixture(const std::string& name) {
    return fs::path(fixtures_dir()) / name;
}
fs::path scratch(const std::string& name) {
    const fs::path p = scratch_path("ninfer_convert_" + name);
    fs::remove_all(p);
    return p;
}

std::string file_bytes(const fs::path& p) {
    std::ifstream in(p, std::ios::binary);
    return std::string(std::istreambuf_iterator<char>(in), {});
}

void expect_same_tensors(const fs::path& got_dir, const fs::path& want_dir) {
    const auto got = io::SafetensorsCheckpoint::open(got_dir);
    const auto want = io::SafetensorsCheckpoint::open(want_dir);
    EXPECT_EQ(got.entries().size(), want.entries().size());
    for (const auto& [name, w] : want.entries()) {
        const io::TensorEntry* g = got.find(name);
        ASSERT_NE(g, nullptr) << name;
        EXPECT_EQ(g->dtype_name, w.dtype_name) << name;
        EXPECT_EQ(g->shape, w.shape) << name;
        ASSERT_EQ(g->nbytes, w.nbytes) << name;
        EXPECT_EQ(std::memcmp(g->data, w.data, size_t(w.nbytes)), 0) << name << " differs";
    }
}

TEST(ConvertFp8, EqualsPyTorchsQuantizationBitForBit) {
    model::ConvertOptions o;
    o.block = 32;
    const fs::path moe = scratch("moe");
    model::convert_checkpoint(fixture("moe_vlm_per_expert"), moe, o);
    expect_same_tensors(moe, quant_fixture_dir("moe_fp8"));
    o.scale_dtype = DType::F32;
    const fs::path dense = scratch("dense");
    model::convert_checkpoint(fixture("dense_vlm_mtp"), dense, o);
    expect_same_tensors(dense, quant_fixture_dir("dense_fp8_sharded"));
}

TEST(ConvertFp8, FusedExpertsComeOutPerExpertWithinE4m3Rounding) {
    model::ConvertOptions o;
    o.block = 32;
    const fs::path out = scratch("fused");
    const model::ConvertReport r = model::convert_checkpoint(fixture("moe_text_fused"), out, o);
    EXPECT_GT(r.quantized, 0);
    const auto src = io::SafetensorsCheckpoint::open(fixture("moe_text_fused"));
    const auto dst = io::SafetensorsCheckpoint::open(out);
    const io::TensorEntry* fused = src.find("model.layers.0.mlp.experts.gate_up_proj");
    ASSERT_NE(fused, nullptr);
    const int64_t I = fused->shape[1] / 2, H = fused->shape[2];
    EXPECT_EQ(dst.find("model.layers.0.mlp.experts.gate_up_proj"), nullptr);
    std::vector<float> original(size_t(fused->numel()));
    convert_to_f32(fused->data, fused->dtype, original.data(), fused->numel());
    for (int64_t e : {int64_t(0), fused->shape[0] - 1})
        for (const char* part : {"gate_proj", "up_proj"}) {
            const std::string name = "model.layers.0.mlp.experts." + std::to_string(e) + "." +
                                     part + ".weight";
            const io::TensorEntry* w = dst.find(name);
            const io::TensorEntry* s = dst.find(name + "_scale_inv");
            ASSERT_TRUE(w && s) << name;
            const std::vector<float> deq = model::dequantize_fp8(*w, *s, 32, 32);
            const int64_t row0 = e * 2 * I + (std::string(part) == "up_proj" ? I : 0);
            std::vector<float> scales(size_t(s->numel()));
            convert_to_f32(s->data, s->dtype, scales.data(), s->numel());
            for (int64_t i = 0; i < I; ++i)
                for (int64_t j = 0; j < H; ++j) {
                    const float want = original[size_t((row0 + i) * H + j)];
                    const float scale = scales[size_t((i / 32) * s->shape[1] + j / 32)];
                    // e4m3 keeps 3 mantissa bits: half an ulp is 2^-4 of the value, and below
                    // the normal range (2^-6 of the scale's 448) 2^-10 of the scale.
                    const float bound = std::max(std::fabs(want) / 16, scale / 1024) * 1.0001f;
                    ASSERT_LE(std::fabs(deq[size_t(i * H + j)] - want), bound)
                        << name << " [" << i << ", " << j << "]";
                }
        }
    expect_loads_and_generates(out);
}

TEST(ConvertFp8, IsReproducibleAndRefusesFp8Input) {
    model::ConvertOptions o;
    o.block = 32;
    const fs::path a = scratch("a"), b = scratch("b");
    model::convert_checkpoint(fixture("moe_vlm_per_expert"), a, o);
    model::convert_checkpoint(fixture("moe_vlm_per_expert"), b, o);
    EXPECT_EQ(file_bytes(a / "model.safetensors"), file_bytes(b / "model.safetensors"));
    EXPECT_EQ(file_bytes(a / "config.json"), file_bytes(b / "config.json"));
    EXPECT_THROW(model::convert_checkpoint(quant_fixture_dir("moe_fp8"), scratch("again"), o),
                 Error);
}

} // namespace
} // namespace ninfer::test
