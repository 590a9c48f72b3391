// The demo model's own preprocessing (models/ninfer-demo/preprocessor_config.json: 64x64 to
// 256x256 pixels) on its eval pictures equals what HF's processor gave at training time
// (tests/fixtures_vision/demo_images/pixels.safetensors, tools/train_demo/eval_vision.py), bit
// for bit: the config file is read as HF reads it.
#include <cstring>

#include "media/media_fixture.h"

namespace ninfer::media::test {
namespace {

TEST(DemoPreprocessing, EvalPicturesMatchHfBitForBit) {
    const std::filesystem::path dir = vision_fixtures() / "demo_images";
    const VisionPreprocessConfig config =
        load_preprocess_config(vision_fixtures().parent_path().parent_path() / "models" / "ninfer-demo");
    const auto ref = io::SafetensorsCheckpoint::open(dir / "pixels.safetensors");
    int checked = 0;
    for (const auto& [name, entry] : ref.entries()) {
        const Image image = read_image_file(dir / (name + ".png"));
        const Pixels px = preprocess_image(image, config);
        ASSERT_EQ(px.rows, entry.shape[0]) << name;
        ASSERT_EQ(px.cols, entry.shape[1]) << name;
        EXPECT_EQ(std::memcmp(px.values.data(), entry.data, size_t(entry.nbytes)), 0) << name;
        ++checked;
    }
    EXPECT_EQ(checked, 8);
}

} // namespace
} // namespace ninfer::media::test
