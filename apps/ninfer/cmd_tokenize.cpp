// ninfer tokenize: text -> token ids (JSON array) and back, with a model's tokenizer.
#include <chrono>
#include <cstdio>
#include <iostream>
#include <iterator>
#include <nlohmann/json.hpp>
#include <string>

#include "commands.h"
#include "core/error.h"
#include "engine_flags.h"
#include "text/tokenizer.h"

namespace ninfer::app {
namespace {

struct TokenizeOptions {
    std::string model_dir;
    std::string tokenizer_file;
    bool detokenize = false;
    bool jsonl = false;
    bool skip_special = false;
    bool no_special = false;
    int bench_repeat = 0;
};

text::Tokenizer load(const TokenizeOptions& o) {
    require(o.model_dir.empty() != o.tokenizer_file.empty(),
            "give exactly one of --model or --tokenizer");
    return o.model_dir.empty() ? text::Tokenizer::from_file(o.tokenizer_file)
                               : text::Tokenizer::from_model_dir(o.model_dir);
}

std::vector<int32_t> parse_id_array(const nlohmann::json& j) {
    require(j.is_array(), "--detokenize: expected a JSON array of token ids");
    std::vector<int32_t> ids;
    for (const auto& x : j) {
        require(x.is_number_integer(), "--detokenize: '", x.dump(), "' is not a token id");
        ids.push_back(x.get<int32_t>());
    }
    return ids;
}

// Encodes every line (a JSON string) `repeat` times; prints bytes, seconds and MB/s as JSON.
int bench(const text::Tokenizer& tok, const TokenizeOptions& o) {
    std::vector<std::string> items;
    size_t bytes = 0;
    for (std::string line; std::getline(std::cin, line);) {
        items.push_back(nlohmann::json::parse(line).get<std::string>());
        bytes += items.back().size();
    }
    size_t tokens = 0;
    const auto t0 = std::chrono::steady_clock::now();
    for (int r = 0; r < o.bench_repeat; ++r)
        for (const auto& s : items) tokens += tok.encode(s, !o.no_special).size();
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    const double total = double(bytes) * o.bench_repeat;
    std::cout << nlohmann::json{{"bytes", total},
                                {"tokens", tokens},
                                {"seconds", s},
                                {"mb_per_s", total / 1e6 / s}}
                     .dump()
              << std::endl;
    return 0;
}

int tokenize(const TokenizeOptions& o) {
    const text::Tokenizer tok = load(o);
    if (o.bench_repeat > 0) return bench(tok, o);
    if (o.jsonl) {
        for (std::string line; std::getline(std::cin, line);) {
            const auto j = nlohmann::json::parse(line);
            if (o.detokenize)
                std::cout << nlohmann::json(tok.decode(parse_id_array(j), o.skip_special))
                                 .dump(-1, ' ', false, nlohmann::json::error_handler_t::strict)
                          << '\n';
            else
                std::cout << nlohmann::json(tok.encode(j.get<std::string>(), !o.no_special)).dump()
                          << '\n';
        }
        return 0;
    }
    const std::string input((std::istreambuf_iterator<char>(std::cin)), {});
    if (!o.detokenize) {
        std::cout << nlohmann::json(tok.encode(input, !o.no_special)).dump() << std::endl;
        return 0;
    }
    const auto j = nlohmann::json::parse(input, nullptr, /*allow_exceptions=*/false);
    require(!j.is_discarded(),
            "--detokenize: stdin is not JSON (expected an array of token ids, e.g. [5974, 309])");
    std::cout << tok.decode(parse_id_array(j), o.skip_special);
    return 0;
}

} // namespace

Action add_tokenize_command(CLI::App& app) {
    auto o = std::make_shared<TokenizeOptions>();
    app.add_option("--model", o->model_dir,
                   "Model directory with tokenizer.json, or ORG/NAME in the Hugging Face cache")
        ->transform(hub_model_path());
    app.add_option("--tokenizer", o->tokenizer_file, "A tokenizer.json file");
    app.add_flag("--detokenize", o->detokenize, "Read a JSON id array, print its text");
    app.add_flag("--jsonl", o->jsonl,
                 "One JSON item per line (a string to encode, or an id array to decode)");
    app.add_flag("--skip-special", o->skip_special, "Leave special tokens out of decoded text");
    app.add_flag("--no-special", o->no_special, "Encode special-token strings as plain text");
    app.add_option("--bench", o->bench_repeat,
                   "Encode the JSONL strings on stdin N times; print MB/s as JSON");
    return [o] { return tokenize(*o); };
}

} // namespace ninfer::app
