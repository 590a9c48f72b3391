// io/safetensors.h: files, sharded and plain directories, and malformed-checkpoint errors.
#include <cstring>
#include <set>

#include "io/safetensors.h"
#include "unit_test_util.h"

namespace ninfer::test {
namespace {

using io::SafetensorsCheckpoint;
using io::TensorEntry;

struct Expected {
    StTensor tensor;
    DType dtype;
    std::vector<double> values;
};

std::vector<Expected> every_dtype() {
    std::vector<Expected> out;
    auto floats = [](std::vector<float> v) { return std::vector<double>(v.begin(), v.end()); };
    std::vector<float> f32 = {0.5f, -1.0f, 2.25f, 3.0f, -4.5f, 5.75f};
    out.push_back({{"a.f32", "F32", {2, 3}, raw_bytes(f32)}, DType::F32, floats(f32)});
    std::vector<float> bf = {1.0f, -2.0f, 0.5f, 384.0f};
    std::vector<uint16_t> bf_bits;
    for (float f : bf) bf_bits.push_back(float_to_bf16(f));
    out.push_back({{"b.bf16", "BF16", {4}, raw_bytes(bf_bits)}, DType::BF16, floats(bf)});
    std::vector<float> hf = {0.25f, -65504.0f, 1.0f / 1024, 7.0f};
    std::vector<uint16_t> hf_bits;
    for (float f : hf) hf_bits.push_back(float_to_f16(f));
    out.push_back({{"c.f16", "F16", {2, 2}, raw_bytes(hf_bits)}, DType::F16, floats(hf)});
    std::vector<int32_t> i32 = {1, -2, 2147483647};
    out.push_back({{"d.i32", "I32", {3}, raw_bytes(i32)}, DType::I32, {1, -2, 2147483647}});
    std::vector<int64_t> i64 = {int64_t(1) << 40, -7};
    out.push_back(
        {{"e.i64", "I64", {2}, raw_bytes(i64)}, DType::I64, {double(int64_t(1) << 40), -7}});
    std::vector<uint8_t> u8 = {0, 1, 2, 254, 255};
    out.push_back({{"f.u8", "U8", {5}, raw_bytes(u8)}, DType::U8, {0, 1, 2, 254, 255}});
    std::vector<float> scalar = {42.0f};
    out.push_back({{"g.scalar", "F32", {}, raw_bytes(scalar)}, DType::F32, {42.0}});
    std::vector<float> four = {1, 2, 3, 4, 5, 6};
    out.push_back({{"h.4d", "F32", {1, 2, 1, 3}, raw_bytes(four)}, DType::F32, floats(four)});
    out.push_back({{"i.empty", "F32", {0, 4}, ""}, DType::F32, {}});
    return out;
}

std::vector<StTensor> tensors_of(const std::vector<Expected>& expected) {
    std::vector<StTensor> out;
    for (const Expected& e : expected) out.push_back(e.tensor);
    return out;
}

StTensor f32_tensor(const std::string& name, std::vector<float> values) {
    return {name, "F32", {int64_t(values.size())}, raw_bytes(values)};
}

// An image with one raw header entry for tensor 'a' over `data_bytes` zero bytes.
std::string one_entry(const json& entry, size_t data_bytes = 8) {
    return safetensors_raw(json{{"a", entry}}.dump(), std::string(data_bytes, '\0'));
}

void parse(const std::string& image) {
    io::parse_safetensors(reinterpret_cast<const uint8_t*>(image.data()), int64_t(image.size()),
                          "mem.safetensors");
}

void write_index(const fs::path& dir, const json& weight_map) {
    write_file(dir / "model.safetensors.index.json",
               json{{"metadata", {{"total_size", 0}}}, {"weight_map", weight_map}}.dump());
}

TEST(Safetensors, ParsesEveryDtypeAndShape) {
    TempDir dir;
    const auto expected = every_dtype();
    const fs::path file = dir / "all.safetensors";
    write_file(file, safetensors_image(tensors_of(expected), json{{"format", "pt"}}));
    SafetensorsCheckpoint ckpt = SafetensorsCheckpoint::open(file);
    EXPECT_EQ(ckpt.entries().size(), expected.size()); // __metadata__ is not a tensor
    EXPECT_EQ(ckpt.find("__metadata__"), nullptr);
    EXPECT_EQ(ckpt.files(), std::vector<std::string>{"all.safetensors"});
    for (const Expected& x : expected) {
        SCOPED_TRACE(x.tensor.name);
        const TensorEntry* e = ckpt.find(x.tensor.name);
        ASSERT_NE(e, nullptr);
        EXPECT_EQ(e->name, x.tensor.name);
        EXPECT_EQ(e->dtype_name, x.tensor.dtype);
        EXPECT_TRUE(e->dtype_known);
        EXPECT_EQ(e->dtype, x.dtype);
        EXPECT_EQ(e->shape, x.tensor.shape);
        EXPECT_EQ(e->nbytes, int64_t(x.tensor.bytes.size()));
        EXPECT_EQ(e->numel(), int64_t(x.values.size()));
        EXPECT_EQ(e->file, file.string());
        EXPECT_EQ(std::memcmp(e->data, x.tensor.bytes.data(), x.tensor.bytes.size()), 0);
        TensorView v = e->view();
        EXPECT_EQ(v.ndim, int(x.tensor.shape.size()));
        EXPECT_EQ(dims_of(v), x.tensor.shape);
        EXPECT_EQ(v.dtype, x.dtype);
        EXPECT_TRUE(v.device.is_cpu());
        EXPECT_EQ(v.data, e->data);
        if (!x.values.empty()) {
            EXPECT_EQ(to_doubles(v), x.values);
        }
    }
    EXPECT_EQ(ckpt.find("g.scalar")->shape_string(), "[]");
    EXPECT_EQ(ckpt.find("h.4d")->shape_string(), "[1, 2, 1, 3]");
    EXPECT_EQ(ckpt.find("nope"), nullptr);
}

TEST(Safetensors, ParsesImageInMemoryAndIgnoresMetadata) {
    const auto expected = every_dtype();
    const std::string image =
        safetensors_image(tensors_of(expected), json{{"format", "pt"}, {"note", "x"}});
    auto entries = io::parse_safetensors(reinterpret_cast<const uint8_t*>(image.data()),
                                         int64_t(image.size()), "mem");
    ASSERT_EQ(entries.size(), expected.size());
    std::set<std::string> names;
    for (const TensorEntry& e : entries) {
        names.insert(e.name);
        EXPECT_EQ(e.file, "mem");
        EXPECT_GE(static_cast<const char*>(e.data), image.data() + 8);
        EXPECT_LE(static_cast<const char*>(e.data) + e.nbytes, image.data() + image.size());
    }
    EXPECT_EQ(names.count("__metadata__"), 0u);
    EXPECT_EQ(names.size(), expected.size());
}

TEST(Safetensors, DataOutOfHeaderOrderAndPadding) {
    // Offsets need not follow header order; unused bytes between tensors are allowed.
    std::vector<float> a = {1, 2}, b = {3, 4, 5};
    json header = {{"a", {{"dtype", "F32"}, {"shape", {2}}, {"data_offsets", {16, 24}}}},
                   {"b", {{"dtype", "F32"}, {"shape", {3}}, {"data_offsets", {0, 12}}}}};
    std::string data = raw_bytes(b) + std::string(4, '\x7f') + raw_bytes(a);
    std::string image = safetensors_raw(header.dump(), data);
    auto entries = io::parse_safetensors(reinterpret_cast<const uint8_t*>(image.data()),
                                         int64_t(image.size()), "mem");
    ASSERT_EQ(entries.size(), 2u);
    for (const TensorEntry& e : entries) {
        const std::vector<float>& want = e.name == "a" ? a : b;
        EXPECT_EQ(std::memcmp(e.data, want.data(), want.size() * 4), 0) << e.name;
    }
}

TEST(Safetensors, UnknownDtypeIsListedButCannotBeViewed) {
    TempDir dir;
    std::vector<StTensor> tensors = {{"q", "F8_E5M2", {2, 2}, std::string(4, '\x01')},
                                     f32_tensor("w", {1, 2})};
    write_file(dir / "m.safetensors", safetensors_image(tensors));
    SafetensorsCheckpoint ckpt = SafetensorsCheckpoint::open(dir / "m.safetensors");
    const TensorEntry* q = ckpt.find("q");
    ASSERT_NE(q, nullptr);
    EXPECT_FALSE(q->dtype_known);
    EXPECT_EQ(q->dtype_name, "F8_E5M2");
    EXPECT_EQ(q->shape, (std::vector<int64_t>{2, 2}));
    EXPECT_EQ(q->nbytes, 4);
    EXPECT_TRUE(raises([&] { q->view(); }, {"'q'", "F8_E5M2"}));
    EXPECT_NO_THROW(ckpt.find("w")->view());
}

TEST(Safetensors, RankFiveIsListedButCannotBeViewed) {
    std::vector<StTensor> tensors = {{"patch", "BF16", {2, 1, 1, 1, 2}, std::string(8, '\0')}};
    std::string image = safetensors_image(tensors);
    auto entries = io::parse_safetensors(reinterpret_cast<const uint8_t*>(image.data()),
                                         int64_t(image.size()), "mem");
    ASSERT_EQ(entries.size(), 1u);
    EXPECT_EQ(entries[0].numel(), 4);
    EXPECT_TRUE(raises([&] { entries[0].view(); }, {"'patch'"}));
}

TEST(Safetensors, MappingOutlivesCheckpointThroughKeepalive) {
    TempDir dir;
    std::vector<float> values = {1.5f, -2.5f, 3.5f};
    write_file(dir / "m.safetensors", safetensors_image({f32_tensor("w", values)}));
    std::shared_ptr<const void> keep;
    const void* data = nullptr;
    {
        SafetensorsCheckpoint ckpt = SafetensorsCheckpoint::open(dir / "m.safetensors");
        keep = ckpt.keepalive();
        data = ckpt.find("w")->data;
    }
    fs::remove(dir / "m.safetensors"); // the mapping stays valid after unlink too
    EXPECT_EQ(std::memcmp(data, values.data(), 12), 0);
}

// ---- malformed files --------------------------------------------------------------------------

TEST(SafetensorsErrors, TooSmall) {
    EXPECT_TRUE(raises([] { parse("abc"); }, {"mem.safetensors", "too small"}, ErrorCategory::Io));
    TempDir dir;
    write_file(dir / "empty.safetensors", "");
    EXPECT_TRUE(raises([&] { SafetensorsCheckpoint::open(dir / "empty.safetensors"); },
                       {"empty.safetensors"}, ErrorCategory::Io));
}

TEST(SafetensorsErrors, TruncatedDataNamesTensorAndFile) {
    TempDir dir;
    std::string image = safetensors_image({f32_tensor("a", {1, 2}), f32_tensor("b", {3, 4, 5})});
    write_file(dir / "cut.safetensors", image.substr(0, image.size() - 4));
    EXPECT_TRUE(raises([&] { SafetensorsCheckpoint::open(dir / "cut.safetensors"); },
                       {"cut.safetensors", "'b'", "data_offsets"}, ErrorCategory::Io));
}

TEST(SafetensorsErrors, TruncatedHeader) {
    TempDir dir;
    std::string image = safetensors_image({f32_tensor("a", {1, 2})});
    write_file(dir / "cut.safetensors", image.substr(0, 20));
    EXPECT_TRUE(raises([&] { SafetensorsCheckpoint::open(dir / "cut.safetensors"); },
                       {"cut.safetensors", "header length"}, ErrorCategory::Io));
}

TEST(SafetensorsErrors, HeaderLengthBeyondFileSize) {
    std::string image = safetensors_raw("{}", "");
    image[1] = 0x10; // header length 4096 + 2
    EXPECT_TRUE(raises([&] { parse(image); }, {"mem.safetensors", "header length"}));
    std::string huge = image;
    for (int i = 0; i < 8; ++i) huge[size_t(i)] = '\xff'; // 2^64 - 1
    EXPECT_TRUE(raises([&] { parse(huge); }, {"mem.safetensors", "header length"}));
}

TEST(SafetensorsErrors, HeaderNotJsonObject) {
    for (const char* header : {"{\"a\": ", "not json", "[1, 2]", "\"text\"", "7"}) {
        EXPECT_TRUE(raises([&] { parse(safetensors_raw(header, "")); },
                           {"mem.safetensors", "not a JSON object"}, ErrorCategory::Io))
            << header;
    }
}

TEST(SafetensorsErrors, MalformedEntriesNameTheTensor) {
    const std::vector<json> entries = {
        json(5),
        json{{"dtype", "F32"}, {"shape", {2}}},
        json{{"shape", {2}}, {"data_offsets", {0, 8}}},
        json{{"dtype", 3}, {"shape", {2}}, {"data_offsets", {0, 8}}},
        json{{"dtype", "F32"}, {"shape", 2}, {"data_offsets", {0, 8}}},
        json{{"dtype", "F32"}, {"shape", {-2}}, {"data_offsets", {0, 8}}},
        json{{"dtype", "F32"}, {"shape", {2.5}}, {"data_offsets", {0, 8}}},
        json{{"dtype", "F32"}, {"shape", {2}}, {"data_offsets", {0}}},
        json{{"dtype", "F32"}, {"shape", {2}}, {"data_offsets", {-8, 0}}},
        json{{"dtype", "F32"}, {"shape", {2}}, {"data_offsets", {0, "8"}}},
    };
    for (const json& entry : entries)
        EXPECT_TRUE(raises([&] { parse(one_entry(entry)); }, {"mem.safetensors", "'a'"}))
            << entry.dump();
}

TEST(SafetensorsErrors, DataOffsetsOutsideTheData) {
    json past_end = {{"dtype", "F32"}, {"shape", {4}}, {"data_offsets", {0, 16}}};
    EXPECT_TRUE(raises([&] { parse(one_entry(past_end, 8)); }, {"'a'", "outside"}));
    json reversed = {{"dtype", "F32"}, {"shape", {1}}, {"data_offsets", {8, 4}}};
    EXPECT_TRUE(raises([&] { parse(one_entry(reversed, 8)); }, {"'a'", "data_offsets"}));
    json far = {{"dtype", "U8"}, {"shape", {1}}, {"data_offsets", {uint64_t(1) << 63, 0}}};
    EXPECT_TRUE(raises([&] { parse(one_entry(far, 8)); }, {"'a'"}));
}

TEST(SafetensorsErrors, ByteCountMustMatchDtypeAndShape) {
    json f32 = {{"dtype", "F32"}, {"shape", {3}}, {"data_offsets", {0, 8}}};
    EXPECT_TRUE(raises([&] { parse(one_entry(f32, 8)); }, {"'a'", "8 bytes"}));
    json bf16 = {{"dtype", "BF16"}, {"shape", {2, 2}}, {"data_offsets", {0, 6}}};
    EXPECT_TRUE(raises([&] { parse(one_entry(bf16, 8)); }, {"'a'", "BF16"}));
    json scalar = {{"dtype", "I64"}, {"shape", json::array()}, {"data_offsets", {0, 4}}};
    EXPECT_TRUE(raises([&] { parse(one_entry(scalar, 8)); }, {"'a'"}));
}

TEST(SafetensorsErrors, ShapeOverflowNamesTheTensor) {
    json overflow = {{"dtype", "F32"},
                     {"shape", {uint64_t(1) << 32, uint64_t(1) << 32, 4}},
                     {"data_offsets", {0, 8}}};
    EXPECT_TRUE(raises([&] { parse(one_entry(overflow)); }, {"mem.safetensors", "'a'"}));
    json huge_dim = {
        {"dtype", "U8"}, {"shape", {~uint64_t(0)}}, {"data_offsets", {0, 8}}}; // 2^64 - 1
    EXPECT_TRUE(raises([&] { parse(one_entry(huge_dim)); }, {"mem.safetensors", "'a'"}));
    json byte_overflow = {
        {"dtype", "I64"}, {"shape", {uint64_t(1) << 61}}, {"data_offsets", {0, 8}}};
    EXPECT_TRUE(raises([&] { parse(one_entry(byte_overflow)); }, {"mem.safetensors", "'a'"}));
}

// ---- directories ------------------------------------------------------------------------------

TEST(SafetensorsDirs, ShardedThroughIndex) {
    TempDir dir;
    write_safetensors(dir / "s1.safetensors", {f32_tensor("w", {1, 2}), f32_tensor("x", {3})});
    write_safetensors(dir / "s2.safetensors", {f32_tensor("y", {4, 5, 6})});
    write_safetensors(dir / "stray.safetensors", {f32_tensor("z", {7})}); // not in the index
    write_index(dir.path(),
                {{"w", "s1.safetensors"}, {"x", "s1.safetensors"}, {"y", "s2.safetensors"}});
    SafetensorsCheckpoint ckpt = SafetensorsCheckpoint::open(dir.path());
    EXPECT_EQ(ckpt.entries().size(), 3u);
    EXPECT_EQ(ckpt.find("z"), nullptr);
    EXPECT_EQ(ckpt.files(), (std::vector<std::string>{"s1.safetensors", "s2.safetensors"}));
    EXPECT_EQ(fs::path(ckpt.find("w")->file).filename(), "s1.safetensors");
    EXPECT_EQ(fs::path(ckpt.find("y")->file).filename(), "s2.safetensors");
    EXPECT_EQ(to_doubles(ckpt.find("y")->view()), (std::vector<double>{4, 5, 6}));
}

TEST(SafetensorsDirs, CommittedShardedFixtureMatchesItsIndex) {
    const fs::path dir = fixture_path("dense_text_sharded");
    SafetensorsCheckpoint ckpt = SafetensorsCheckpoint::open(dir);
    json index = json::parse(read_file(dir / "model.safetensors.index.json"));
    const json& map = index["weight_map"];
    EXPECT_EQ(ckpt.entries().size(), map.size());
    EXPECT_EQ(ckpt.files().size(), 19u);
    int64_t total = 0;
    for (auto it = map.begin(); it != map.end(); ++it) {
        const TensorEntry* e = ckpt.find(it.key());
        ASSERT_NE(e, nullptr) << it.key();
        EXPECT_EQ(fs::path(e->file).filename(), it.value().get<std::string>()) << it.key();
        EXPECT_EQ(e->dtype, DType::F16);
        total += e->nbytes;
    }
    EXPECT_EQ(total, index["metadata"]["total_size"].get<int64_t>());
}

TEST(SafetensorsDirs, PlainDirectoryReadsEverySafetensorsFileInOrder) {
    TempDir dir;
    write_safetensors(dir / "b.safetensors", {f32_tensor("y", {2})});
    write_safetensors(dir / "a.safetensors", {f32_tensor("x", {1})});
    write_file(dir / "config.json", "{}");
    write_file(dir / "notes.txt", "not a checkpoint");
    SafetensorsCheckpoint ckpt = SafetensorsCheckpoint::open(dir.path());
    EXPECT_EQ(ckpt.files(), (std::vector<std::string>{"a.safetensors", "b.safetensors"}));
    EXPECT_EQ(ckpt.entries().size(), 2u);
    EXPECT_NE(ckpt.find("x"), nullptr);
    EXPECT_NE(ckpt.find("y"), nullptr);
}

TEST(SafetensorsDirs, ModelSafetensorsIsPreferredWithoutIndex) {
    TempDir dir;
    write_safetensors(dir / "model.safetensors", {f32_tensor("w", {1})});
    write_safetensors(dir / "extra.safetensors", {f32_tensor("z", {2})});
    SafetensorsCheckpoint ckpt = SafetensorsCheckpoint::open(dir.path());
    EXPECT_EQ(ckpt.files(), std::vector<std::string>{"model.safetensors"});
    EXPECT_EQ(ckpt.entries().size(), 1u);
}

TEST(SafetensorsDirs, MissingPathAndEmptyDirectory) {
    TempDir dir;
    EXPECT_TRUE(raises([&] { SafetensorsCheckpoint::open(dir / "absent"); },
                       {"absent", "does not exist"}, ErrorCategory::Io));
    write_file(dir / "config.json", "{}");
    EXPECT_TRUE(raises([&] { SafetensorsCheckpoint::open(dir.path()); },
                       {dir.path().string(), ".safetensors"}, ErrorCategory::Io));
}

TEST(SafetensorsDirs, DuplicateTensorAcrossShards) {
    TempDir dir;
    write_safetensors(dir / "a.safetensors", {f32_tensor("w", {1}), f32_tensor("x", {2})});
    write_safetensors(dir / "b.safetensors", {f32_tensor("w", {3})});
    EXPECT_TRUE(raises([&] { SafetensorsCheckpoint::open(dir.path()); },
                       {"'w'", "a.safetensors", "b.safetensors"}, ErrorCategory::Io));
    write_index(dir.path(), {{"w", "a.safetensors"}, {"x", "b.safetensors"}});
    EXPECT_TRUE(raises([&] { SafetensorsCheckpoint::open(dir.path()); },
                       {"'w'", "a.safetensors", "b.safetensors"}, ErrorCategory::Io));
}

TEST(SafetensorsDirs, IndexNamingAMissingShard) {
    TempDir dir;
    write_safetensors(dir / "a.safetensors", {f32_tensor("w", {1})});
    write_index(dir.path(), {{"w", "a.safetensors"}, {"x", "gone.safetensors"}});
    EXPECT_TRUE(raises([&] { SafetensorsCheckpoint::open(dir.path()); }, {"gone.safetensors"},
                       ErrorCategory::Io));
}

TEST(SafetensorsDirs, IndexNamingATensorNotInItsShard) {
    TempDir dir;
    write_safetensors(dir / "a.safetensors", {f32_tensor("w", {1})});
    write_safetensors(dir / "b.safetensors", {f32_tensor("x", {2})});
    write_index(dir.path(), {{"w", "b.safetensors"}, {"x", "b.safetensors"}});
    EXPECT_TRUE(raises([&] { SafetensorsCheckpoint::open(dir.path()); },
                       {"'w'", "b.safetensors", "model.safetensors.index.json"},
                       ErrorCategory::Io));
    // Both shards are read, but each tensor sits in the other one.
    write_index(dir.path(), {{"w", "b.safetensors"}, {"x", "a.safetensors"}});
    EXPECT_TRUE(raises([&] { SafetensorsCheckpoint::open(dir.path()); }, {"'w'", "b.safetensors"},
                       ErrorCategory::Io));
    write_index(dir.path(),
                {{"w", "a.safetensors"}, {"x", "b.safetensors"}, {"ghost", "a.safetensors"}});
    EXPECT_TRUE(raises([&] { SafetensorsCheckpoint::open(dir.path()); },
                       {"'ghost'", "a.safetensors"}, ErrorCategory::Io));
}

TEST(SafetensorsDirs, ShardNamesMustBePlainFiles) {
    TempDir dir;
    fs::create_directories(dir / "sub");
    write_safetensors(dir / "sub" / "a.safetensors", {f32_tensor("w", {1})});
    const fs::path outside = dir.path().parent_path() / "x.safetensors";
    const std::vector<std::string> shards = {"sub/a.safetensors", "../x.safetensors", "..",
                                             outside.string()};
    for (const std::string& shard : shards) {
        write_index(dir.path(), {{"w", shard}});
        EXPECT_TRUE(raises([&] { SafetensorsCheckpoint::open(dir.path()); },
                           {shard, "model.safetensors.index.json"}, ErrorCategory::Io))
            << shard;
    }
}

TEST(SafetensorsDirs, MalformedIndex) {
    TempDir dir;
    write_safetensors(dir / "a.safetensors", {f32_tensor("w", {1})});
    for (const char* text : {"not json", "{\"metadata\": {}}", "{\"weight_map\": [1]}",
                             "{\"weight_map\": {\"w\": 3}}"}) {
        write_file(dir / "model.safetensors.index.json", text);
        EXPECT_TRUE(raises([&] { SafetensorsCheckpoint::open(dir.path()); },
                           {"model.safetensors.index.json"}, ErrorCategory::Io))
            << text;
    }
}

} // namespace
} // namespace ninfer::test
