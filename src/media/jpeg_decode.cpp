// JPEG through libjpeg-turbo, with a longjmp error manager (the library's default error_exit
// calls exit()). The functions that call setjmp hold only trivially destructible locals, so a
// longjmp out of libjpeg skips no destructor.
#include <csetjmp>
#include <cstdio>
#include <cstring>

#include <jerror.h>
#include <jpeglib.h>

#include "core/error.h"
#include "media/decoders.h"

namespace ninfer::media::detail {
namespace {

// A progressive JPEG may hold thousands of tiny scans, each a full pass over the coefficients;
// libjpeg-turbo's own tools cap them too. Real encoders write at most a few dozen.
constexpr int kMaxScans = 1000;

struct ErrorManager {
    jpeg_error_mgr pub; // first: libjpeg sees a jpeg_error_mgr*
    std::jmp_buf jump;
    char message[JMSG_LENGTH_MAX + 64];
    bool truncated;
};

[[noreturn]] void jump_out(j_common_ptr cinfo) {
    auto* err = reinterpret_cast<ErrorManager*>(cinfo->err);
    std::longjmp(err->jump, 1);
}

void on_error_exit(j_common_ptr cinfo) {
    auto* err = reinterpret_cast<ErrorManager*>(cinfo->err);
    char text[JMSG_LENGTH_MAX];
    (*cinfo->err->format_message)(cinfo, text);
    std::snprintf(err->message, sizeof err->message, "invalid JPEG data (%s)", text);
    jump_out(cinfo);
}

// Warnings: libjpeg pads a truncated stream with grey and warns JWRN_JPEG_EOF; PIL raises "image
// file is truncated" there, and so do we. Other corrupt-data warnings are decoded through, as PIL
// decodes through them.
void on_emit_message(j_common_ptr cinfo, int msg_level) {
    auto* err = reinterpret_cast<ErrorManager*>(cinfo->err);
    if (msg_level < 0) {
        if (cinfo->err->msg_code == JWRN_JPEG_EOF) {
            err->truncated = true;
            std::snprintf(err->message, sizeof err->message, "truncated JPEG data");
            jump_out(cinfo);
        }
        cinfo->err->num_warnings++;
    }
}

void on_output_message(j_common_ptr) {}

void on_progress(j_common_ptr cinfo) {
    auto* d = reinterpret_cast<j_decompress_ptr>(cinfo);
    if (d->input_scan_number > kMaxScans) {
        auto* err = reinterpret_cast<ErrorManager*>(cinfo->err);
        std::snprintf(err->message, sizeof err->message, "progressive JPEG with over %d scans",
                      kMaxScans);
        jump_out(cinfo);
    }
}

struct Decoder {
    jpeg_decompress_struct cinfo;
    ErrorManager err;
    jpeg_progress_mgr progress;
    bool created;
};

// Reads the header. Returns false (message in err) on a libjpeg error.
bool read_header(Decoder* d, const uint8_t* data, size_t size) {
    if (setjmp(d->err.jump)) return false;
    jpeg_create_decompress(&d->cinfo);
    d->created = true;
    d->progress.progress_monitor = on_progress;
    d->cinfo.progress = &d->progress;
    jpeg_mem_src(&d->cinfo, data, static_cast<unsigned long>(size));
    jpeg_read_header(&d->cinfo, TRUE);
    // As PIL: 1 component -> grey, 3 -> RGB (libjpeg converts YCbCr), 4 -> CMYK (Adobe polarity).
    switch (d->cinfo.num_components) {
    case 1:
        d->cinfo.out_color_space = JCS_GRAYSCALE;
        break;
    case 3:
        d->cinfo.out_color_space = JCS_RGB;
        break;
    case 4:
        d->cinfo.out_color_space = JCS_CMYK;
        break;
    default:
        std::snprintf(d->err.message, sizeof d->err.message, "cannot handle %d-component JPEG",
                      d->cinfo.num_components);
        return false;
    }
    return true;
}

// Decodes into out (output_components bytes per pixel, rows of row_bytes).
bool read_pixels(Decoder* d, uint8_t* out, size_t row_bytes) {
    if (setjmp(d->err.jump)) return false;
    jpeg_start_decompress(&d->cinfo);
    while (d->cinfo.output_scanline < d->cinfo.output_height) {
        JSAMPROW row = out + static_cast<size_t>(d->cinfo.output_scanline) * row_bytes;
        if (jpeg_read_scanlines(&d->cinfo, &row, 1) != 1) {
            std::snprintf(d->err.message, sizeof d->err.message, "truncated JPEG data");
            return false;
        }
    }
    jpeg_finish_decompress(&d->cinfo);
    return true;
}

void destroy(Decoder* d) {
    if (d->created) jpeg_destroy_decompress(&d->cinfo);
    d->created = false;
}

// PIL's MULDIV255 and cmyk2rgb (Convert.c) on Adobe-inverted CMYK ("CMYK;I").
inline uint8_t muldiv255(int a, int b) {
    int t = a * b + 128;
    return static_cast<uint8_t>(((t >> 8) + t) >> 8);
}

} // namespace

Image decode_jpeg(std::span<const uint8_t> bytes, const DecodeLimits& limits) {
    Decoder d;
    std::memset(&d, 0, sizeof d);
    d.cinfo.err = jpeg_std_error(&d.err.pub);
    d.err.pub.error_exit = on_error_exit;
    d.err.pub.emit_message = on_emit_message;
    d.err.pub.output_message = on_output_message;

    struct Guard {
        Decoder* d;
        ~Guard() { destroy(d); }
    } guard{&d};

    auto failed = [&]() -> Error {
        return Error(ErrorCategory::InvalidArgument, concat("image: ", d.err.message[0] != 0
                                                                           ? d.err.message
                                                                           : "invalid JPEG data"));
    };
    if (!read_header(&d, bytes.data(), bytes.size())) throw failed();
    check_dimensions("JPEG", d.cinfo.image_width, d.cinfo.image_height, limits);

    const int64_t width = d.cinfo.image_width, height = d.cinfo.image_height;
    const int comps = d.cinfo.num_components == 1 ? 1 : d.cinfo.num_components == 3 ? 3 : 4;
    Image image;
    image.width = static_cast<int32_t>(width);
    image.height = static_cast<int32_t>(height);
    image.rgb.resize(rgb_bytes(width, height));
    std::vector<uint8_t> staging; // grey or CMYK rows before the conversion to RGB
    uint8_t* target = image.rgb.data();
    if (comps != 3) {
        staging.resize(static_cast<size_t>(width) * static_cast<size_t>(height) * comps);
        target = staging.data();
    }
    if (!read_pixels(&d, target, static_cast<size_t>(width) * comps)) throw failed();
    if (d.cinfo.output_width != width || d.cinfo.output_height != height)
        fail(ErrorCategory::Internal, "image: JPEG output size differs from its header");

    const size_t n = static_cast<size_t>(width) * static_cast<size_t>(height);
    uint8_t* rgb = image.rgb.data();
    if (comps == 1) {
        for (size_t i = 0; i < n; ++i) rgb[3 * i] = rgb[3 * i + 1] = rgb[3 * i + 2] = staging[i];
    } else if (comps == 4) {
        for (size_t i = 0; i < n; ++i) {
            const uint8_t* p = &staging[4 * i];
            int nk = p[3]; // 255 - k after the Adobe inversion
            for (int c = 0; c < 3; ++c) {
                int v = nk - muldiv255(255 - p[c], nk);
                rgb[3 * i + c] = static_cast<uint8_t>(v < 0 ? 0 : v > 255 ? 255 : v);
            }
        }
    }
    return image;
}

} // namespace ninfer::media::detail
