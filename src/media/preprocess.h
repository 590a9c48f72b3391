// Vision preprocessing for Qwen3.5/3.6: RGB8 images and video frames -> pixel_values and
// grid_thw, bit for bit (f32) what HF transformers 5.17.0 gives (docs/VISION.md,
// "Preprocessing"):
//
// - images: Qwen2VLImageProcessor, the torchvision backend AutoImageProcessor picks by default
//   for model types qwen3_5 / qwen3_5_moe (and for "Qwen2VLImageProcessorFast" in
//   preprocessor_config.json); ResizeBackend::Pil gives Qwen2VLImageProcessorPil (backend="pil").
// - videos: Qwen3VLVideoProcessor (the video processor of qwen3_5 / qwen3_5_moe; torchvision).
//
// The steps: smart_resize to multiples of patch_size * merge_size within [min_pixels,
// max_pixels] (Python's round-half-even included); antialiased bicubic resize (resize.h);
// rescale by rescale_factor and normalise with image_mean / image_std in f32 as the backend
// does (torchvision folds the two: (x - mean/r) / (std/r) with mean/r, std/r rounded to f32;
// PIL rescales in f64, rounds to f32, then (x - mean) / std); then patchify to
// [grid_t * grid_h * grid_w, C * temporal_patch_size * patch_size^2], patches ordered
// (t, h / merge, w / merge, merge_h, merge_w) and each row (C, T, P_h, P_w). An image is one
// temporal patch (the frame repeated temporal_patch_size times); a video's frames are padded with
// copies of the last one to a multiple of temporal_patch_size.
#pragma once

#include <array>
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string_view>
#include <vector>

#include "media/image.h"
#include "media/resize.h"

namespace ninfer::media {

// The fields both processors share (HF's names in comments).
struct ProcessorConfig {
    ResizeBackend backend = ResizeBackend::Torchvision;
    int64_t min_pixels = 0;            // size.shortest_edge (or legacy min_pixels)
    int64_t max_pixels = 0;            // size.longest_edge (or legacy max_pixels)
    int64_t patch_size = 16;
    int64_t temporal_patch_size = 2;
    int64_t merge_size = 2;
    bool do_resize = true;
    bool do_rescale = true;
    bool do_normalize = true;
    double rescale_factor = 1.0 / 255.0;
    std::array<double, 3> image_mean{0.5, 0.5, 0.5};
    std::array<double, 3> image_std{0.5, 0.5, 0.5};
};

// Defaults: what the Qwen3.5/3.6 checkpoints' preprocessor_config.json holds.
struct ImageProcessorConfig : ProcessorConfig {
    ImageProcessorConfig() {
        min_pixels = 65536;
        max_pixels = 16777216;
    }
};

// Defaults: the Qwen3.5/3.6 checkpoints' video_preprocessor_config.json (sampling as the class).
struct VideoProcessorConfig : ProcessorConfig {
    VideoProcessorConfig() {
        min_pixels = 4096;
        max_pixels = 25165824;
    }
    bool do_sample_frames = true;
    double fps = 2.0;                      // frames sampled per second of video
    std::optional<int64_t> num_frames;     // a fixed count instead (HF: num_frames)
    int64_t min_frames = 4;
    int64_t max_frames = 768;
    // HF's cap_pixels_per_frame (off in 5.17 unless set) and its max_video_tokens.
    bool cap_pixels_per_frame = false;
    int64_t max_video_tokens = 768;
};

struct VisionPreprocessConfig {
    ImageProcessorConfig image;
    VideoProcessorConfig video;
};

// Reads preprocessor_config.json and video_preprocessor_config.json from a model directory,
// each when present (a missing one leaves the Qwen3.5/3.6 defaults above). As HF: a key absent
// from a present file takes the processor class's default (Qwen2VLImageProcessor: patch 14,
// CLIP mean/std, size 3136..1003520; Qwen3VLVideoProcessor: patch 16, mean/std 0.5, size
// 131072..786432), min_pixels / max_pixels override size, and a video file may also carry
// fps, min_frames, max_frames, num_frames, do_sample_frames, cap_pixels_per_frame. Only
// resample = 3 (bicubic) is accepted, and do_center_crop / do_pad must be off (errors naming the
// key); do_convert_rgb is moot (inputs are RGB8 already); other keys are ignored.
VisionPreprocessConfig load_preprocess_config(const std::filesystem::path& model_dir);
// The same from the JSON texts (an empty view: the file is absent).
VisionPreprocessConfig parse_preprocess_config(std::string_view image_json,
                                               std::string_view video_json);

struct ResizedSize {
    int64_t height = 0;
    int64_t width = 0;
};
// Qwen2VL's smart_resize (images), with factor = patch_size * merge_size. An aspect ratio over
// 200 is an error, as in HF.
ResizedSize smart_resize_image(int64_t height, int64_t width, const ProcessorConfig& config);
// Qwen3VL's video smart_resize for `num_frames` sampled frames (with cap_pixels_per_frame).
ResizedSize smart_resize_video(int64_t num_frames, int64_t height, int64_t width,
                               const VideoProcessorConfig& config);

struct Pixels {
    std::vector<float> values; // [rows, cols], row-major
    int64_t rows = 0;          // grid_t * grid_h * grid_w
    int64_t cols = 0;          // 3 * temporal_patch_size * patch_size * patch_size
    std::array<int64_t, 3> grid_thw{0, 0, 0}; // (t, h, w) in patches
    // LLM tokens after the merger: rows / merge_size^2.
    int64_t tokens(int64_t merge_size) const { return rows / (merge_size * merge_size); }
};

Pixels preprocess_image(const Image& image, const VisionPreprocessConfig& config);
Pixels preprocess_image(const Image& image, const ImageProcessorConfig& config);
// `frames`: the sampled frames of one video, all the same size (media/video.h samples them).
Pixels preprocess_video(const std::vector<Image>& frames, const VisionPreprocessConfig& config);
Pixels preprocess_video(const std::vector<Image>& frames, const VideoProcessorConfig& config);

} // namespace ninfer::media
