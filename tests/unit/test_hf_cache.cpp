// --model ORG/NAME: the Hugging Face hub cache's layout (apps/ninfer/hf_cache.h), on a cache
// built here the way huggingface_hub writes one (refs/main, snapshots/<hash>/ of symlinks into
// blobs/).
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include "core/error.h"
#include "hf_cache.h"

namespace ninfer::app {
namespace {
namespace fs = std::filesystem;

class HfCache : public ::testing::Test {
protected:
    void SetUp() override {
        root = fs::temp_directory_path() /
               ("ninfer_hf_cache_" + std::to_string(::testing::UnitTest::GetInstance()->random_seed()) +
                "_" + ::testing::UnitTest::GetInstance()->current_test_info()->name());
        fs::remove_all(root);
        fs::create_directories(root);
    }
    void TearDown() override { fs::remove_all(root); }

    // A downloaded model: blobs/<id> with snapshots/<hash>/config.json linking to it, and
    // refs/main naming the hash when `ref` is set.
    fs::path add_snapshot(const std::string& folder, const std::string& hash, bool ref) {
        const fs::path repo = root / folder;
        fs::create_directories(repo / "blobs");
        fs::create_directories(repo / "snapshots" / hash);
        std::ofstream(repo / "blobs" / ("blob" + hash)) << "{}";
        fs::create_symlink(repo / "blobs" / ("blob" + hash), repo / "snapshots" / hash / "config.json");
        if (ref) {
            fs::create_directories(repo / "refs");
            std::ofstream(repo / "refs" / "main") << hash;
        }
        return repo / "snapshots" / hash;
    }

    fs::path root;
};

TEST(HfCacheIds, RepoIdsAndPaths) {
    EXPECT_TRUE(looks_like_repo_id("Qwen/Qwen3.6-35B-A3B-FP8"));
    EXPECT_TRUE(looks_like_repo_id("meta-llama/x_y.z"));
    for (const char* not_id : {"models/", "/abs/path", "./x/y", "../x", "a/b/c", "x", "a/..",
                               "../..", "a b/c", "~/m", ""})
        EXPECT_FALSE(looks_like_repo_id(not_id)) << not_id;
}

TEST_F(HfCache, RefsMainPicksTheSnapshot) {
    add_snapshot("models--Qwen--Qwen3.6-27B", "aaa111", false);
    const fs::path want = add_snapshot("models--Qwen--Qwen3.6-27B", "bbb222", true);
    const auto got = find_cached_snapshot(root, "Qwen/Qwen3.6-27B");
    ASSERT_TRUE(got);
    EXPECT_EQ(*got, want);
    EXPECT_TRUE(fs::is_regular_file(*got / "config.json")); // through the blob symlink
    EXPECT_EQ(repo_id_of_snapshot(*got), "Qwen/Qwen3.6-27B");
    EXPECT_EQ(repo_id_of_snapshot(got->string() + "/"), "Qwen/Qwen3.6-27B");
}

TEST_F(HfCache, HyphenatedOrganisationsKeepTheirNames) {
    const fs::path want = add_snapshot("models--my-org--my--model", "c0ffee", true);
    // "my-org/my--model" is not a hub id ("--" separates the parts); "my-org/my" is another one.
    EXPECT_FALSE(find_cached_snapshot(root, "my-org/my"));
    add_snapshot("models--z-lab--Qwen3.6-35B-A3B-DFlash", "d1", true);
    const auto got = find_cached_snapshot(root, "z-lab/Qwen3.6-35B-A3B-DFlash");
    ASSERT_TRUE(got);
    EXPECT_EQ(repo_id_of_snapshot(*got), "z-lab/Qwen3.6-35B-A3B-DFlash");
    EXPECT_EQ(repo_id_of_snapshot(want).value_or(""), "my-org/my--model");
}

TEST_F(HfCache, OneSnapshotWithoutRefsAndTheErrors) {
    EXPECT_FALSE(find_cached_snapshot(root, "Qwen/missing"));
    const fs::path only = add_snapshot("models--Qwen--Solo", "123", false);
    EXPECT_EQ(find_cached_snapshot(root, "Qwen/Solo").value_or(""), only);
    add_snapshot("models--Qwen--Two", "1", false);
    add_snapshot("models--Qwen--Two", "2", false);
    try {
        find_cached_snapshot(root, "Qwen/Two");
        FAIL() << "two snapshots and no refs/main must be an error";
    } catch (const Error& e) {
        EXPECT_NE(std::string(e.what()).find("2 snapshots"), std::string::npos) << e.what();
    }
    fs::create_directories(root / "models--Qwen--Broken" / "refs");
    fs::create_directories(root / "models--Qwen--Broken" / "snapshots");
    std::ofstream(root / "models--Qwen--Broken" / "refs" / "main") << "deadbeef\n";
    try {
        find_cached_snapshot(root, "Qwen/Broken");
        FAIL() << "refs/main naming a missing snapshot must be an error";
    } catch (const Error& e) {
        EXPECT_NE(std::string(e.what()).find("deadbeef"), std::string::npos) << e.what();
    }
    EXPECT_FALSE(repo_id_of_snapshot(root / "plain" / "dir"));
}

TEST(HfCacheDir, EnvironmentOrderAsHuggingfaceHub) {
    const char* vars[] = {"HF_HUB_CACHE", "HUGGINGFACE_HUB_CACHE", "HF_HOME", "XDG_CACHE_HOME",
                          "HOME"};
    std::string saved[5];
    bool had[5];
    for (int i = 0; i < 5; ++i) {
        const char* v = std::getenv(vars[i]);
        had[i] = v != nullptr;
        saved[i] = v ? v : "";
        unsetenv(vars[i]);
    }
    setenv("HOME", "/home/u", 1);
    EXPECT_EQ(hf_hub_cache_dir(), fs::path("/home/u/.cache/huggingface/hub"));
    setenv("XDG_CACHE_HOME", "/xdg", 1);
    EXPECT_EQ(hf_hub_cache_dir(), fs::path("/xdg/huggingface/hub"));
    setenv("HF_HOME", "/hf", 1);
    EXPECT_EQ(hf_hub_cache_dir(), fs::path("/hf/hub"));
    setenv("HUGGINGFACE_HUB_CACHE", "/legacy", 1);
    EXPECT_EQ(hf_hub_cache_dir(), fs::path("/legacy"));
    setenv("HF_HUB_CACHE", "", 1); // set but empty: unset
    EXPECT_EQ(hf_hub_cache_dir(), fs::path("/legacy"));
    setenv("HF_HUB_CACHE", "/hub", 1);
    EXPECT_EQ(hf_hub_cache_dir(), fs::path("/hub"));
    for (int i = 0; i < 5; ++i) {
        if (had[i]) setenv(vars[i], saved[i].c_str(), 1);
        else unsetenv(vars[i]);
    }
}

} // namespace
} // namespace ninfer::app
