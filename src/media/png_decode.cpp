// PNG through libpng, with error and warning callbacks that never print or exit: a libpng error
// longjmps back to the function that called setjmp, which holds only trivially destructible
// locals. Pixels become RGB8 as PIL's PNG plugin + convert("RGB") make them (image.h).
#include <csetjmp>
#include <cstdio>
#include <cstring>

#include <png.h>

#include "core/error.h"
#include "media/decoders.h"

namespace ninfer::media::detail {
namespace {

struct Reader {
    const uint8_t* data;
    size_t size;
    size_t offset;
    char message[256];
};

void on_error(png_structp png, png_const_charp msg) {
    auto* r = static_cast<Reader*>(png_get_error_ptr(png));
    if (r->message[0] == 0) std::snprintf(r->message, sizeof r->message, "invalid PNG data (%s)", msg);
    png_longjmp(png, 1);
}

void on_warning(png_structp, png_const_charp) {}

void on_read(png_structp png, png_bytep out, size_t n) {
    auto* r = static_cast<Reader*>(png_get_io_ptr(png));
    if (n > r->size - r->offset) {
        std::snprintf(r->message, sizeof r->message, "truncated PNG data");
        png_error(png, "truncated PNG data");
    }
    std::memcpy(out, r->data + r->offset, n);
    r->offset += n;
}

struct Info {
    png_uint_32 width, height;
    int bit_depth, color_type, channels;
    bool grey16; // 16-bit grey without alpha: PIL's "I;16"
};

bool read_info(png_structp png, png_infop info, Info* out) {
    if (setjmp(png_jmpbuf(png))) return false;
    png_read_info(png, info);
    png_get_IHDR(png, info, &out->width, &out->height, &out->bit_depth, &out->color_type,
                 nullptr, nullptr, nullptr);
    return true;
}

// Sets the transforms (after the dimension check) and reports the row layout.
bool set_transforms(png_structp png, png_infop info, Info* out) {
    if (setjmp(png_jmpbuf(png))) return false;
    out->grey16 = out->color_type == PNG_COLOR_TYPE_GRAY && out->bit_depth == 16;
    if (out->color_type == PNG_COLOR_TYPE_PALETTE) png_set_palette_to_rgb(png);
    if (out->color_type == PNG_COLOR_TYPE_GRAY && out->bit_depth < 8)
        png_set_expand_gray_1_2_4_to_8(png);
    // High byte of 16-bit samples, as PIL's "RGB;16B" / "RGBA;16B" / "LA;16B" raw modes.
    if (out->bit_depth == 16 && !out->grey16) png_set_strip_16(png);
    png_set_interlace_handling(png);
    png_read_update_info(png, info);
    out->channels = png_get_channels(png, info);
    return true;
}

bool read_rows(png_structp png, png_bytepp rows) {
    if (setjmp(png_jmpbuf(png))) return false;
    png_read_image(png, rows);
    png_read_end(png, nullptr);
    return true;
}

} // namespace

Image decode_png(std::span<const uint8_t> bytes, const DecodeLimits& limits) {
    Reader reader{bytes.data(), bytes.size(), 0, {0}};
    png_structp png = png_create_read_struct(PNG_LIBPNG_VER_STRING, &reader, on_error, on_warning);
    if (png == nullptr) fail(ErrorCategory::OutOfMemory, "image: cannot create a PNG decoder");
    png_infop info = png_create_info_struct(png);
    struct Guard {
        png_structp* png;
        png_infop* info;
        ~Guard() { png_destroy_read_struct(png, *info != nullptr ? info : nullptr, nullptr); }
    } guard{&png, &info};
    if (info == nullptr) fail(ErrorCategory::OutOfMemory, "image: cannot create a PNG decoder");
    png_set_read_fn(png, &reader, on_read);
    // Dimensions are checked by check_dimensions below; the libpng limits only stop ancillary
    // chunks (text, ICC) from allocating without bound.
    png_set_user_limits(png, 0x7fffffff, 0x7fffffff);
    png_set_chunk_malloc_max(png, 16u << 20);

    auto failed = [&]() -> Error {
        return Error(ErrorCategory::InvalidArgument,
                     concat("image: ", reader.message[0] != 0 ? reader.message : "invalid PNG data"));
    };
    Info hdr{};
    if (!read_info(png, info, &hdr)) throw failed();
    check_dimensions("PNG", hdr.width, hdr.height, limits);
    if (!set_transforms(png, info, &hdr)) throw failed();

    const size_t width = hdr.width, height = hdr.height;
    const size_t channels = static_cast<size_t>(hdr.channels);
    const size_t sample_bytes = hdr.grey16 ? 2 : 1;
    const size_t row_bytes = width * channels * sample_bytes;
    if (png_get_rowbytes(png, info) != row_bytes)
        fail(ErrorCategory::Internal, "image: unexpected PNG row layout");
    std::vector<uint8_t> raw(row_bytes * height);
    std::vector<png_bytep> rows(height);
    for (size_t y = 0; y < height; ++y) rows[y] = raw.data() + y * row_bytes;
    if (!read_rows(png, rows.data())) throw failed();

    Image image;
    image.width = static_cast<int32_t>(width);
    image.height = static_cast<int32_t>(height);
    image.rgb.resize(rgb_bytes(image.width, image.height));
    uint8_t* rgb = image.rgb.data();
    const size_t n = width * height;
    if (hdr.grey16) {
        // PIL's I;16 -> RGB: values over 255 saturate (Convert.c I16_RGB).
        for (size_t i = 0; i < n; ++i) {
            uint8_t hi = raw[2 * i], lo = raw[2 * i + 1]; // big-endian samples
            uint8_t v = hi == 0 ? lo : 255;
            rgb[3 * i] = rgb[3 * i + 1] = rgb[3 * i + 2] = v;
        }
    } else if (channels == 1 || channels == 2) { // grey, grey + alpha (dropped)
        for (size_t i = 0; i < n; ++i) {
            uint8_t v = raw[i * channels];
            rgb[3 * i] = rgb[3 * i + 1] = rgb[3 * i + 2] = v;
        }
    } else if (channels == 3) {
        std::memcpy(rgb, raw.data(), n * 3);
    } else if (channels == 4) { // RGBA, alpha dropped
        for (size_t i = 0; i < n; ++i) std::memcpy(rgb + 3 * i, &raw[4 * i], 3);
    } else {
        fail(ErrorCategory::Internal, "image: unexpected PNG channel count ", channels);
    }
    return image;
}

} // namespace ninfer::media::detail
