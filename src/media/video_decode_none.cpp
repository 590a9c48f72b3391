// decode_video for builds without FFmpeg (NINFER_VIDEO=OFF, e.g. a packed GPU build whose
// working tree has no room for libav's libraries): every video is a clear error; images and the
// rest of media/ are unchanged.
#include "core/error.h"
#include "media/video.h"

namespace ninfer::media {

Video decode_video(std::span<const uint8_t>, const VideoProcessorConfig&, const VideoLimits&) {
    fail(ErrorCategory::Unsupported,
         "video: this build of ninfer has no video decoder (configured with NINFER_VIDEO=OFF)");
}

Video decode_video_file(const std::filesystem::path&, const VideoProcessorConfig&,
                        const VideoLimits&) {
    fail(ErrorCategory::Unsupported,
         "video: this build of ninfer has no video decoder (configured with NINFER_VIDEO=OFF)");
}

} // namespace ninfer::media
