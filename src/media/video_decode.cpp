// Video decoding with FFmpeg's libav*: two passes over the container (count the stream's
// packets, then decode and keep the sampled frames), RGB24 through libswscale.
#include <algorithm>
#include <cstring>
#include <mutex>
#include <string>

extern "C" {
#include <libavcodec/avcodec.h>
#include <libavformat/avformat.h>
#include <libavutil/error.h>
#include <libavutil/imgutils.h>
#include <libswscale/swscale.h>
}

#include "core/error.h"
#include "media/video.h"

namespace ninfer::media {
namespace {

std::string av_error(int code) {
    char buf[AV_ERROR_MAX_STRING_SIZE] = {0};
    av_strerror(code, buf, sizeof buf);
    return buf;
}

void quiet_logs() {
    static std::once_flag once;
    std::call_once(once, [] { av_log_set_level(AV_LOG_QUIET); });
}

// The encoded bytes behind a custom AVIOContext.
struct MemorySource {
    const uint8_t* data;
    int64_t size;
    int64_t pos;
};

int read_memory(void* opaque, uint8_t* buf, int n) {
    auto* m = static_cast<MemorySource*>(opaque);
    int64_t left = m->size - m->pos;
    if (left <= 0) return AVERROR_EOF;
    int k = static_cast<int>(std::min<int64_t>(left, n));
    std::memcpy(buf, m->data + m->pos, static_cast<size_t>(k));
    m->pos += k;
    return k;
}

int64_t seek_memory(void* opaque, int64_t offset, int whence) {
    auto* m = static_cast<MemorySource*>(opaque);
    if (whence & AVSEEK_SIZE) return m->size;
    int64_t base = 0;
    switch (whence & ~AVSEEK_FORCE) {
    case SEEK_SET:
        base = 0;
        break;
    case SEEK_CUR:
        base = m->pos;
        break;
    case SEEK_END:
        base = m->size;
        break;
    default:
        return AVERROR(EINVAL);
    }
    int64_t p = base + offset;
    if (p < 0 || p > m->size) return AVERROR(EINVAL);
    m->pos = p;
    return p;
}

constexpr const char* kContainers = "mov,mp4,m4a,3gp,3g2,mj2,matroska,webm,avi,mpegts,mpeg,flv,ogg,asf";

// Video codecs worth decoding; anything else in a container is refused rather than handed to a
// rarely used decoder.
bool allowed_codec(AVCodecID id) {
    switch (id) {
    case AV_CODEC_ID_H264:
    case AV_CODEC_ID_HEVC:
    case AV_CODEC_ID_VP8:
    case AV_CODEC_ID_VP9:
    case AV_CODEC_ID_AV1:
    case AV_CODEC_ID_MPEG4:
    case AV_CODEC_ID_MPEG1VIDEO:
    case AV_CODEC_ID_MPEG2VIDEO:
    case AV_CODEC_ID_MJPEG:
    case AV_CODEC_ID_THEORA:
    case AV_CODEC_ID_H263:
        return true;
    default:
        return false;
    }
}

// One opened container (with its custom I/O when reading memory).
class Input {
public:
    Input(const MemorySource* memory, const std::filesystem::path* path) {
        quiet_logs();
        try {
            open(memory, path);
        } catch (...) {
            close();
            throw;
        }
    }
    ~Input() { close(); }
    Input(const Input&) = delete;
    Input& operator=(const Input&) = delete;

    AVFormatContext* fmt() const { return fmt_; }
    AVStream* stream() const { return fmt_->streams[stream_]; }
    int index() const { return stream_; }

private:
    void open(const MemorySource* memory, const std::filesystem::path* path) {
        fmt_ = avformat_alloc_context();
        if (fmt_ == nullptr) fail(ErrorCategory::OutOfMemory, "video: out of memory");
        AVDictionary* opts = nullptr;
        std::string url;
        if (memory != nullptr) {
            source_ = *memory;
            constexpr int kBuffer = 1 << 16;
            auto* buffer = static_cast<uint8_t*>(av_malloc(kBuffer));
            if (buffer == nullptr) fail(ErrorCategory::OutOfMemory, "video: out of memory");
            avio_ = avio_alloc_context(buffer, kBuffer, 0, &source_, read_memory, nullptr,
                                       seek_memory);
            if (avio_ == nullptr) {
                av_free(buffer);
                fail(ErrorCategory::OutOfMemory, "video: out of memory");
            }
            fmt_->pb = avio_;
        } else {
            url = path->string();
        }
        // Containers only (no playlists or network protocols a crafted file could reach out
        // through): local files for a path, nothing at all for bytes in memory.
        av_dict_set(&opts, "protocol_whitelist", memory != nullptr ? "none" : "file", 0);
        av_dict_set(&opts, "format_whitelist", kContainers, 0);
        int rc = avformat_open_input(&fmt_, memory != nullptr ? nullptr : url.c_str(), nullptr,
                                     &opts);
        av_dict_free(&opts);
        if (rc < 0) {
            fmt_ = nullptr; // avformat_open_input frees it on failure
            fail_invalid("video: cannot open the container (", av_error(rc), ")");
        }
        rc = avformat_find_stream_info(fmt_, nullptr);
        if (rc < 0) fail_invalid("video: cannot read the stream info (", av_error(rc), ")");
        stream_ = av_find_best_stream(fmt_, AVMEDIA_TYPE_VIDEO, -1, -1, nullptr, 0);
        if (stream_ < 0) fail_invalid("video: no video stream");
    }
    void close() {
        if (fmt_ != nullptr) avformat_close_input(&fmt_);
        if (avio_ != nullptr) {
            av_freep(&avio_->buffer);
            avio_context_free(&avio_);
        }
    }

