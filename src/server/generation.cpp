#include "server/generation.h"

#include <algorithm>

#include "text/detokenizer.h"

namespace ninfer::server {

struct Generation::Choice {
    Choice(const text::Tokenizer& tok, const text::ParserOptions& popt, bool raw_text)
        : detok(tok, true), parser(popt), raw(raw_text), stops(popt.stop) {}
    // Text through the output parser, or (raw) through the stop matcher only.
    text::ParsedDelta push(const std::string& s) {
        if (!raw) return parser.push(s);
        text::ParsedDelta d;
        d.content = stops.push(s);
        raw_content += d.content;
        return d;
    }
    text::ParsedDelta finish() {
        if (!raw) return parser.finish();
        text::ParsedDelta d;
        d.content = stops.finish();
        raw_content += d.content;
        return d;
    }
    bool stopped() const { return raw ? stops.stopped() : parser.stopped(); }
    int index = 0;
    RequestStream stream;
    text::StreamingDetokenizer detok;
    text::OutputParser parser;
    bool raw;
    text::StopMatcher stops;
    std::string raw_content;
    ChoiceResult result;
    bool text_stopped = false; // a stop string matched
    bool done = false;         // the engine finished and the last event was returned
    bool has_last = false;
    std::chrono::steady_clock::time_point last;
};

void append_delta(text::ParsedDelta& into, text::ParsedDelta more) {
    into.reasoning += more.reasoning;
    into.content += more.content;
    for (auto& c : more.tool_calls) into.tool_calls.push_back(std::move(c));
}

Generation::Generation(Engine& engine, const text::Tokenizer& tokenizer, GenerationSpec spec,
                       std::function<void(int, double)> on_tokens)
    : spec_(std::move(spec)), tokenizer_(&tokenizer), on_tokens_(std::move(on_tokens)),
      start_(std::chrono::steady_clock::now()) {
    stop_ids_ = spec_.base.stop_token_ids;
    if (!spec_.base.ignore_eos)
        for (int32_t id : engine.model_info().eos_token_ids) stop_ids_.push_back(id);
    // Every choice of every prompt is queued at once (submit_all validates them all first and
    // queues none on an error), so the engine admits them in the same step.
    std::vector<GenerationRequest> requests;
    for (const auto& prompt : spec_.prompts) {
        for (int i = 0; i < spec_.n; ++i) {
            GenerationRequest r = spec_.base;
            r.prompt = prompt;
            if (r.sampling.seed) r.sampling.seed = *r.sampling.seed + uint64_t(i);
            if (spec_.constraint) r.constraint = spec_.constraint();
            requests.push_back(std::move(r));
        }
    }
    std::vector<RequestStream> streams = engine.submit_all(std::move(requests));
    for (size_t index = 0; index < streams.size(); ++index) {
        auto c = std::make_unique<Choice>(tokenizer, spec_.parser, spec_.raw_text);
        c->index = int(index);
        c->stream = std::move(streams[index]);
        choices_.push_back(std::move(c));
    }
}

Generation::~Generation() {
    for (auto& c : choices_)
        if (!c->done) c->stream.cancel();
}

void Generation::cancel() {
    cancelled_ = true;
    for (auto& c : choices_)
        if (!c->done) c->stream.cancel();
}

bool Generation::finished() const {
    return std::all_of(choices_.begin(), choices_.end(), [](const auto& c) { return c->done; });
}

bool Generation::drain(Choice& c, RequestStream::Wait w, RequestUpdate& u,
                       std::vector<ChoiceEvent>& events) {
    if (w == RequestStream::Wait::Timeout) return false;
    ChoiceEvent ev;
    ev.index = c.index;
    ChoiceResult& r = c.result;
    if (w == RequestStream::Wait::Update && !u.tokens.empty()) {
        const auto now = std::chrono::steady_clock::now();
        if (ttft_s_ < 0) ttft_s_ = std::chrono::duration<double>(now - start_).count();
        if (on_tokens_)
            on_tokens_(int(u.tokens.size()),
                       c.has_last ? std::chrono::duration<double>(now - c.last).count() : -1.0);
        c.has_last = true;
        c.last = now;
    }
    for (const auto& t : u.tokens) {
        if (c.text_stopped) break;
        ++r.completion_tokens;
        if (std::find(stop_ids_.begin(), stop_ids_.end(), t.id) != stop_ids_.end()) continue;
        if (spec_.logprobs) {
            ev.tokens.push_back(t);
            r.tokens.push_back(t);
        }
        const bool reasoning = !c.raw && c.parser.in_reasoning();
        // an id beyond the tokenizer (random weights with a smaller tokenizer): U+FFFD
        const bool known = t.id < tokenizer_->vocab_size();
        append_delta(ev.delta,
                     c.push(known ? c.detok.push(t.id) : c.detok.finish() + "\xEF\xBF\xBD"));
        if (reasoning) ++r.reasoning_tokens;
        if (c.stopped()) {
            c.text_stopped = true;
            c.stream.cancel();
        }
    }
    const bool finished = w == RequestStream::Wait::Done || u.finished;
    if (finished) {
        if (!c.text_stopped) append_delta(ev.delta, c.push(c.detok.finish()));
        append_delta(ev.delta, c.finish());
        if (u.finished) r.timings = u.timings;
        switch (c.text_stopped ? FinishReason::None : u.reason) {
        case FinishReason::None:
            r.finish = c.text_stopped ? Finish::StopString : Finish::Stop;
            break;
        case FinishReason::Stop:
            r.finish = Finish::Stop;
            break;
        case FinishReason::Length:
            r.finish = Finish::Length;
            break;
        case FinishReason::Cancelled:
            r.finish = Finish::Cancelled;
            break;
        case FinishReason::Error:
            r.finish = Finish::Error;
            r.error = u.error.empty() ? "generation failed" : u.error;
            break;
        }
        if (cancelled_) r.finish = Finish::Cancelled;
        if (c.text_stopped) r.stop_string = c.raw ? c.stops.matched() : c.parser.stop_string();
        r.content = c.raw ? c.raw_content : c.parser.content();
        r.reasoning = c.parser.reasoning();
        r.tool_calls = c.parser.tool_calls();
        ev.finish = r.finish;
        ev.stop_string = r.stop_string;
        ev.error = r.error;
        c.done = true;
    }
    if (!ev.delta.empty() || !ev.tokens.empty() || ev.finish != Finish::None)
        events.push_back(std::move(ev));
    return true;
}

bool Generation::poll(std::chrono::milliseconds wait, std::vector<ChoiceEvent>& events) {
    bool progressed = false;
    for (auto& c : choices_) {
        if (c->done) continue;
        // Several updates may be queued; a finished stream is read until Done.
        RequestUpdate u;
        while (!c->done) {
            u = RequestUpdate{};
            const auto w = c->stream.next_for(u, std::chrono::milliseconds(0));
            if (!drain(*c, w, u, events)) break;
            progressed = true;
        }
    }
    if (!progressed) {
        for (auto& c : choices_) {
            if (c->done) continue;
            RequestUpdate u;
            drain(*c, c->stream.next_for(u, wait), u, events);
            break;
        }
    }
    return !finished();
}

const ChoiceResult& Generation::result(int index) const {
    return choices_.at(size_t(index))->result;
}

int Generation::prompt_tokens() const {
    int n = 0;
    for (const auto& p : spec_.prompts) n += int(p.size());
    return n;
}

SpeculativeStats Generation::speculative() const {
    SpeculativeStats total;
    for (const auto& c : choices_) total.merge(c->result.timings.speculative);
    return total;
}

int Generation::cached_tokens() const {
    int total = 0;
    for (size_t p = 0; p < spec_.prompts.size(); ++p) {
        int least = 0;
        for (int i = 0; i < spec_.n; ++i) {
            const int cached =
                choices_[p * size_t(spec_.n) + size_t(i)]->result.timings.cached_tokens;
            least = i == 0 ? cached : std::min(least, cached);
        }
        total += least;
    }
    return total;
}

int Generation::completion_tokens() const {
    int n = 0;
    for (const auto& c : choices_) n += c->result.completion_tokens;
    return n;
}

int Generation::reasoning_tokens() const {
    int n = 0;
    for (const auto& c : choices_) n += c->result.reasoning_tokens;
    return n;
}

double Generation::ttft_s() const {
    return ttft_s_;
}

} // namespace ninfer::server
