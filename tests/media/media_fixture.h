// The media fixtures (tools/reference/make_vision_preprocess_fixture.py): the manifest, the
// reference tensors (PIL's RGB, HF transformers' pixel_values and grids) and helpers to compare.
#pragma once

#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "io/safetensors.h"
#include "media/image.h"
#include "media/preprocess.h"

namespace ninfer::media::test {

inline std::filesystem::path vision_fixtures() { return NINFER_VISION_FIXTURES; }
inline std::filesystem::path preprocess_dir() { return vision_fixtures() / "preprocess"; }

inline std::vector<uint8_t> read_bytes(const std::filesystem::path& path) {
    std::ifstream in(path, std::ios::binary);
    return std::vector<uint8_t>((std::istreambuf_iterator<char>(in)),
                                std::istreambuf_iterator<char>());
}

inline const nlohmann::json& manifest() {
    static const nlohmann::json m = [] {
        std::ifstream in(preprocess_dir() / "manifest.json");
        return nlohmann::json::parse(in);
    }();
    return m;
}

inline const io::SafetensorsCheckpoint& reference() {
    static const io::SafetensorsCheckpoint ref =
        io::SafetensorsCheckpoint::open(preprocess_dir() / "reference.safetensors");
    return ref;
}

inline const io::TensorEntry& tensor(const std::string& name) {
    const io::TensorEntry* e = reference().find(name);
    if (e == nullptr) throw std::runtime_error("reference.safetensors has no " + name);
    return *e;
}

// An RGB8 [H, W, 3] (or one frame of [N, H, W, 3]) reference tensor as an Image.
inline Image reference_image(const std::string& name, int64_t frame = -1) {
    const io::TensorEntry& e = tensor(name);
    const size_t rank = e.shape.size();
    Image img;
    img.height = static_cast<int32_t>(e.shape[rank - 3]);
    img.width = static_cast<int32_t>(e.shape[rank - 2]);
    const size_t n = static_cast<size_t>(img.width) * img.height * 3;
    const auto* p = static_cast<const uint8_t*>(e.data) + (frame < 0 ? 0 : frame * n);
    img.rgb.assign(p, p + n);
    return img;
}

inline std::vector<int64_t> reference_i64(const std::string& name) {
    const io::TensorEntry& e = tensor(name);
    const auto* p = static_cast<const int64_t*>(e.data);
    return std::vector<int64_t>(p, p + e.numel());
}

// Bit-for-bit equality of f32 pixel values with HF's (and of the grid).
inline ::testing::AssertionResult same_pixels(const Pixels& got, const std::string& prefix) {
    const io::TensorEntry& pv = tensor(prefix + ".pixel_values");
    std::vector<int64_t> grid = reference_i64(prefix + ".grid_thw");
    if (grid.size() != 3 || grid[0] != got.grid_thw[0] || grid[1] != got.grid_thw[1] ||
        grid[2] != got.grid_thw[2])
        return ::testing::AssertionFailure()
               << "grid_thw (" << got.grid_thw[0] << ", " << got.grid_thw[1] << ", "
               << got.grid_thw[2] << ") != HF's (" << grid[0] << ", " << grid[1] << ", "
               << grid[2] << ")";
    if (pv.shape.size() != 2 || pv.shape[0] != got.rows || pv.shape[1] != got.cols)
        return ::testing::AssertionFailure() << "shape [" << got.rows << ", " << got.cols
                                             << "] != HF's " << pv.shape_string();
    const auto* want = static_cast<const float*>(pv.data);
    int64_t bad = 0, first = -1;
    double worst = 0;
    for (int64_t i = 0; i < got.rows * got.cols; ++i) {
        if (std::memcmp(&want[i], &got.values[static_cast<size_t>(i)], 4) != 0) {
            if (first < 0) first = i;
            ++bad;
            worst = std::max(worst, std::abs(static_cast<double>(want[i]) - got.values[i]));
        }
    }
    if (bad == 0) return ::testing::AssertionSuccess();
    return ::testing::AssertionFailure()
           << bad << " of " << got.rows * got.cols << " values differ from HF's (max |diff| "
           << worst << "); first at row " << first / got.cols << " col " << first % got.cols
           << ": " << got.values[static_cast<size_t>(first)] << " vs " << want[first];
}

// The case's processor config as HF sees it: the fixture's base JSON updated with its overrides,
// through parse_preprocess_config.
inline VisionPreprocessConfig case_config(const nlohmann::json& overrides, const char* base_key,
                                          ResizeBackend backend) {
    nlohmann::json cfg = manifest()[base_key];
    for (auto it = overrides.begin(); it != overrides.end(); ++it) cfg[it.key()] = it.value();
    VisionPreprocessConfig c = std::string(base_key) == "image_config"
                                   ? parse_preprocess_config(cfg.dump(), "")
                                   : parse_preprocess_config("", cfg.dump());
    c.image.backend = backend;
    c.video.backend = backend;
    return c;
}

} // namespace ninfer::media::test
