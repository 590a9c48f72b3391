#include "server/constraints.h"

#include <algorithm>
#include <string_view>

#include "core/error.h"
#include "text/json_constraint.h"

namespace ninfer::server {
namespace {

constexpr std::string_view kThinkEnd = "</think>";

class PlanConstraint final : public TokenConstraint {
public:
    PlanConstraint(const text::Tokenizer& tok, ConstraintPlan plan)
        : tok_(&tok), plan_(std::move(plan)) {
        forced_after_reasoning_ =
            !plan_.literals.empty() || plan_.tail != nullptr || plan_.tool_tail != nullptr;
        if (plan_.starts_in_reasoning && plan_.reasoning_budget != 0) {
            phase_ = Phase::Reasoning;
        } else if (plan_.starts_in_reasoning) {
            start_literals(std::string("\n") + std::string(kThinkEnd) + "\n\n");
        } else {
            start_literals("");
        }
    }

    void allowed(std::vector<uint8_t>& mask) override {
        switch (phase_) {
        case Phase::Reasoning:
            std::fill(mask.begin(), mask.end(), uint8_t(1));
            if (forced_after_reasoning_)
                for (int32_t id : plan_.stop_ids)
                    if (id >= 0 && size_t(id) < mask.size()) mask[size_t(id)] = 0;
            return;
        case Phase::Literal:
            literal_mask(mask);
            if (complete()) { // a longer literal goes on, or the tail starts here
                std::vector<uint8_t> tail(mask.size(), 0);
                tail_allowed(tail);
                for (size_t i = 0; i < mask.size(); ++i) mask[i] |= tail[i];
            }
            return;
        case Phase::Tail:
            tail_allowed(mask);
            return;
        }
    }

    void accept(int32_t id) override {
        ++used_;
        switch (phase_) {
        case Phase::Reasoning: {
            ++reasoning_tokens_;
            recent_ += bytes(id);
            if (recent_.size() > 64) recent_.erase(0, recent_.size() - 64);
            if (recent_.find(kThinkEnd) != std::string::npos) {
                // After the model's own close the Qwen format puts "\n\n" before the answer.
                start_literals(forced_after_reasoning_ ? "\n\n" : "");
            } else if (plan_.reasoning_budget >= 0 && reasoning_tokens_ >= plan_.reasoning_budget) {
                start_literals(std::string("\n") + std::string(kThinkEnd) + "\n\n");
            }
            return;
        }
        case Phase::Literal:
            // A token that spells no literal byte (a stop id has none) came from the tail's
            // mask, after a whole literal.
            if (bytes(id).empty() || !extends_a_literal(done_ + bytes(id))) {
                start_tail();
                if (plan_.tail) plan_.tail->accept(id);
                return;
            }
            done_ += bytes(id);
            if (complete() && !extends_a_literal(done_, /*strictly=*/true)) start_tail();
            return;
        case Phase::Tail:
            if (plan_.tail) plan_.tail->accept(id);
            return;
        }
    }

private:
    enum class Phase { Reasoning, Literal, Tail };

    const std::string& bytes(int32_t id) const {
        static const std::string empty;
        return id >= 0 && id < tok_->vocab_size() ? tok_->token_bytes(id) : empty;
    }

    void start_literals(const std::string& prefix) {
        literals_.clear();
        done_.clear();
        if (plan_.tool_tail) { // the tool call constraint forces the prefix itself
            plan_.tail = plan_.tool_tail(prefix, plan_.max_tokens - reasoning_tokens_);
            phase_ = Phase::Tail;
            return;
        }
        if (plan_.literals.empty()) {
            if (!prefix.empty()) literals_.push_back(prefix);
        } else {
            for (const auto& l : plan_.literals) literals_.push_back(prefix + l);
        }
        if (literals_.empty())
            start_tail();
        else
            phase_ = Phase::Literal;
    }

    // The tail learns the tokens left of max_tokens (a JSON value then closes in time).
    void start_tail() {
        phase_ = Phase::Tail;
        if (auto* b = dynamic_cast<text::BoundedConstraint*>(plan_.tail.get()))
            if (plan_.max_tokens > 0) b->set_tokens_left(std::max(1, plan_.max_tokens - used_));
    }

    void tail_allowed(std::vector<uint8_t>& mask) {
        if (plan_.tail)
            plan_.tail->allowed(mask);
        else
            std::fill(mask.begin(), mask.end(), uint8_t(1));
    }

    // Whether the literal phase's bytes so far are a whole literal.
    bool complete() const {
        return std::find(literals_.begin(), literals_.end(), done_) != literals_.end();
    }

    // Whether `bytes` begins some literal (strictly: a longer one).
    bool extends_a_literal(const std::string& bytes, bool strictly = false) const {
        for (const auto& lit : literals_)
            if (lit.size() >= bytes.size() + (strictly ? 1 : 0) &&
                std::string_view(lit).substr(0, bytes.size()) == bytes)
                return true;
        return false;
    }

    // Tokens whose bytes keep the output a prefix of some literal.
    void literal_mask(std::vector<uint8_t>& mask) const {
        const size_t n = std::min(mask.size(), size_t(tok_->vocab_size()));
        for (size_t id = 0; id < n; ++id) {
            const std::string& b = tok_->token_bytes(int32_t(id));
            if (b.empty()) continue;
            for (const auto& lit : literals_) {
                if (lit.size() >= done_.size() + b.size() &&
                    std::string_view(lit).substr(done_.size(), b.size()) == b &&
                    std::string_view(lit).substr(0, done_.size()) == done_) {
                    mask[id] = 1;
                    break;
                }
            }
        }
    }

    const text::Tokenizer* tok_;
    ConstraintPlan plan_;
    bool forced_after_reasoning_ = false;
    Phase phase_ = Phase::Tail;
    int reasoning_tokens_ = 0;
    int used_ = 0;                      // tokens accepted
    std::string recent_;                // last bytes of the reasoning (finds "</think>")
    std::vector<std::string> literals_; // candidates of the literal phase
    std::string done_;                  // bytes of the literal phase so far
};

} // namespace

std::shared_ptr<TokenConstraint> make_plan_constraint(const text::Tokenizer& tokenizer,
                                                      ConstraintPlan plan) {
    return std::make_shared<PlanConstraint>(tokenizer, std::move(plan));
}

} // namespace ninfer::server
