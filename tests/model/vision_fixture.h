// The committed multimodal HF fixtures (tests/fixtures_vision, tools/reference/
// make_vision_fixture.py): pixel values, HF's tower outputs and greedy multimodal cases.
#pragma once

#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "io/safetensors.h"
#include "model/fixture_util.h"
#include "model/vision.h"

namespace ninfer::test {

struct VisionMedium {
    model::MediaGrid grid;
    std::shared_ptr<const std::vector<float>> pixels; // [patches, patch values] f32
    std::vector<double> tower;                         // HF's merged embeddings, row-major
};

struct VisionCaseMedium {
    std::string name;
    bool video = false;
    std::vector<int32_t> offsets;
};

struct VisionCase {
    std::string name;
    std::vector<int32_t> prompt;
    std::vector<VisionCaseMedium> media;
    std::vector<ReferenceStep> steps;
};

struct VisionFixture {
    std::string name, dir;
    std::map<std::string, VisionMedium> media;
    std::vector<VisionCase> cases;
};

inline std::filesystem::path vision_fixtures_dir() {
    return std::filesystem::path(fixtures_dir()).parent_path() / "fixtures_vision";
}

inline VisionFixture load_vision_fixture(const std::string& name) {
    VisionFixture f;
    f.name = name;
    f.dir = (vision_fixtures_dir() / name).string();
    std::ifstream in(std::filesystem::path(f.dir) / "reference.json");
    const nlohmann::json j = nlohmann::json::parse(in);
    const auto px = io::SafetensorsCheckpoint::open(std::filesystem::path(f.dir) /
                                                    "pixels.safetensors");
    for (const auto& [key, grid] : j["media"].items()) {
        VisionMedium m;
        m.grid = {grid[0].get<int64_t>(), grid[1].get<int64_t>(), grid[2].get<int64_t>()};
        const io::TensorEntry* e = px.find(key);
        const float* data = static_cast<const float*>(e->data);
        m.pixels = std::make_shared<const std::vector<float>>(data, data + e->numel());
        m.tower = j["tower"][key].get<std::vector<double>>();
        f.media.emplace(key, std::move(m));
    }
    for (const auto& c : j["cases"]) {
        VisionCase vc;
        vc.name = c["name"].get<std::string>();
        vc.prompt = c["prompt"].get<std::vector<int32_t>>();
        for (const auto& m : c["media"])
            vc.media.push_back({m["name"].get<std::string>(), m["video"].get<bool>(),
                                m["offsets"].get<std::vector<int32_t>>()});
        for (const auto& s : c["steps"]) vc.steps.push_back(parse_step(s));
        f.cases.push_back(std::move(vc));
    }
    return f;
}

inline std::vector<std::string> vision_fixture_names() { return {"dense_vision", "moe_vision"}; }

// The case as a greedy request with its media.
inline GenerationRequest vision_request(const VisionFixture& f, const VisionCase& c) {
    GenerationRequest r = greedy_request(c.prompt, int(c.steps.size()));
    for (const VisionCaseMedium& cm : c.media) {
        const VisionMedium& m = f.media.at(cm.name);
        MediaInput in;
        in.pixels = m.pixels;
        in.grid_t = int32_t(m.grid.t);
        in.grid_h = int32_t(m.grid.h);
        in.grid_w = int32_t(m.grid.w);
        in.video = cm.video;
        in.offsets = cm.offsets;
        r.media.push_back(std::move(in));
    }
    return r;
}

} // namespace ninfer::test
