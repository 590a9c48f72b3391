#include "media/resize.h"

#include <algorithm>
#include <cmath>

#include "core/error.h"

namespace ninfer::media {
namespace detail {
namespace {

// ATen's HelperInterpCubic::aa_filter<double, true> (cubic_convolution1/2 of UpSample.h, a=-0.5).
double torch_cubic(double x) {
    constexpr double a = -0.5;
    x = std::abs(x);
    if (x < 1.0) return ((a + 2) * x - (a + 3)) * x * x + 1;
    if (x < 2.0) return ((a * x - 5 * a) * x + 8 * a) * x - 4 * a;
    return 0.0;
}

// PIL's bicubic_filter (Resample.c).
double pil_cubic(double x) {
    constexpr double a = -0.5;
    if (x < 0.0) x = -x;
    if (x < 1.0) return ((a + 2.0) * x - (a + 3.0)) * x * x + 1;
    if (x < 2.0) return (((x - 5) * x + 8) * x - 4) * a;
    return 0.0;
}

// HelperInterpBase::_compute_index_ranges_weights (antialias) + _compute_index_ranges_int16_weights.
ResampleTaps torch_taps(int64_t in_size, int64_t out_size) {
    const double scale = static_cast<double>(in_size) / out_size;
    const double support = (scale >= 1.0) ? (4 * 0.5) * scale : 4 * 0.5;
    const int64_t max_size = static_cast<int64_t>(std::ceil(support)) * 2 + 1;
    const double invscale = (scale >= 1.0) ? 1.0 / scale : 1.0;
    ResampleTaps t;
    t.stride = max_size;
    t.start.resize(out_size);
    t.count.resize(out_size);
    std::vector<double> w(static_cast<size_t>(out_size * max_size), 0.0);
    double wt_max = 0.0;
    for (int64_t i = 0; i < out_size; ++i) {
        const double center = scale * (i + 0.5);
        double total = 0.0;
        int64_t xmin = std::max(static_cast<int64_t>(center - support + 0.5), int64_t{0});
        int64_t xsize = std::min(static_cast<int64_t>(center + support + 0.5), in_size) - xmin;
        xsize = std::clamp(xsize, int64_t{0}, max_size);
        double* wi = &w[static_cast<size_t>(i * max_size)];
        for (int64_t j = 0; j < xsize; ++j) {
            double v = torch_cubic((j + xmin - center + 0.5) * invscale);
            wi[j] = v;
            total += v;
        }
        if (total != 0.0) {
            for (int64_t j = 0; j < xsize; ++j) {
                wi[j] /= total;
                wt_max = std::max(wt_max, wi[j]);
            }
        }
        t.start[i] = xmin;
        t.count[i] = xsize;
    }
    unsigned int precision = 0;
    for (precision = 0; precision < 22; ++precision) {
        int next = static_cast<int>(0.5 + wt_max * (1 << (precision + 1)));
        if (next >= (1 << 15)) break;
    }
    t.precision = static_cast<int>(precision);
    t.weights.resize(w.size());
    for (size_t k = 0; k < w.size(); ++k) {
        double v = w[k] * (1 << precision);
        // (int) then int16_t, as ATen stores it.
        t.weights[k] = static_cast<int16_t>((v < 0) ? static_cast<int>(-0.5 + v)
                                                    : static_cast<int>(0.5 + v));
    }
    return t;
}

// Resample.c precompute_coeffs + normalize_coeffs_8bpc (PRECISION_BITS = 32 - 8 - 2).
ResampleTaps pil_taps(int64_t in_size, int64_t out_size) {
    constexpr int kPrecisionBits = 32 - 8 - 2;
    double scale = static_cast<double>(static_cast<float>(in_size) - 0.0f) / out_size;
    double filterscale = scale < 1.0 ? 1.0 : scale;
    const double support = 2.0 * filterscale;
    const int64_t ksize = static_cast<int64_t>(std::ceil(support)) * 2 + 1;
    ResampleTaps t;
    t.stride = ksize;
    t.precision = kPrecisionBits;
    t.start.resize(out_size);
    t.count.resize(out_size);
    t.weights.assign(static_cast<size_t>(out_size * ksize), 0);
    std::vector<double> k(static_cast<size_t>(ksize));
    for (int64_t xx = 0; xx < out_size; ++xx) {
        const double center = 0.0 + (xx + 0.5) * scale;
        double ww = 0.0;
        const double ss = 1.0 / filterscale;
        int64_t xmin = static_cast<int>(center - support + 0.5);
        if (xmin < 0) xmin = 0;
        int64_t xmax = static_cast<int>(center + support + 0.5);
        if (xmax > in_size) xmax = in_size;
        xmax -= xmin;
        for (int64_t x = 0; x < xmax; ++x) {
            double v = pil_cubic((x + xmin - center + 0.5) * ss);
            k[static_cast<size_t>(x)] = v;
            ww += v;
        }
        for (int64_t x = 0; x < xmax; ++x)
            if (ww != 0.0) k[static_cast<size_t>(x)] /= ww;
        int32_t* out = &t.weights[static_cast<size_t>(xx * ksize)];
        for (int64_t x = 0; x < xmax; ++x) {
            double p = k[static_cast<size_t>(x)];
            out[x] = p < 0 ? static_cast<int>(-0.5 + p * (1 << kPrecisionBits))
                           : static_cast<int>(0.5 + p * (1 << kPrecisionBits));
        }
        t.start[xx] = xmin;
        t.count[xx] = xmax;
    }
    return t;
}

inline uint8_t finish(int64_t acc, int precision) {
    int64_t v = acc >> precision;
    return static_cast<uint8_t>(v < 0 ? 0 : v > 255 ? 255 : v);
}

// Rows of `height` pixels, `in_w` wide -> `out_w` wide.
void resample_horizontal(const uint8_t* src, int64_t in_w, uint8_t* dst, int64_t out_w,
                         int64_t height, const ResampleTaps& t) {
    const int64_t round = int64_t{1} << (t.precision - 1);
#pragma omp parallel for schedule(static) if (height * out_w > 65536)
    for (int64_t y = 0; y < height; ++y) {
        const uint8_t* row = src + y * in_w * 3;
        uint8_t* out = dst + y * out_w * 3;
        for (int64_t x = 0; x < out_w; ++x) {
            const uint8_t* p = row + t.start[x] * 3;
            const int32_t* w = &t.weights[static_cast<size_t>(x * t.stride)];
            int64_t r = round, g = round, b = round;
            for (int64_t j = 0; j < t.count[x]; ++j) {
                r += p[3 * j] * w[j];
                g += p[3 * j + 1] * w[j];
                b += p[3 * j + 2] * w[j];
            }
            out[3 * x] = finish(r, t.precision);
            out[3 * x + 1] = finish(g, t.precision);
            out[3 * x + 2] = finish(b, t.precision);
        }
    }
}

// Columns: `in_h` rows of `width` pixels -> `out_h` rows.
void resample_vertical(const uint8_t* src, int64_t in_h, uint8_t* dst, int64_t out_h,
                       int64_t width, const ResampleTaps& t) {
    (void)in_h;
    const int64_t round = int64_t{1} << (t.precision - 1);
    const int64_t row_bytes = width * 3;
#pragma omp parallel for schedule(static) if (out_h * width > 65536)
    for (int64_t y = 0; y < out_h; ++y) {
        const int32_t* w = &t.weights[static_cast<size_t>(y * t.stride)];
        const uint8_t* base = src + t.start[y] * row_bytes;
        uint8_t* out = dst + y * row_bytes;
        for (int64_t x = 0; x < row_bytes; ++x) {
            int64_t acc = round;
            for (int64_t j = 0; j < t.count[y]; ++j) acc += base[j * row_bytes + x] * w[j];
            out[x] = finish(acc, t.precision);
        }
    }
}

} // namespace

ResampleTaps bicubic_taps(int64_t in_size, int64_t out_size, ResizeBackend backend) {
    require(in_size > 0 && out_size > 0, "resize: sizes must be positive, got ", in_size, " -> ",
            out_size);
    return backend == ResizeBackend::Torchvision ? torch_taps(in_size, out_size)
                                                 : pil_taps(in_size, out_size);
}

} // namespace detail

Image resize_bicubic(const Image& image, int32_t width, int32_t height, ResizeBackend backend) {
    require(image.width > 0 && image.height > 0 &&
                image.rgb.size() == static_cast<size_t>(image.width) * image.height * 3,
            "resize: invalid source image ", image.width, "x", image.height);
    require(width > 0 && height > 0, "resize: invalid target size ", width, "x", height);
    auto horizontal = [&](const Image& in) {
        auto taps = detail::bicubic_taps(in.width, width, backend);
        Image out{width, in.height, std::vector<uint8_t>(static_cast<size_t>(width) * in.height * 3)};
        detail::resample_horizontal(in.rgb.data(), in.width, out.rgb.data(), width, in.height, taps);
        return out;
    };
    auto vertical = [&](const Image& in) {
        auto taps = detail::bicubic_taps(in.height, height, backend);
        Image out{in.width, height, std::vector<uint8_t>(static_cast<size_t>(in.width) * height * 3)};
        detail::resample_vertical(in.rgb.data(), in.height, out.rgb.data(), height, in.width, taps);
        return out;
    };
    const bool need_h = width != image.width, need_v = height != image.height;
    if (!need_h && !need_v) return image;
    if (!need_h) return vertical(image);
    if (!need_v) return horizontal(image);
    // ATen always resamples the width first. Pillow 13 (ImagingResampleInner) runs the vertical
    // pass first when the height shrinks by more than twice the width's shrink, in pixels.
    const bool vertical_first = backend == ResizeBackend::Pil && height < image.height &&
                                (int64_t{image.width} - width) * 2 < int64_t{image.height} - height;
    return vertical_first ? horizontal(vertical(image)) : vertical(horizontal(image));
}

} // namespace ninfer::media
