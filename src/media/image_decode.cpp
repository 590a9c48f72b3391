#include <cstdio>
#include <cstring>
#include <fstream>

#include "core/error.h"
#include "media/decoders.h"
#include "media/image.h"

namespace ninfer::media {
namespace {

// `magic` may hold NUL bytes: its length is the literal's.
template <size_t N>
bool starts_with(std::span<const uint8_t> bytes, const char (&magic)[N], size_t offset = 0) {
    constexpr size_t n = N - 1;
    return bytes.size() >= offset + n && std::memcmp(bytes.data() + offset, magic, n) == 0;
}

} // namespace

const char* image_format_name(ImageFormat format) {
    switch (format) {
    case ImageFormat::Jpeg:
        return "JPEG";
    case ImageFormat::Png:
        return "PNG";
    case ImageFormat::Webp:
        return "WebP";
    }
    return "?";
}

ImageFormat detect_image_format(std::span<const uint8_t> bytes) {
    if (bytes.empty()) fail_invalid("image: empty input");
    if (bytes.size() >= 3 && bytes[0] == 0xFF && bytes[1] == 0xD8 && bytes[2] == 0xFF)
        return ImageFormat::Jpeg;
    if (starts_with(bytes, "\x89PNG\r\n\x1a\n")) return ImageFormat::Png;
    if (starts_with(bytes, "RIFF") && starts_with(bytes, "WEBP", 8)) return ImageFormat::Webp;
    const char* other = nullptr;
    if (starts_with(bytes, "GIF87a") || starts_with(bytes, "GIF89a"))
        other = "GIF";
    else if (starts_with(bytes, "BM"))
        other = "BMP";
    else if (starts_with(bytes, "II*\0") || starts_with(bytes, "MM\0*"))
        other = "TIFF";
    else if (starts_with(bytes, "ftyp", 4))
        other = "HEIF/AVIF (ISO media)";
    else if (starts_with(bytes, "\0\0\0\x0cjP  ") || starts_with(bytes, "\xff\x4f\xff\x51"))
        other = "JPEG 2000";
    else if (starts_with(bytes, "\xff\x0a") || starts_with(bytes, "\0\0\0\x0cJXL "))
        other = "JPEG XL";
    if (other != nullptr)
        fail(ErrorCategory::Unsupported, "image: ", other,
             " is not supported (JPEG, PNG or WebP only)");
    fail(ErrorCategory::Unsupported, "image: unsupported format (not JPEG, PNG or WebP)");
}

Image decode_image(std::span<const uint8_t> bytes, const DecodeLimits& limits) {
    if (limits.max_bytes > 0 && static_cast<int64_t>(bytes.size()) > limits.max_bytes)
        fail_invalid("image: ", bytes.size(), " bytes exceed the limit of ", limits.max_bytes,
                     " bytes");
    switch (detect_image_format(bytes)) {
    case ImageFormat::Jpeg:
        return detail::decode_jpeg(bytes, limits);
    case ImageFormat::Png:
        return detail::decode_png(bytes, limits);
    case ImageFormat::Webp:
        return detail::decode_webp(bytes, limits);
    }
    fail(ErrorCategory::Internal, "image: unknown format");
}

Image read_image_file(const std::filesystem::path& path, const DecodeLimits& limits) {
    std::ifstream in(path, std::ios::binary | std::ios::ate);
    if (!in) fail(ErrorCategory::Io, "image: cannot open ", path.string());
    std::streamoff size = in.tellg();
    if (size < 0) fail(ErrorCategory::Io, "image: cannot read ", path.string());
    if (limits.max_bytes > 0 && size > limits.max_bytes)
        fail_invalid("image: ", path.string(), " has ", size, " bytes, over the limit of ",
                     limits.max_bytes, " bytes");
    std::vector<uint8_t> bytes(static_cast<size_t>(size));
    in.seekg(0);
    if (size > 0 && !in.read(reinterpret_cast<char*>(bytes.data()), size))
        fail(ErrorCategory::Io, "image: cannot read ", path.string());
    try {
        return decode_image(bytes, limits);
    } catch (const Error& e) {
        throw Error(e.category(), concat(e.what(), " (", path.string(), ")"));
    }
}

namespace detail {

void check_dimensions(const char* format, int64_t width, int64_t height, const DecodeLimits& limits) {
    if (width <= 0 || height <= 0)
        fail_invalid("image: ", format, " header has invalid dimensions ", width, "x", height);
    // Both fit in 32 bits for every supported format, so the product cannot overflow.
    if (width > INT32_MAX || height > INT32_MAX || width * height > limits.max_pixels) {
        char mp[32];
        std::snprintf(mp, sizeof mp, "%g", static_cast<double>(limits.max_pixels) / 1e6);
        fail_invalid("image: ", width, "x", height, " ", format, " exceeds the ", mp,
                     " MP limit (", width * height, " > ", limits.max_pixels, " pixels)");
    }
}

size_t rgb_bytes(int64_t width, int64_t height) {
    return static_cast<size_t>(width) * static_cast<size_t>(height) * 3;
}

} // namespace detail
} // namespace ninfer::media
