// WebP (lossy, lossless, with or without alpha) through libwebp. PIL decodes the (first) frame
// as RGBA and convert("RGB") drops the alpha; decoding straight to RGB gives the same bytes.
#include <webp/decode.h>

#include "core/error.h"
#include "media/decoders.h"

namespace ninfer::media::detail {

Image decode_webp(std::span<const uint8_t> bytes, const DecodeLimits& limits) {
    WebPBitstreamFeatures features;
    VP8StatusCode status = WebPGetFeatures(bytes.data(), bytes.size(), &features);
    if (status == VP8_STATUS_NOT_ENOUGH_DATA) fail_invalid("image: truncated WebP data");
    if (status != VP8_STATUS_OK) fail_invalid("image: corrupt WebP data (header)");
    if (features.has_animation)
        fail(ErrorCategory::Unsupported, "image: animated WebP is not supported");
    check_dimensions("WebP", features.width, features.height, limits);

    Image image;
    image.width = features.width;
    image.height = features.height;
    image.rgb.resize(rgb_bytes(image.width, image.height));
    const int stride = image.width * 3;
    if (WebPDecodeRGBInto(bytes.data(), bytes.size(), image.rgb.data(), image.rgb.size(),
                          stride) == nullptr) {
        // WebPDecode* says only that it failed; a second, incremental pass says why.
        WebPIDecoder* idec = WebPINewRGB(MODE_RGB, image.rgb.data(), image.rgb.size(), stride);
        VP8StatusCode why = idec != nullptr ? WebPIAppend(idec, bytes.data(), bytes.size())
                                            : VP8_STATUS_OUT_OF_MEMORY;
        if (idec != nullptr) WebPIDelete(idec);
        if (why == VP8_STATUS_SUSPENDED || why == VP8_STATUS_NOT_ENOUGH_DATA)
            fail_invalid("image: truncated WebP data");
        if (why == VP8_STATUS_OUT_OF_MEMORY)
            fail(ErrorCategory::OutOfMemory, "image: out of memory decoding WebP");
        fail_invalid("image: corrupt WebP data");
    }
    return image;
}

} // namespace ninfer::media::detail