    AVFormatContext* fmt_ = nullptr;
    AVIOContext* avio_ = nullptr;
    MemorySource source_{};
    int stream_ = -1;
};

struct Packet {
    AVPacket* p = av_packet_alloc();
    ~Packet() { av_packet_free(&p); }
};
struct Frame {
    AVFrame* f = av_frame_alloc();
    ~Frame() { av_frame_free(&f); }
};
struct Codec {
    AVCodecContext* c = nullptr;
    ~Codec() { avcodec_free_context(&c); }
};
struct Scaler {
    SwsContext* s = nullptr;
    ~Scaler() { sws_freeContext(s); }
};

double stream_fps(const AVStream* st) {
    for (AVRational r : {st->avg_frame_rate, st->r_frame_rate})
        if (r.num > 0 && r.den > 0) return av_q2d(r);
    return 24.0; // HF's assumption when the fps is unknown
}

Video decode(const MemorySource* memory, const std::filesystem::path* path,
             const VideoProcessorConfig& config, const VideoLimits& limits) {
    Video video;
    // Pass 1: count the stream's packets.
    {
        Input in(memory, path);
        Packet pkt;
        if (pkt.p == nullptr) fail(ErrorCategory::OutOfMemory, "video: out of memory");
        int64_t count = 0;
        for (;;) {
            int rc = av_read_frame(in.fmt(), pkt.p);
            if (rc == AVERROR_EOF) break;
            if (rc < 0) fail_invalid("video: corrupt container (", av_error(rc), ")");
            if (pkt.p->stream_index == in.index() && ++count > limits.max_packets)
                fail_invalid("video: more than ", limits.max_packets, " frames");
            av_packet_unref(pkt.p);
        }
        if (count == 0) fail_invalid("video: the video stream has no frames");
        video.total_frames = count;
        video.fps = stream_fps(in.stream());
    }
    video.frame_indices = sample_frame_indices(video.total_frames, video.fps, config);
    // Each index once, in order (a fixed num_frames may repeat them).
    std::vector<int64_t> wanted = video.frame_indices;
    std::sort(wanted.begin(), wanted.end());
    wanted.erase(std::unique(wanted.begin(), wanted.end()), wanted.end());

    // Pass 2: decode, keep the sampled frames.
    Input in(memory, path);
    const AVCodecParameters* par = in.stream()->codecpar;
    if (par->width > 0 && par->height > 0 &&
        static_cast<int64_t>(par->width) * par->height > limits.max_frame_pixels)
        fail_invalid("video: ", par->width, "x", par->height, " frames exceed the limit of ",
                     limits.max_frame_pixels, " pixels");
    if (!allowed_codec(par->codec_id))
        fail(ErrorCategory::Unsupported, "video: codec '", avcodec_get_name(par->codec_id),
             "' is not supported");
    const AVCodec* codec = avcodec_find_decoder(par->codec_id);
    if (codec == nullptr)
        fail(ErrorCategory::Unsupported, "video: no decoder for codec '",
             avcodec_get_name(par->codec_id), "'");
    Codec dec;
    dec.c = avcodec_alloc_context3(codec);
    if (dec.c == nullptr) fail(ErrorCategory::OutOfMemory, "video: out of memory");
    int rc = avcodec_parameters_to_context(dec.c, par);
    if (rc < 0) fail_invalid("video: bad codec parameters (", av_error(rc), ")");
    dec.c->thread_count = 0;
    rc = avcodec_open2(dec.c, codec, nullptr);
    if (rc < 0) fail_invalid("video: cannot open the ", codec->name, " decoder (", av_error(rc), ")");

    Packet pkt;
    Frame frame;
    Scaler scaler;
    if (pkt.p == nullptr || frame.f == nullptr)
        fail(ErrorCategory::OutOfMemory, "video: out of memory");
    std::vector<Image> kept; // in the order of `wanted`
    int64_t decoded = 0;
    size_t next = 0;
    int64_t output_pixels = 0;

    auto take = [&](AVFrame* f) {
        const int64_t index = decoded++;
        if (next >= wanted.size() || index != wanted[next]) return;
        ++next;
        if (f->width <= 0 || f->height <= 0)
            fail_invalid("video: frame ", index, " has no size");
        if (static_cast<int64_t>(f->width) * f->height > limits.max_frame_pixels)
            fail_invalid("video: ", f->width, "x", f->height, " frames exceed the limit of ",
                         limits.max_frame_pixels, " pixels");
        if (video.width == 0) {
            video.width = f->width;
            video.height = f->height;
        } else if (f->width != video.width || f->height != video.height) {
            fail(ErrorCategory::Unsupported, "video: the frame size changes from ", video.width,
                 "x", video.height, " to ", f->width, "x", f->height);
        }
        output_pixels += static_cast<int64_t>(f->width) * f->height;
        if (output_pixels > limits.max_output_pixels)
            fail_invalid("video: the sampled frames exceed the limit of ",
                         limits.max_output_pixels, " pixels");
        auto src_fmt = static_cast<AVPixelFormat>(f->format);
        scaler.s = sws_getCachedContext(scaler.s, f->width, f->height, src_fmt, f->width,
                                        f->height, AV_PIX_FMT_RGB24, SWS_BILINEAR, nullptr,
                                        nullptr, nullptr);
        if (scaler.s == nullptr)
            fail(ErrorCategory::Unsupported, "video: cannot convert pixel format '",
                 av_get_pix_fmt_name(src_fmt) ? av_get_pix_fmt_name(src_fmt) : "?", "' to RGB");
        int cs = f->colorspace == AVCOL_SPC_UNSPECIFIED ? SWS_CS_DEFAULT : f->colorspace;
        sws_setColorspaceDetails(scaler.s, sws_getCoefficients(cs),
                                 f->color_range == AVCOL_RANGE_JPEG ? 1 : 0,
                                 sws_getCoefficients(SWS_CS_DEFAULT), 1, 0, 1 << 16, 1 << 16);
        Image img;
        img.width = f->width;
        img.height = f->height;
        img.rgb.resize(static_cast<size_t>(f->width) * f->height * 3);
        uint8_t* dst[4] = {img.rgb.data(), nullptr, nullptr, nullptr};
        int dst_stride[4] = {f->width * 3, 0, 0, 0};
        int h = sws_scale(scaler.s, f->data, f->linesize, 0, f->height, dst, dst_stride);
        if (h != f->height) fail_invalid("video: colour conversion failed for frame ", index);
        kept.push_back(std::move(img));
    };
    auto drain = [&]() {
        for (;;) {
            int r = avcodec_receive_frame(dec.c, frame.f);
            if (r == AVERROR(EAGAIN) || r == AVERROR_EOF) return;
            if (r < 0) fail_invalid("video: corrupt video data (", av_error(r), ")");
            take(frame.f);
            av_frame_unref(frame.f);
            if (next >= wanted.size()) return;
        }
    };
    while (next < wanted.size()) {
        rc = av_read_frame(in.fmt(), pkt.p);
        if (rc == AVERROR_EOF) break;
        if (rc < 0) fail_invalid("video: corrupt container (", av_error(rc), ")");
        if (pkt.p->stream_index == in.index()) {
            rc = avcodec_send_packet(dec.c, pkt.p);
            av_packet_unref(pkt.p);
            if (rc < 0 && rc != AVERROR(EAGAIN))
                fail_invalid("video: corrupt video data (", av_error(rc), ")");
            drain();
        } else {
            av_packet_unref(pkt.p);
        }
    }
    if (next < wanted.size()) {
        avcodec_send_packet(dec.c, nullptr); // flush the delayed frames
        drain();
    }
    if (next < wanted.size())
        fail_invalid("video: decoded ", decoded, " frames of the ", video.total_frames,
                     " the container holds (frame ", wanted[next], " is missing)");

    video.frames.reserve(video.frame_indices.size());
    for (int64_t idx : video.frame_indices) {
        size_t k = static_cast<size_t>(
            std::lower_bound(wanted.begin(), wanted.end(), idx) - wanted.begin());
        video.frames.push_back(kept[k]);
    }
    return video;
}

} // namespace

Video decode_video(std::span<const uint8_t> bytes, const VideoProcessorConfig& config,
                   const VideoLimits& limits) {
    if (bytes.empty()) fail_invalid("video: empty input");
    if (static_cast<int64_t>(bytes.size()) > limits.max_bytes)
        fail_invalid("video: ", bytes.size(), " bytes exceed the limit of ", limits.max_bytes,
                     " bytes");
    MemorySource source{bytes.data(), static_cast<int64_t>(bytes.size()), 0};
    return decode(&source, nullptr, config, limits);
}

Video decode_video_file(const std::filesystem::path& path, const VideoProcessorConfig& config,
                        const VideoLimits& limits) {
    std::error_code ec;
    if (!std::filesystem::is_regular_file(path, ec))
        fail(ErrorCategory::Io, "video: cannot open ", path.string());
    try {
        return decode(nullptr, &path, config, limits);
    } catch (const Error& e) {
        throw Error(e.category(), concat(e.what(), " (", path.string(), ")"));
    }
}

} // namespace ninfer::media
