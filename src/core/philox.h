// Philox4x32-10 (Salmon et al., "Parallel random numbers: as easy as 1, 2, 3", SC 2011): a
// counter-based generator, so draw n of seed s is a pure function of (s, n) on any device.
#pragma once

#include <array>
#include <cmath>
#include <cstdint>

#include "core/dtype.h" // NINFER_HD

namespace ninfer {

// The 128-bit counter is (counter, stream): stream 0 is the plain generator, other streams are
// independent draws at the same counter (the purposes of one token position: its sample, a
// draft's acceptance test, a drafter's proposal).
NINFER_HD inline std::array<uint32_t, 4> philox4x32_10(uint64_t key, uint64_t counter,
                                                       uint64_t stream = 0) {
    // Multipliers and Weyl constants from the paper.
    constexpr uint32_t kM0 = 0xD2511F53u, kM1 = 0xCD9E8D57u;
    constexpr uint32_t kW0 = 0x9E3779B9u, kW1 = 0xBB67AE85u;
    uint32_t c0 = uint32_t(counter), c1 = uint32_t(counter >> 32), c2 = uint32_t(stream),
             c3 = uint32_t(stream >> 32);
    uint32_t k0 = uint32_t(key), k1 = uint32_t(key >> 32);
    for (int round = 0; round < 10; ++round) {
        uint64_t p0 = uint64_t(kM0) * c0, p1 = uint64_t(kM1) * c2;
        uint32_t hi0 = uint32_t(p0 >> 32), lo0 = uint32_t(p0);
        uint32_t hi1 = uint32_t(p1 >> 32), lo1 = uint32_t(p1);
        c0 = hi1 ^ c1 ^ k0;
        c1 = lo1;
        c2 = hi0 ^ c3 ^ k1;
        c3 = lo0;
        k0 += kW0;
        k1 += kW1;
    }
    return {c0, c1, c2, c3};
}

// A double in [0, 1) with 53 random bits.
NINFER_HD inline double philox_uniform(uint64_t key, uint64_t counter, uint64_t stream = 0) {
    auto r = philox4x32_10(key, counter, stream);
    uint64_t bits = (uint64_t(r[0]) << 32 | r[1]) >> 11;
    return double(bits) * (1.0 / 9007199254740992.0); // 2^-53
}

} // namespace ninfer

namespace ninfer {

// A standard normal draw for element `index` of a stream keyed by `seed` (Box-Muller on two
// 32-bit uniforms of one Philox block), identical on the host and the device.
NINFER_HD inline float philox_normal(uint64_t seed, uint64_t index) {
    auto r = philox4x32_10(seed, index);
    // (r + 0.5) / 2^32 lies in (0, 1), so the log is finite.
    const float u1 = (float(r[0]) + 0.5f) * 2.3283064365386963e-10f;
    const float u2 = (float(r[1]) + 0.5f) * 2.3283064365386963e-10f;
    return sqrtf(-2.0f * logf(u1)) * cosf(6.283185307179586f * u2);
}

} // namespace ninfer
