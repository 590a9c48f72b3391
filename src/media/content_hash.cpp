#include <cstdio>
#include <cstring>

#include <xxhash.h>

#include "core/error.h"
#include "media/image.h"

namespace ninfer::media {

std::string ContentHash::hex() const {
    char buf[33];
    std::snprintf(buf, sizeof buf, "%016llx%016llx", static_cast<unsigned long long>(high),
                  static_cast<unsigned long long>(low));
    return buf;
}

ContentHash content_hash(const Image& image) {
    require(image.width >= 0 && image.height >= 0 &&
                image.rgb.size() == static_cast<size_t>(image.width) *
                                        static_cast<size_t>(image.height) * 3,
            "content_hash: the image's rgb size does not match ", image.width, "x", image.height);
    XXH3_state_t* state = XXH3_createState();
    if (state == nullptr) fail(ErrorCategory::OutOfMemory, "content_hash: out of memory");
    uint8_t dims[8];
    for (int i = 0; i < 4; ++i) {
        dims[i] = static_cast<uint8_t>(static_cast<uint32_t>(image.width) >> (8 * i));
        dims[4 + i] = static_cast<uint8_t>(static_cast<uint32_t>(image.height) >> (8 * i));
    }
    XXH3_128bits_reset(state);
    XXH3_128bits_update(state, dims, sizeof dims);
    XXH3_128bits_update(state, image.rgb.data(), image.rgb.size());
    XXH128_hash_t h = XXH3_128bits_digest(state);
    XXH3_freeState(state);
    return ContentHash{h.high64, h.low64};
}

} // namespace ninfer::media
