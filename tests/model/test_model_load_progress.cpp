// Load progress through the model layer (Qwen35Model::load) and the public API
// (EngineOptions::on_load_progress): on every fixture the reports start at 0, never decrease and
// end exactly at the bytes of the checkpoint's safetensors entries; random weights report nothing.
#include <gtest/gtest.h>

#include <filesystem>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "common/test_util.h"
#include "io/safetensors.h"
#include "model/qwen3_5.h"
#include "ninfer/engine.h"

namespace ninfer::test {
namespace {

namespace fs = std::filesystem;

struct Reports {
    std::vector<std::pair<int64_t, int64_t>> calls; // (bytes_done, bytes_total)
    std::function<void(int64_t, int64_t)> callback() {
        return [this](int64_t done, int64_t total) { calls.emplace_back(done, total); };
    }
};

// Every checkpoint the loader reads: the HF fixtures and the fp8 ones.
std::vector<fs::path> checkpoint_dirs() {
    std::vector<fs::path> dirs;
    const fs::path root(fixtures_dir());
    for (const char* name :
         {"dense_text_sharded", "dense_vlm_mtp", "moe_text_fused", "moe_vlm_per_expert"})
        dirs.push_back(root / name);
    for (const char* name : {"dense_fp8_sharded", "moe_fp8"})
        dirs.push_back((root / ".." / "fixtures_quant" / name).lexically_normal());
    return dirs;
}

int64_t entry_bytes(const fs::path& dir) {
    const io::SafetensorsCheckpoint ckpt = io::SafetensorsCheckpoint::open(dir);
    int64_t total = 0;
    for (const auto& [name, e] : ckpt.entries()) total += e.nbytes;
    return total;
}

void expect_complete(const Reports& r, int64_t total) {
    ASSERT_GE(r.calls.size(), 2u); // the start and the end at least
    EXPECT_EQ(r.calls.front().first, 0);
    for (size_t i = 0; i < r.calls.size(); ++i) {
        EXPECT_EQ(r.calls[i].second, total) << "report " << i;
        if (i > 0) {
            EXPECT_GE(r.calls[i].first, r.calls[i - 1].first) << "report " << i;
        }
    }
    EXPECT_EQ(r.calls.back().first, total);
}

TEST(ModelLoadProgress, EndsAtTheCheckpointsBytes) {
    for (const fs::path& dir : checkpoint_dirs()) {
        for (bool fp8_resident : {false, true}) {
            SCOPED_TRACE(dir.filename().string() + (fp8_resident ? " (fp8 resident)" : ""));
            Reports r;
            model::Qwen35Model::load(dir, ops::ExecContext::cpu(), fp8_resident, r.callback());
            expect_complete(r, entry_bytes(dir));
            EXPECT_GT(r.calls.back().first, 0);
        }
    }
}

TEST(ModelLoadProgress, ThroughTheEngineOptions) {
    const fs::path dir = fs::path(fixtures_dir()) / "moe_vlm_per_expert";
    Reports r;
    EngineOptions o;
    o.model_dir = dir.string();
    o.on_load_progress = r.callback();
    Engine engine(o);
    expect_complete(r, entry_bytes(dir));
}

TEST(ModelLoadProgress, RandomWeightsReportNothing) {
    Reports r;
    EngineOptions o;
    o.random_weights = true;
    o.config_file = (fs::path(fixtures_dir()) / "dense_text_sharded" / "config.json").string();
    o.on_load_progress = r.callback();
    Engine engine(o);
    EXPECT_TRUE(r.calls.empty());
}

} // namespace
} // namespace ninfer::test
