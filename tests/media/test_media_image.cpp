// Decoding against PIL and image preprocessing against HF transformers 5.17.0, bit for bit
// (fixtures: tools/reference/make_vision_preprocess_fixture.py).
#include <filesystem>

#include "media/image.h"
#include "media/media_fixture.h"
#include "media/preprocess.h"
#include "media/resize.h"
#include "ninfer/error.h"

namespace ninfer::media::test {
namespace {

std::string stem(const std::string& file) { return std::filesystem::path(file).stem().string(); }

std::vector<std::string> files() {
    std::vector<std::string> out;
    for (const auto& c : manifest()["images"])
        if (c["name"].get<std::string>() == stem(c["file"].get<std::string>()))
            out.push_back(c["file"].get<std::string>());
    return out;
}

struct PreprocessCase {
    std::string name, file, backend;
    nlohmann::json config;
};

std::vector<PreprocessCase> preprocess_cases() {
    std::vector<PreprocessCase> out;
    for (const auto& c : manifest()["images"])
        for (const auto& b : c["backends"])
            out.push_back({c["name"].get<std::string>(), c["file"].get<std::string>(),
                           b.get<std::string>(), c["config"]});
    return out;
}

std::string param_name(const std::string& s) {
    std::string out;
    for (char ch : s) out += std::isalnum(static_cast<unsigned char>(ch)) ? ch : '_';
    return out;
}

class DecodeMatchesPil : public ::testing::TestWithParam<std::string> {};

// Every fixture decodes to exactly PIL's Image.open(f).convert("RGB"): PNG and WebP by their
// specifications; JPEG because Debian's libjpeg-turbo 2.1.5 and Pillow's bundled 3.x run the
// same islow IDCT, fancy upsampling and YCbCr tables (decode_image does not change the defaults).
TEST_P(DecodeMatchesPil, ExactRgb) {
    const std::string file = GetParam();
    Image got = read_image_file(preprocess_dir() / file);
    Image want = reference_image(stem(file) + ".rgb");
    ASSERT_EQ(got.width, want.width);
    ASSERT_EQ(got.height, want.height);
    ASSERT_EQ(got.rgb.size(), want.rgb.size());
    size_t bad = 0, first = 0;
    int worst = 0;
    for (size_t i = 0; i < got.rgb.size(); ++i) {
        int d = std::abs(int(got.rgb[i]) - int(want.rgb[i]));
        if (d != 0 && bad++ == 0) first = i;
        worst = std::max(worst, d);
    }
    EXPECT_EQ(bad, 0u) << file << ": " << bad << " of " << got.rgb.size()
                       << " bytes differ from PIL's (max " << worst << "), first at pixel "
                       << first / 3 << " channel " << first % 3;
}

INSTANTIATE_TEST_SUITE_P(Fixtures, DecodeMatchesPil, ::testing::ValuesIn(files()),
                         [](const auto& p) { return param_name(p.param); });

class PreprocessMatchesHf : public ::testing::TestWithParam<PreprocessCase> {};

// pixel_values and image_grid_thw of AutoImageProcessor (Qwen2VLImageProcessor, torchvision; and
// Qwen2VLImageProcessorPil where the case lists "pil"), given PIL's RGB, bit for bit.
TEST_P(PreprocessMatchesHf, PixelValuesBitExact) {
    const PreprocessCase& c = GetParam();
    ResizeBackend backend = c.backend == "pil" ? ResizeBackend::Pil : ResizeBackend::Torchvision;
    VisionPreprocessConfig config = case_config(c.config, "image_config", backend);
    Image rgb = reference_image(stem(c.file) + ".rgb");
    Pixels px = preprocess_image(rgb, config);
    EXPECT_TRUE(same_pixels(px, c.name + "." + c.backend));
    EXPECT_EQ(px.cols, 3 * 2 * 16 * 16);
}

// The same from the file's bytes: decode + preprocess, as a request would run.
TEST_P(PreprocessMatchesHf, FromFileBitExact) {
    const PreprocessCase& c = GetParam();
    ResizeBackend backend = c.backend == "pil" ? ResizeBackend::Pil : ResizeBackend::Torchvision;
    VisionPreprocessConfig config = case_config(c.config, "image_config", backend);
    Pixels px = preprocess_image(read_image_file(preprocess_dir() / c.file), config);
    EXPECT_TRUE(same_pixels(px, c.name + "." + c.backend));
}

INSTANTIATE_TEST_SUITE_P(Fixtures, PreprocessMatchesHf, ::testing::ValuesIn(preprocess_cases()),
                         [](const auto& p) {
                             return param_name(p.param.name + "_" + p.param.backend);
                         });

TEST(MediaImage, DetectsFormatsFromMagicBytes) {
    EXPECT_EQ(detect_image_format(read_bytes(preprocess_dir() / "rgb_200x90.jpg")),
              ImageFormat::Jpeg);
    EXPECT_EQ(detect_image_format(read_bytes(preprocess_dir() / "rgb_37x53.png")),
              ImageFormat::Png);
    EXPECT_EQ(detect_image_format(read_bytes(preprocess_dir() / "lossy_60x40.webp")),
              ImageFormat::Webp);
}

TEST(MediaImage, MaxPixelsIsCheckedFromTheHeader) {
    DecodeLimits limits;
    limits.max_pixels = 200 * 90 - 1;
    try {
        decode_image(read_bytes(preprocess_dir() / "rgb_200x90.jpg"), limits);
        FAIL() << "no error";
    } catch (const Error& e) {
        EXPECT_NE(std::string(e.what()).find("200x90 JPEG exceeds the 0.017999 MP limit"),
                  std::string::npos)
            << e.what();
    }
    limits.max_pixels = 200 * 90;
    EXPECT_EQ(decode_image(read_bytes(preprocess_dir() / "rgb_200x90.jpg"), limits).width, 200);
    DecodeLimits small_bytes;
    small_bytes.max_bytes = 100;
    EXPECT_THROW(decode_image(read_bytes(preprocess_dir() / "rgb_200x90.jpg"), small_bytes), Error);
}

TEST(MediaImage, ContentHashDependsOnPixelsAndShape) {
    Image a = reference_image("rgb_37x53.rgb");
    Image b = a;
    EXPECT_EQ(content_hash(a), content_hash(b));
    EXPECT_EQ(content_hash(a).hex().size(), 32u);
    b.rgb[1000] ^= 1;
    EXPECT_NE(content_hash(a), content_hash(b));
    // Same bytes, other shape.
    Image c{a.height, a.width, a.rgb};
    EXPECT_NE(content_hash(a), content_hash(c));
    // A PNG and a lossless WebP of the same pixels hash equal only when the pixels are equal.
    EXPECT_EQ(content_hash(read_image_file(preprocess_dir() / "rgb_37x53.png")), content_hash(a));
    Image bad{2, 2, std::vector<uint8_t>(5)};
    EXPECT_THROW(content_hash(bad), Error);
}

TEST(MediaImage, ResizeIdentityAndSinglePixel) {
    Image a = reference_image("rgb_37x53.rgb");
    for (ResizeBackend b : {ResizeBackend::Torchvision, ResizeBackend::Pil}) {
        EXPECT_EQ(resize_bicubic(a, a.width, a.height, b).rgb, a.rgb);
        Image one{1, 1, {10, 20, 30}};
        Image big = resize_bicubic(one, 7, 5, b); // a constant image stays constant
        for (size_t i = 0; i < big.rgb.size(); i += 3) {
            EXPECT_EQ(big.rgb[i], 10);
            EXPECT_EQ(big.rgb[i + 1], 20);
            EXPECT_EQ(big.rgb[i + 2], 30);
        }
    }
    EXPECT_THROW(resize_bicubic(a, 0, 5, ResizeBackend::Torchvision), Error);
}

} // namespace
} // namespace ninfer::media::test
