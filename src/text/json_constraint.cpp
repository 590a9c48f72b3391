#include "text/json_constraint.h"

#include <algorithm>
#include <optional>
#include <string>

#include "core/error.h"
#include "text/json_matcher.h"
#include "text/token_trie.h"

namespace ninfer::text {
namespace {

constexpr int kCloseMargin = 24;

class JsonConstraint final : public BoundedConstraint {
public:
    JsonConstraint(std::shared_ptr<const json::Grammar> grammar,
                   std::shared_ptr<const TokenTrie> trie, std::vector<int32_t> end_ids)
        : matcher_(std::move(grammar)), trie_(std::move(trie)), end_ids_(std::move(end_ids)) {}

    void set_tokens_left(int tokens) override {
        left_ = tokens;
        bounded_ = tokens > 0;
        if (bounded_) {
            const auto close = json::greedy_completion(matcher_);
            if (!close || int(close->size()) + 1 > left_) bounded_ = false; // cannot fit
        }
    }

    void allowed(std::vector<uint8_t>& mask) override {
        std::optional<std::string> close;
        if (bounded_ && !ended_) close = json::greedy_completion(matcher_);
        if (close && int(close->size()) + 1 + kCloseMargin >= left_) {
            // closing: only tokens along the greedy completion
            const Tokenizer& tok = trie_->tokenizer;
            for (int32_t id : trie_->order) {
                const std::string& b = tok.token_bytes(id);
                if (size_t(id) < mask.size() && b.size() <= close->size() &&
                    close->compare(0, b.size(), b) == 0)
                    mask[size_t(id)] = 1;
            }
        } else if (!ended_) {
            matcher_.fill_mask(*trie_, mask.data(), mask.size());
        }
        if (ended_ || matcher_.can_end()) {
            for (int32_t id : end_ids_)
                if (size_t(id) < mask.size()) mask[size_t(id)] = 1;
        } else {
            for (int32_t id : end_ids_) // an end id that is also an ordinary token
                if (size_t(id) < mask.size()) mask[size_t(id)] = 0;
        }
    }

    void accept(int32_t id) override {
        --left_;
        const bool end = std::find(end_ids_.begin(), end_ids_.end(), id) != end_ids_.end();
        if (ended_ || end) {
            require(end, "JSON constraint: token ", id, " after the end of the JSON value");
            require(ended_ || matcher_.can_end(), "JSON constraint: end token ", id,
                    " before the JSON value is complete");
            ended_ = true;
            return;
        }
        const Tokenizer& tok = trie_->tokenizer;
        require(id >= 0 && id < tok.vocab_size() && !tok.is_added(id), "JSON constraint: token ",
                id, " is not text");
        require(matcher_.advance(tok.token_bytes(id)), "JSON constraint: token ", id,
                " does not continue the JSON value");
    }

private:
    json::Matcher matcher_;
    std::shared_ptr<const TokenTrie> trie_;
    std::vector<int32_t> end_ids_;
    bool ended_ = false;
    int left_ = 0;
    bool bounded_ = false;
};

} // namespace

std::shared_ptr<TokenConstraint> make_json_constraint(const nlohmann::json& schema,
                                                      const Tokenizer& tok,
                                                      std::vector<int32_t> end_ids,
                                                      const JsonConstraintOptions& options) {
    require(!end_ids.empty(), "JSON constraint: no end ids (the ids allowed after the value)");
    for (int32_t id : end_ids) require(id >= 0, "JSON constraint: end id ", id, " is negative");
    auto grammar = json::Grammar::compile(schema, options);
    return std::make_shared<JsonConstraint>(std::move(grammar), TokenTrie::get(tok),
                                            std::move(end_ids));
}

std::shared_ptr<TokenConstraint> make_json_constraint(const nlohmann::ordered_json& schema,
                                                      const Tokenizer& tok,
                                                      std::vector<int32_t> end_ids,
                                                      const JsonConstraintOptions& options) {
    nlohmann::json plain;
    try {
        plain = nlohmann::json::parse(schema.dump());
    } catch (const nlohmann::json::exception& e) {
        fail_invalid("JSON schema: ", e.what());
    }
    return make_json_constraint(plain, tok, std::move(end_ids), options);
}

void warm_json_constraint(const Tokenizer& tok) {
    TokenTrie::get(tok);
}

} // namespace ninfer::text
