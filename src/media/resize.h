// Antialiased bicubic resizing of RGB8 images, bit for bit as the two HF backends do it:
//
// - Torchvision: torchvision.transforms.v2.functional.resize(uint8 tensor, BICUBIC,
//   antialias=True), i.e. ATen's separable uint8 "AA" kernel (UpSampleKernel.cpp and its AVX2
//   twin, which agree bit for bit): Keys cubic with a = -0.5, weights computed in double,
//   normalised, then rounded to int16 with a per-axis precision (the largest that keeps
//   2 * max weight below 2^15); horizontal pass first, rounded and saturated to uint8, then the
//   vertical pass. An axis whose size does not change is not resampled.
// - Pil: PIL's Image.resize(BICUBIC) as Pillow 13.0 does it (libImaging/Resample.c): the same
//   filter evaluated in a different order, weights rounded to 22-bit int32; the width first too,
//   except when the height shrinks by more than twice as many pixels as the width does (then the
//   height first: Pillow 13's pass order, which Pillow 12 and older do not have).
#pragma once

#include <cstdint>
#include <vector>

#include "media/image.h"

namespace ninfer::media {

enum class ResizeBackend { Torchvision, Pil };

Image resize_bicubic(const Image& image, int32_t width, int32_t height, ResizeBackend backend);

namespace detail {

// The taps of one axis: output i reads input [start[i], start[i] + count[i]) with the integer
// weights weights[i * stride ...], summed from 2^(precision-1) and shifted right by precision.
struct ResampleTaps {
    std::vector<int64_t> start, count;
    std::vector<int32_t> weights;
    int64_t stride = 0;
    int precision = 0;
};
ResampleTaps bicubic_taps(int64_t in_size, int64_t out_size, ResizeBackend backend);

} // namespace detail
} // namespace ninfer::media
