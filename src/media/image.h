// Image decoding: JPEG, PNG and WebP bytes -> RGB8, as PIL's Image.open(...).convert("RGB") gives
// them (the pixels HF transformers' Qwen3.5/3.6 processors start from). docs/VISION.md,
// "Preprocessing".
//
// - The format is found from the magic bytes, never from a file name.
// - Grey, grey+alpha, palette, RGBA and 16-bit inputs become RGB8 the way PIL converts them:
//   alpha is dropped (not composited); palette entries are looked up; 16-bit RGB / RGBA / grey+alpha
//   keep the high byte; 16-bit grey (PIL's "I;16") saturates at 255, as PIL's I;16 -> RGB does.
//   CMYK JPEGs are converted with PIL's formula (Adobe-inverted data as PIL reads it).
// - No EXIF rotation: HF's default (torchvision) image processor decodes without it.
// - The dimensions are checked against DecodeLimits from the header, before anything is
//   allocated, so a decompression bomb is an error, not an allocation.
// - Every corrupt, truncated, unsupported or oversized input is a ninfer::Error whose message
//   starts with "image: "; the decoders' own exit()/abort() paths are never reached.
#pragma once

#include <array>
#include <cstdint>
#include <filesystem>
#include <span>
#include <string>
#include <vector>

namespace ninfer::media {

// An 8-bit RGB image, row-major, 3 bytes per pixel, no padding: rgb.size() == width * height * 3.
struct Image {
    int32_t width = 0;
    int32_t height = 0;
    std::vector<uint8_t> rgb;
};

struct DecodeLimits {
    int64_t max_pixels = 50'000'000;  // width * height, checked from the header
    int64_t max_bytes = 64ll << 20;   // size of the encoded input
};

enum class ImageFormat { Jpeg, Png, Webp };
const char* image_format_name(ImageFormat format);

// The format of an encoded image from its magic bytes; an Error (Unsupported) names what it is
// when it is a format that is recognised but not decoded (GIF, BMP, TIFF, ...).
ImageFormat detect_image_format(std::span<const uint8_t> bytes);

Image decode_image(std::span<const uint8_t> bytes, const DecodeLimits& limits = {});
// Reads the file (at most limits.max_bytes) and decodes it.
Image read_image_file(const std::filesystem::path& path, const DecodeLimits& limits = {});

// A 128-bit xxHash (XXH3-128) of the image's width, height (two little-endian int32) and RGB
// bytes: equal images hash equal whatever their encoding. For prefix caching of vision inputs.
struct ContentHash {
    uint64_t high = 0;
    uint64_t low = 0;
    bool operator==(const ContentHash&) const = default;
    std::string hex() const; // 32 lower-case hex digits, high word first
};
ContentHash content_hash(const Image& image);

} // namespace ninfer::media
