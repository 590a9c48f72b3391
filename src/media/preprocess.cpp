#include "media/preprocess.h"

#include <cmath>

#include "core/error.h"

namespace ninfer::media {
namespace {

// Python's round() on a float: to nearest, ties to even.
int64_t round_half_even(double x) {
    double r = std::floor(x);
    double diff = x - r;
    if (diff > 0.5 || (diff == 0.5 && std::fmod(r, 2.0) != 0.0)) r += 1.0;
    return static_cast<int64_t>(r);
}

void check_config(const ProcessorConfig& c, const char* what) {
    require(c.patch_size > 0 && c.merge_size > 0 && c.temporal_patch_size > 0, what,
            ": patch_size, merge_size and temporal_patch_size must be positive");
    require(c.min_pixels >= 0 && c.max_pixels > 0, what,
            ": size needs shortest_edge >= 0 and longest_edge > 0");
    for (int i = 0; i < 3; ++i)
        require(c.image_std[i] != 0.0, what, ": image_std must not be zero");
}

void check_aspect(int64_t height, int64_t width) {
    double ratio = static_cast<double>(std::max(height, width)) / std::min(height, width);
    if (ratio > 200)
        fail_invalid("preprocess: absolute aspect ratio must be smaller than 200, got ", ratio,
                     " (", width, "x", height, ")");
}

// The f32 value of every uint8 input for each channel, as the backend computes it.
std::array<std::array<float, 256>, 3> value_table(const ProcessorConfig& c) {
    std::array<std::array<float, 256>, 3> lut{};
    for (int ch = 0; ch < 3; ++ch) {
        for (int v = 0; v < 256; ++v) {
            float out;
            if (c.backend == ResizeBackend::Torchvision) {
                // TorchvisionBackend.rescale_and_normalize: mean and std are float32 tensors
                // scaled by the float32 scalar 1 / rescale_factor (then one normalize), or the
                // plain normalize, or image * rescale_factor in float32.
                float x = static_cast<float>(v);
                if (c.do_normalize) {
                    float mean = static_cast<float>(c.image_mean[ch]);
                    float stdv = static_cast<float>(c.image_std[ch]);
                    if (c.do_rescale) {
                        float inv = static_cast<float>(1.0 / c.rescale_factor);
                        mean = mean * inv;
                        stdv = stdv * inv;
                    }
                    out = (x - mean) / stdv;
                } else if (c.do_rescale) {
                    out = x * static_cast<float>(c.rescale_factor);
                } else {
                    out = x;
                }
            } else {
                // PilBackend: rescale in float64 then float32; normalize in float32.
                float x = c.do_rescale ? static_cast<float>(static_cast<double>(v) * c.rescale_factor)
                                       : static_cast<float>(v);
                if (c.do_normalize)
                    x = (x - static_cast<float>(c.image_mean[ch])) /
                        static_cast<float>(c.image_std[ch]);
                out = x;
            }
            lut[ch][v] = out;
        }
    }
    return lut;
}

// frames: resized, all height x width (multiples of patch * merge); padded to temporal_patch_size.
Pixels patchify(const std::vector<const Image*>& frames, const ProcessorConfig& c) {
    const int64_t P = c.patch_size, M = c.merge_size, T = c.temporal_patch_size;
    const int64_t height = frames[0]->height, width = frames[0]->width;
    require(height % (P * M) == 0 && width % (P * M) == 0, "preprocess: ", width, "x", height,
            " is not a multiple of patch_size * merge_size = ", P * M);
    const int64_t nt = static_cast<int64_t>(frames.size());
    const int64_t pad = (T - nt % T) % T;
    const int64_t gt = (nt + pad) / T, gh = height / P, gw = width / P;
    Pixels px;
    px.grid_thw = {gt, gh, gw};
    px.rows = gt * gh * gw;
    px.cols = 3 * T * P * P;
    px.values.resize(static_cast<size_t>(px.rows * px.cols));
    const auto lut = value_table(c);
#pragma omp parallel for schedule(static) if (px.rows > 256)
    for (int64_t row = 0; row < px.rows; ++row) {
        // row = (((t * gh/M + bh) * gw/M + bw) * M + mh) * M + mw
        int64_t rest = row;
        const int64_t mw = rest % M;
        rest /= M;
        const int64_t mh = rest % M;
        rest /= M;
        const int64_t bw = rest % (gw / M);
        rest /= gw / M;
        const int64_t bh = rest % (gh / M);
        const int64_t t0 = rest / (gh / M);
        const int64_t y0 = (bh * M + mh) * P, x0 = (bw * M + mw) * P;
        float* out = &px.values[static_cast<size_t>(row * px.cols)];
        for (int64_t ch = 0; ch < 3; ++ch) {
            const auto& table = lut[static_cast<size_t>(ch)];
            for (int64_t t = 0; t < T; ++t) {
                const int64_t f = std::min(t0 * T + t, nt - 1); // padding repeats the last frame
                const uint8_t* rgb = frames[static_cast<size_t>(f)]->rgb.data();
                for (int64_t py = 0; py < P; ++py) {
                    const uint8_t* src = rgb + ((y0 + py) * width + x0) * 3 + ch;
                    for (int64_t pxl = 0; pxl < P; ++pxl) *out++ = table[src[pxl * 3]];
                }
            }
        }
    }
    return px;
}

void check_image(const Image& image, const char* what) {
    require(image.width > 0 && image.height > 0 &&
                image.rgb.size() == static_cast<size_t>(image.width) * image.height * 3,
            what, ": invalid image ", image.width, "x", image.height, " with ", image.rgb.size(),
            " bytes");
}

} // namespace

ResizedSize smart_resize_image(int64_t height, int64_t width, const ProcessorConfig& config) {
    require(height > 0 && width > 0, "preprocess: invalid image size ", width, "x", height);
    check_aspect(height, width);
    const int64_t factor = config.patch_size * config.merge_size;
    int64_t h_bar = round_half_even(static_cast<double>(height) / factor) * factor;
    int64_t w_bar = round_half_even(static_cast<double>(width) / factor) * factor;
    if (h_bar * w_bar > config.max_pixels) {
        double beta = std::sqrt(static_cast<double>(height * width) / config.max_pixels);
        h_bar = std::max(factor, static_cast<int64_t>(std::floor(height / beta / factor)) * factor);
        w_bar = std::max(factor, static_cast<int64_t>(std::floor(width / beta / factor)) * factor);
    } else if (h_bar * w_bar < config.min_pixels) {
        double beta = std::sqrt(static_cast<double>(config.min_pixels) / (height * width));
        h_bar = static_cast<int64_t>(std::ceil(height * beta / factor)) * factor;
        w_bar = static_cast<int64_t>(std::ceil(width * beta / factor)) * factor;
    }
    return {h_bar, w_bar};
}

ResizedSize smart_resize_video(int64_t num_frames, int64_t height, int64_t width,
                               const VideoProcessorConfig& config) {
    require(height > 0 && width > 0, "preprocess: invalid video frame size ", width, "x", height);
    const int64_t factor = config.patch_size * config.merge_size;
    const int64_t tf = config.temporal_patch_size;
    if (num_frames < tf)
        fail_invalid("preprocess: a video needs at least temporal_patch_size = ", tf,
                     " frames, got ", num_frames);
    int64_t max_pixels = config.max_pixels;
    if (config.cap_pixels_per_frame) {
        int64_t frame_cap = config.max_video_tokens * factor * factor;
        int64_t per_frame = std::max(std::min(frame_cap, config.max_pixels / num_frames),
                                     static_cast<int64_t>(config.min_pixels * 1.05));
        max_pixels = per_frame * num_frames;
    }
    if (height < factor || width < factor) {
        double scale = std::max(static_cast<double>(factor) / height,
                                static_cast<double>(factor) / width);
        height = static_cast<int64_t>(height * scale);
        width = static_cast<int64_t>(width * scale);
    }
    check_aspect(height, width);
    int64_t h_bar = round_half_even(static_cast<double>(height) / factor) * factor;
    int64_t w_bar = round_half_even(static_cast<double>(width) / factor) * factor;
    int64_t t_bar = round_half_even(static_cast<double>(num_frames) / tf) * tf;
    if (t_bar * h_bar * w_bar > max_pixels) {
        double beta = std::sqrt(static_cast<double>(num_frames * height * width) / max_pixels);
        h_bar = std::max(factor, static_cast<int64_t>(std::floor(height / beta / factor)) * factor);
        w_bar = std::max(factor, static_cast<int64_t>(std::floor(width / beta / factor)) * factor);
    } else if (t_bar * h_bar * w_bar < config.min_pixels) {
        double beta =
            std::sqrt(static_cast<double>(config.min_pixels) / (num_frames * height * width));
        h_bar = static_cast<int64_t>(std::ceil(height * beta / factor)) * factor;
        w_bar = static_cast<int64_t>(std::ceil(width * beta / factor)) * factor;
    }
    return {h_bar, w_bar};
}

Pixels preprocess_image(const Image& image, const ImageProcessorConfig& config) {
    check_config(config, "preprocess_image");
    check_image(image, "preprocess_image");
    if (!config.do_resize) {
        // HF patchifies whatever it gets; a size that is not a multiple fails in the reshape.
        return patchify({&image}, config);
    }
    ResizedSize size = smart_resize_image(image.height, image.width, config);
    Image resized = resize_bicubic(image, static_cast<int32_t>(size.width),
                                   static_cast<int32_t>(size.height), config.backend);
    return patchify({&resized}, config);
}

Pixels preprocess_image(const Image& image, const VisionPreprocessConfig& config) {
    return preprocess_image(image, config.image);
}

Pixels preprocess_video(const std::vector<Image>& frames, const VideoProcessorConfig& config) {
    check_config(config, "preprocess_video");
    require(!frames.empty(), "preprocess_video: no frames");
    for (const Image& f : frames) {
        check_image(f, "preprocess_video");
        require(f.width == frames[0].width && f.height == frames[0].height,
                "preprocess_video: frames differ in size (", f.width, "x", f.height, " vs ",
                frames[0].width, "x", frames[0].height, ")");
    }
    std::vector<Image> resized;
    std::vector<const Image*> ptrs;
    if (config.do_resize) {
        ResizedSize size = smart_resize_video(static_cast<int64_t>(frames.size()),
                                              frames[0].height, frames[0].width, config);
        resized.reserve(frames.size());
        for (const Image& f : frames)
            resized.push_back(resize_bicubic(f, static_cast<int32_t>(size.width),
                                             static_cast<int32_t>(size.height), config.backend));
        for (const Image& f : resized) ptrs.push_back(&f);
    } else {
        for (const Image& f : frames) ptrs.push_back(&f);
    }
    return patchify(ptrs, config);
}

Pixels preprocess_video(const std::vector<Image>& frames, const VisionPreprocessConfig& config) {
    return preprocess_video(frames, config.video);
}

} // namespace ninfer::media
