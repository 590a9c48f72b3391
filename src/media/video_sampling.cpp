#include <algorithm>
#include <cmath>

#include "core/error.h"
#include "media/video.h"

namespace ninfer::media {

std::vector<int64_t> sample_frame_indices(int64_t total_frames, double video_fps,
                                          const VideoProcessorConfig& config) {
    require(total_frames > 0, "video: no frames to sample");
    std::vector<int64_t> indices;
    if (!config.do_sample_frames) {
        for (int64_t i = 0; i < total_frames; ++i) indices.push_back(i);
        return indices;
    }
    int64_t n;
    if (config.num_frames) {
        n = *config.num_frames; // HF does not clamp a fixed count
    } else {
        double fps = video_fps > 0 ? video_fps : 24.0;
        n = static_cast<int64_t>(static_cast<double>(total_frames) / fps * config.fps);
        n = std::min({std::max(n, config.min_frames), config.max_frames, total_frames});
    }
    require(n > 0, "video: sampling gives no frames");
    // np.linspace(0, total - 1, n): i * step, the last one exactly total - 1; then .round().
    const double stop = static_cast<double>(total_frames - 1);
    indices.resize(static_cast<size_t>(n));
    if (n == 1) {
        indices[0] = 0;
        return indices;
    }
    const double step = stop / static_cast<double>(n - 1);
    for (int64_t i = 0; i < n; ++i) {
        double y = step == 0.0 ? (static_cast<double>(i) / (n - 1)) * stop : static_cast<double>(i) * step;
        if (i == n - 1) y = stop;
        double r = std::floor(y), diff = y - r;
        if (diff > 0.5 || (diff == 0.5 && std::fmod(r, 2.0) != 0.0)) r += 1.0;
        indices[static_cast<size_t>(i)] = static_cast<int64_t>(r);
    }
    return indices;
}

std::vector<double> video_timestamps(const std::vector<int64_t>& frame_indices, double video_fps,
                                     int64_t temporal_patch_size) {
    require(temporal_patch_size > 0, "video: temporal_patch_size must be positive");
    std::vector<int64_t> idx = frame_indices;
    if (idx.empty()) return {};
    double fps = video_fps > 0 ? video_fps : 24.0;
    while (static_cast<int64_t>(idx.size()) % temporal_patch_size != 0) idx.push_back(idx.back());
    std::vector<double> out;
    for (size_t i = 0; i < idx.size(); i += static_cast<size_t>(temporal_patch_size)) {
        double a = static_cast<double>(idx[i]) / fps;
        double b = static_cast<double>(idx[i + static_cast<size_t>(temporal_patch_size) - 1]) / fps;
        out.push_back((a + b) / 2);
    }
    return out;
}

} // namespace ninfer::media
