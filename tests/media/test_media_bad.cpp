// The bad-input corpus (tests/fixtures_vision/bad/, expected.json): every input is refused with a
// ninfer::Error whose message says what is wrong, quickly (the bombs from their headers).
#include <chrono>

#include "media/image.h"
#include "media/media_fixture.h"
#include "ninfer/error.h"

namespace ninfer::media::test {
namespace {

std::vector<std::pair<std::string, std::string>> corpus() {
    std::ifstream in(vision_fixtures() / "bad" / "expected.json");
    nlohmann::json j = nlohmann::json::parse(in);
    std::vector<std::pair<std::string, std::string>> out;
    for (auto it = j.begin(); it != j.end(); ++it) out.emplace_back(it.key(), it.value());
    return out;
}

class BadImage : public ::testing::TestWithParam<std::pair<std::string, std::string>> {};

TEST_P(BadImage, IsAClearError) {
    const auto& [file, expected] = GetParam();
    std::vector<uint8_t> bytes = read_bytes(vision_fixtures() / "bad" / file);
    auto start = std::chrono::steady_clock::now();
    try {
        Image img = decode_image(bytes);
        FAIL() << file << " decoded to " << img.width << "x" << img.height;
    } catch (const Error& e) {
        const std::string msg = e.what();
        EXPECT_EQ(msg.rfind("image: ", 0), 0u) << msg;
        EXPECT_NE(msg.find(expected), std::string::npos) << file << ": '" << msg << "'";
    }
    double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start)
                    .count();
    EXPECT_LT(ms, 250.0) << file;
}

INSTANTIATE_TEST_SUITE_P(Corpus, BadImage, ::testing::ValuesIn(corpus()), [](const auto& p) {
    std::string s;
    for (char ch : p.param.first) s += std::isalnum(static_cast<unsigned char>(ch)) ? ch : '_';
    return s;
});

// Every prefix of a good file is refused or decoded, never a crash (run under ASan once).
TEST(MediaBad, EveryTruncationIsHandled) {
    for (const char* f : {"rgb_200x90.jpg", "progressive_83x59.jpg", "rgb_37x53.png",
                          "interlaced_41x29.png", "lossy_60x40.webp", "lossless_60x40.webp"}) {
        std::vector<uint8_t> bytes = read_bytes(preprocess_dir() / f);
        for (size_t n = 0; n < bytes.size(); n += std::max<size_t>(1, bytes.size() / 97)) {
            std::vector<uint8_t> part(bytes.begin(), bytes.begin() + static_cast<std::ptrdiff_t>(n));
            try {
                decode_image(part);
            } catch (const Error&) {
            }
        }
    }
}

// Flipped bytes all over good files: refused or decoded, never a crash.
TEST(MediaBad, CorruptBytesAreHandled) {
    uint64_t state = 0x9E3779B97F4A7C15ull;
    auto next = [&] {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        return state;
    };
    for (const char* f : {"rgb_200x90.jpg", "progressive_83x59.jpg", "cmyk_48x32.jpg",
                          "palette_40x25.png", "grey16_30x20.png", "lossy_alpha_50x50.webp",
                          "lossless_60x40.webp"}) {
        std::vector<uint8_t> good = read_bytes(preprocess_dir() / f);
        for (int trial = 0; trial < 60; ++trial) {
            std::vector<uint8_t> bad = good;
            for (int k = 0; k < 1 + trial % 8; ++k)
                bad[next() % bad.size()] ^= static_cast<uint8_t>(1 + next() % 255);
            try {
                Image img = decode_image(bad);
                EXPECT_EQ(img.rgb.size(), size_t(img.width) * img.height * 3);
            } catch (const Error&) {
            }
        }
    }
}

TEST(MediaBad, MissingFileIsAnIoError) {
    try {
        read_image_file(vision_fixtures() / "bad" / "no_such_file.png");
        FAIL();
    } catch (const Error& e) {
        EXPECT_EQ(e.category(), ErrorCategory::Io);
    }
}

} // namespace
} // namespace ninfer::media::test
