// smart_resize against HF's (images: Qwen2VL's; videos: Qwen3VLVideoProcessor.resize, the
// per-frame cap included) and the preprocessor config files.
#include <filesystem>

#include "media/media_fixture.h"
#include "media/preprocess.h"
#include "ninfer/error.h"

namespace ninfer::media::test {
namespace {
namespace fs = std::filesystem;

TEST(MediaConfig, SmartResizeMatchesHf) {
    int checked = 0;
    for (const auto& row : manifest()["smart_resize"]) {
        SCOPED_TRACE(row.dump());
        ProcessorConfig base;
        base.min_pixels = row["min"].get<int64_t>();
        base.max_pixels = row["max"].get<int64_t>();
        auto run = [&]() -> ResizedSize {
            if (row["kind"] == "image") return smart_resize_image(row["h"], row["w"], base);
            VideoProcessorConfig v;
            static_cast<ProcessorConfig&>(v) = base;
            v.cap_pixels_per_frame = row["cap"].get<bool>();
            return smart_resize_video(row["t"], row["h"], row["w"], v);
        };
        if (row.contains("error")) {
            EXPECT_THROW(run(), Error);
        } else {
            ResizedSize s = run();
            EXPECT_EQ(s.height, row["out"][0].get<int64_t>());
            EXPECT_EQ(s.width, row["out"][1].get<int64_t>());
        }
        ++checked;
    }
    EXPECT_GT(checked, 100);
}

struct TempDir {
    fs::path path;
    TempDir() {
        path = fs::temp_directory_path() /
               ("ninfer_media_config_" + std::to_string(::testing::UnitTest::GetInstance()->random_seed()) +
                "_" + std::to_string(reinterpret_cast<uintptr_t>(this)));
        fs::create_directories(path);
    }
    ~TempDir() { fs::remove_all(path); }
    void write(const std::string& name, const std::string& text) const {
        std::ofstream(path / name) << text;
    }
};

TEST(MediaConfig, AbsentFilesGiveTheQwen35Checkpoints) {
    TempDir dir;
    VisionPreprocessConfig c = load_preprocess_config(dir.path);
    EXPECT_EQ(c.image.patch_size, 16);
    EXPECT_EQ(c.image.temporal_patch_size, 2);
    EXPECT_EQ(c.image.merge_size, 2);
    EXPECT_EQ(c.image.min_pixels, 65536);
    EXPECT_EQ(c.image.max_pixels, 16777216);
    EXPECT_EQ(c.image.image_mean[0], 0.5);
    EXPECT_EQ(c.image.image_std[2], 0.5);
    EXPECT_EQ(c.image.backend, ResizeBackend::Torchvision);
    EXPECT_EQ(c.video.min_pixels, 4096);
    EXPECT_EQ(c.video.max_pixels, 25165824);
    EXPECT_EQ(c.video.fps, 2.0);
    EXPECT_EQ(c.video.min_frames, 4);
    EXPECT_EQ(c.video.max_frames, 768);
    EXPECT_FALSE(c.video.cap_pixels_per_frame);
}

TEST(MediaConfig, PresentFilesUseHfClassDefaultsForMissingKeys) {
    TempDir dir;
    dir.write("preprocessor_config.json", R"({"image_processor_type": "Qwen2VLImageProcessorFast"})");
    dir.write("video_preprocessor_config.json", R"({"fps": 1.5, "num_frames": 8, "max_frames": 64})");
    VisionPreprocessConfig c = load_preprocess_config(dir.path);
    EXPECT_EQ(c.image.patch_size, 14); // Qwen2VLImageProcessor's own defaults
    EXPECT_EQ(c.image.min_pixels, 3136);
    EXPECT_EQ(c.image.max_pixels, 1003520);
    EXPECT_DOUBLE_EQ(c.image.image_mean[0], 0.48145466);
    EXPECT_EQ(c.video.patch_size, 16); // Qwen3VLVideoProcessor's
    EXPECT_EQ(c.video.min_pixels, 131072);
    EXPECT_EQ(c.video.max_pixels, 786432);
    EXPECT_EQ(c.video.fps, 1.5);
    EXPECT_EQ(c.video.num_frames, 8);
    EXPECT_EQ(c.video.max_frames, 64);
}

TEST(MediaConfig, TheQwen35FileParses) {
    VisionPreprocessConfig c = parse_preprocess_config(
        R"({"size": {"longest_edge": 16777216, "shortest_edge": 65536}, "patch_size": 16,
            "temporal_patch_size": 2, "merge_size": 2, "image_mean": [0.5, 0.5, 0.5],
            "image_std": [0.5, 0.5, 0.5], "processor_class": "Qwen3VLProcessor",
            "image_processor_type": "Qwen2VLImageProcessorFast", "resample": 3,
            "rescale_factor": 0.00392156862745098, "do_convert_rgb": true})",
        R"({"size": {"longest_edge": 25165824, "shortest_edge": 4096}, "patch_size": 16,
            "temporal_patch_size": 2, "merge_size": 2, "image_mean": [0.5, 0.5, 0.5],
            "image_std": [0.5, 0.5, 0.5], "processor_class": "Qwen3VLProcessor",
            "video_processor_type": "Qwen3VLVideoProcessor"})");
    EXPECT_EQ(c.image.min_pixels, 65536);
    EXPECT_EQ(c.image.max_pixels, 16777216);
    EXPECT_EQ(c.image.patch_size, 16);
    EXPECT_EQ(c.video.min_pixels, 4096);
    EXPECT_EQ(c.video.max_pixels, 25165824);
    // Legacy keys override size; a scalar mean applies to all channels.
    c = parse_preprocess_config(R"({"min_pixels": 100, "max_pixels": 5000, "image_mean": 0.25,
                                    "size": {"shortest_edge": 1, "longest_edge": 2}})", "");
    EXPECT_EQ(c.image.min_pixels, 100);
    EXPECT_EQ(c.image.max_pixels, 5000);
    EXPECT_EQ(c.image.image_mean[1], 0.25);
}

