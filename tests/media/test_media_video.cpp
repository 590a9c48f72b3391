// Video decoding and Qwen3VLVideoProcessor's sampling and preprocessing against HF transformers
// 5.17.0 (fixtures: tools/reference/make_vision_preprocess_fixture.py). The reference frames are
// what Debian's ffmpeg decodes (rgb24, bilinear swscale): the same libav* as src/media.
#include <cmath>

#include "media/media_fixture.h"
#include "media/video.h"
#include "ninfer/error.h"

namespace ninfer::media::test {
namespace {

VideoProcessorConfig video_config(const nlohmann::json& overrides = nlohmann::json::object()) {
    return case_config(overrides, "video_config", ResizeBackend::Torchvision).video;
}

int max_byte_diff(const Image& a, const Image& b) {
    int worst = 0;
    for (size_t i = 0; i < a.rgb.size(); ++i)
        worst = std::max(worst, std::abs(int(a.rgb[i]) - int(b.rgb[i])));
    return worst;
}

class VideoMatchesHf : public ::testing::TestWithParam<nlohmann::json> {};

TEST_P(VideoMatchesHf, SamplesDecodesAndPreprocesses) {
    const nlohmann::json& c = GetParam();
    const std::string key = c["name"].get<std::string>();
    VideoProcessorConfig config = video_config();
    Video video = decode_video_file(preprocess_dir() / c["file"].get<std::string>(), config);
    EXPECT_EQ(video.total_frames, c["total_frames"].get<int64_t>());
    EXPECT_DOUBLE_EQ(video.fps, c["fps"].get<double>());
    ASSERT_EQ(video.frame_indices, c["indices"].get<std::vector<int64_t>>());
    ASSERT_EQ(video.frames.size(), video.frame_indices.size());
    EXPECT_EQ(video_timestamps(video.frame_indices, video.fps, config.temporal_patch_size),
              c["timestamps"].get<std::vector<double>>());

    // Each decoded frame equals ffmpeg's.
    const auto decoded = c["decoded_indices"].get<std::vector<int64_t>>();
    for (size_t k = 0; k < decoded.size(); ++k) {
        Image want = reference_image(key + ".frames", static_cast<int64_t>(k));
        auto at = std::find(video.frame_indices.begin(), video.frame_indices.end(), decoded[k]);
        ASSERT_NE(at, video.frame_indices.end());
        const Image& got = video.frames[static_cast<size_t>(at - video.frame_indices.begin())];
        ASSERT_EQ(got.width, want.width);
        ASSERT_EQ(got.height, want.height);
        EXPECT_EQ(got.rgb, want.rgb) << "frame " << decoded[k] << " differs from ffmpeg's (max "
                                     << max_byte_diff(got, want) << ")";
    }
    // HF's pixel_values_videos from the same frames, bit for bit.
    if (reference().find(key + ".pixel_values") != nullptr) {
        Pixels px = preprocess_video(video.frames, config);
        EXPECT_TRUE(same_pixels(px, key));
    }
    // From memory: the same.
    Video again = decode_video(read_bytes(preprocess_dir() / c["file"].get<std::string>()), config);
    EXPECT_EQ(again.frame_indices, video.frame_indices);
    ASSERT_EQ(again.frames.size(), video.frames.size());
    for (size_t i = 0; i < again.frames.size(); ++i) EXPECT_EQ(again.frames[i].rgb, video.frames[i].rgb);
}

INSTANTIATE_TEST_SUITE_P(Fixtures, VideoMatchesHf,
                         ::testing::ValuesIn(std::vector<nlohmann::json>(
                             manifest()["videos"].begin(), manifest()["videos"].end())),
                         [](const auto& p) { return p.param["name"].template get<std::string>(); });

// Five frames given directly (do_sample_frames false): padded with the last to six, grid_t 3.
TEST(MediaVideo, OddFrameCountIsPaddedAsHf) {
    std::vector<Image> frames;
    for (int64_t k = 0; k < 5; ++k) frames.push_back(reference_image("five_frames.frames", k));
    VideoProcessorConfig config = video_config(manifest()["five_frames"]["config"]);
    Pixels px = preprocess_video(frames, config);
    EXPECT_EQ(px.grid_thw[0], 3);
    EXPECT_TRUE(same_pixels(px, "five_frames"));
}

TEST(MediaVideo, SamplingMatchesQwen3VLVideoProcessor) {
    VideoProcessorConfig config = video_config();
    for (const auto& row : manifest()["sampling"]) {
        VideoProcessorConfig c = config;
        if (row.contains("num_frames")) c.num_frames = row["num_frames"].get<int64_t>();
        auto got = sample_frame_indices(row["total"].get<int64_t>(), row["fps"].get<double>(), c);
        EXPECT_EQ(got, row["indices"].get<std::vector<int64_t>>())
            << "total " << row["total"] << " fps " << row["fps"];
        if (row.contains("timestamps")) {
            EXPECT_EQ(video_timestamps(got, row["fps"].get<double>(), 2),
                      row["timestamps"].get<std::vector<double>>());
        }
    }
    VideoProcessorConfig all = config;
    all.do_sample_frames = false;
    EXPECT_EQ(sample_frame_indices(3, 30, all), (std::vector<int64_t>{0, 1, 2}));
}

TEST(MediaVideo, TooFewFramesIsAnError) {
    std::vector<Image> one{reference_image("five_frames.frames", 0)};
    EXPECT_THROW(preprocess_video(one, video_config()), Error);
    EXPECT_THROW(preprocess_video(std::vector<Image>{}, video_config()), Error);
}

void expect_video_error(std::span<const uint8_t> bytes, const char* what) {
    try {
        decode_video(bytes, video_config());
        ADD_FAILURE() << what << ": no error";
    } catch (const Error& e) {
        EXPECT_EQ(std::string(e.what()).rfind("video: ", 0), 0u) << what << ": " << e.what();
    }
}

TEST(MediaVideo, BadInputsAreErrors) {
    std::vector<uint8_t> mp4 = read_bytes(preprocess_dir() / "tiny.mp4");
    expect_video_error({}, "empty");
    std::vector<uint8_t> head(mp4.begin(), mp4.begin() + 100);
    expect_video_error(head, "truncated header");
    std::vector<uint8_t> noise(8192);
    for (size_t i = 0; i < noise.size(); ++i) noise[i] = static_cast<uint8_t>((i * 2654435761u) >> 13);
    expect_video_error(noise, "random bytes");
    expect_video_error(read_bytes(preprocess_dir() / "rgb_37x53.png"), "a PNG");
    // Corrupt payload bytes: an error or frames, never a crash.
    std::vector<uint8_t> corrupt = mp4;
    for (size_t i = mp4.size() / 2; i < mp4.size(); i += 7) corrupt[i] ^= 0xA5;
    try {
        Video v = decode_video(corrupt, video_config());
        for (const Image& f : v.frames) EXPECT_EQ(f.rgb.size(), size_t(f.width) * f.height * 3);
    } catch (const Error&) {
    }
    // Truncated at every 10% step: an error or frames, never a crash.
    for (size_t cut = mp4.size() / 10; cut < mp4.size(); cut += mp4.size() / 10) {
        std::vector<uint8_t> part(mp4.begin(), mp4.begin() + static_cast<std::ptrdiff_t>(cut));
        try {
            decode_video(part, video_config());
        } catch (const Error&) {
        }
    }
    EXPECT_THROW(decode_video_file(preprocess_dir() / "no_such_video.mp4", video_config()), Error);
    VideoLimits tiny;
    tiny.max_frame_pixels = 100;
    EXPECT_THROW(decode_video(mp4, video_config(), tiny), Error);
    tiny = VideoLimits{};
    tiny.max_packets = 3;
    EXPECT_THROW(decode_video(mp4, video_config(), tiny), Error);
}

} // namespace
} // namespace ninfer::media::test
