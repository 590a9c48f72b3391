// Internal: the per-format decoders behind decode_image (image_decode.cpp).
#pragma once

#include <cstdint>
#include <span>

#include "media/image.h"

namespace ninfer::media::detail {

// Throws when width x height is empty or exceeds limits.max_pixels (called from the header).
void check_dimensions(const char* format, int64_t width, int64_t height, const DecodeLimits& limits);
// The byte count of an RGB8 image, checked against size_t.
size_t rgb_bytes(int64_t width, int64_t height);

Image decode_jpeg(std::span<const uint8_t> bytes, const DecodeLimits& limits);
Image decode_png(std::span<const uint8_t> bytes, const DecodeLimits& limits);
Image decode_webp(std::span<const uint8_t> bytes, const DecodeLimits& limits);

} // namespace ninfer::media::detail
