// Video decoding (FFmpeg's libavformat / libavcodec / libswscale) and the frame sampling of HF
// transformers 5.17.0's Qwen3VLVideoProcessor, the video processor of Qwen3.5/3.6.
//
// Sampling (Qwen3VLVideoProcessor.sample_frames): with num_frames unset,
//   n = int(total_frames / video_fps * fps), clamped to [min_frames, max_frames] and to
//   total_frames; indices = round-half-even(linspace(0, total_frames - 1, n)).
// The sampled count is not rounded: preprocess_video pads it to a multiple of
// temporal_patch_size with copies of the last frame, as HF's patchify does.
// total_frames is the number of packets of the video stream (torchcodec's exact scan) and
// video_fps its average frame rate (24 when the container gives none, as HF assumes).
// Frames are converted to RGB24 by libswscale (SWS_BILINEAR, the frame's colour matrix and
// range), as torchcodec, HF's default video decoder, does.
#pragma once

#include <cstdint>
#include <filesystem>
#include <span>
#include <vector>

#include "media/image.h"
#include "media/preprocess.h"

namespace ninfer::media {

struct VideoLimits {
    int64_t max_bytes = 1ll << 30;            // encoded input held in memory
    int64_t max_frame_pixels = 50'000'000;    // width * height of one frame
    int64_t max_packets = 1'000'000;          // frames in the stream (the scan stops there)
    int64_t max_output_pixels = 1'000'000'000; // sampled frames * width * height (3 bytes each)
};

struct Video {
    std::vector<Image> frames;          // the sampled frames, in presentation order
    std::vector<int64_t> frame_indices; // their indices among all the video's frames
    int64_t total_frames = 0;
    double fps = 0;                     // the stream's average frame rate
    int32_t width = 0;
    int32_t height = 0;
};

// The indices Qwen3VLVideoProcessor samples (all of them when do_sample_frames is false).
std::vector<int64_t> sample_frame_indices(int64_t total_frames, double video_fps,
                                          const VideoProcessorConfig& config);

// Qwen3VLProcessor._calculate_timestamps: one time in seconds per temporal patch (the mean of its
// first and last frame's time; indices padded with the last one), which the prompt writes as
// "<%.1f seconds>" before each temporal patch's tokens.
std::vector<double> video_timestamps(const std::vector<int64_t>& frame_indices, double video_fps,
                                     int64_t temporal_patch_size);

// Decodes and samples; every failure is a ninfer::Error whose message starts with "video: ".
Video decode_video(std::span<const uint8_t> bytes, const VideoProcessorConfig& config,
                   const VideoLimits& limits = {});
// The same from a local file (only the file protocol is allowed).
Video decode_video_file(const std::filesystem::path& path, const VideoProcessorConfig& config,
                        const VideoLimits& limits = {});

} // namespace ninfer::media