TEST(MediaConfig, BadFilesAreErrors) {
    auto bad = [](const char* image, const char* video, const char* needle) {
        try {
            parse_preprocess_config(image, video);
            ADD_FAILURE() << "no error for " << image << video;
        } catch (const Error& e) {
            EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
        }
    };
    bad("{", "", "invalid JSON");
    bad("[1]", "", "JSON object");
    bad(R"({"resample": 2})", "", "resample 2 is not supported");
    bad(R"({"size": {"shortest_edge": 10}})", "", "'size'");
    bad(R"({"patch_size": "16"})", "", "'patch_size' must be an integer");
    bad(R"({"patch_size": 0})", "", "must be positive");
    bad(R"({"image_std": [0.5, 0, 0.5]})", "", "'image_std'");
    bad(R"({"image_mean": [0.5, 0.5]})", "", "'image_mean'");
    bad(R"({"size": {"shortest_edge": 100, "longest_edge": 10}})", "", "'size'");
    bad(R"({"do_center_crop": true})", "", "'do_center_crop' is not supported");
    bad("", R"({"fps": 0})", "'fps'");
    bad("", R"({"min_frames": 10, "max_frames": 4})", "'max_frames'");
    TempDir dir;
    dir.write("preprocessor_config.json", "");
    EXPECT_THROW(load_preprocess_config(dir.path), Error);
}

TEST(MediaConfig, PreprocessValidatesItsInputs) {
    VisionPreprocessConfig c;
    Image broken{4, 4, std::vector<uint8_t>(10)};
    EXPECT_THROW(preprocess_image(broken, c), Error);
    Image line{1, 1, {1, 2, 3}};
    Image wide{201, 1, std::vector<uint8_t>(201 * 3)}; // aspect ratio 201 > 200
    EXPECT_THROW(preprocess_image(wide, c), Error);
    Pixels px = preprocess_image(line, c); // 1x1 -> 256x256 (min_pixels 65536)
    EXPECT_EQ(px.grid_thw, (std::array<int64_t, 3>{1, 16, 16}));
    EXPECT_EQ(px.tokens(2), 64);
    // A constant image stays constant: (v - 127.5) / 127.5 in f32 for channel values 1, 2, 3.
    for (size_t i = 0; i < px.values.size(); ++i) {
        const float v = static_cast<float>(1 + (i % 1536) / 512);
        ASSERT_EQ(px.values[i], (v - 127.5f) / 127.5f) << i;
    }
}

} // namespace
} // namespace ninfer::media::test
