#include "text_generation.h"

#include "cli_media.h"

#include <algorithm>
#include <cstdio>
#include <limits>

#include "core/error.h"
#include "text/detokenizer.h"
#include "text/follow_up.h"

namespace ninfer::app {

TextModel::TextModel(const EngineOptions& options, const std::string& chat_template_file)
    : engine(options), tokenizer(text::Tokenizer::from_model_dir(options.model_dir)),
      chat_template(text::ChatTemplate::from_model_dir(options.model_dir, chat_template_file)) {
    if (engine.model_info().vision)
        vision = std::make_shared<const media::VisionPreprocessConfig>(
            media::load_preprocess_config(options.model_dir));
}

void warm_next_turn(TextModel& m, const Conversation& conv, const TextOptions& o) {
    for (const auto& msg : conv.messages)
        if (msg.contains("content") && msg["content"].is_array()) return; // media parts
    try {
        text::ChatOptions copt;
        copt.variables = template_variables(o.template_vars);
        GenerationRequest warm;
        warm.prompt = text::follow_up_prefix(conv.messages, [&](const auto& messages) {
            return m.tokenizer.encode(m.chat_template.render(messages, conv.tools, copt));
        });
        if (warm.prompt.size() < 2 ||
            int64_t(warm.prompt.size()) >= m.engine.model_info().max_context)
            return;
        warm.max_new_tokens = 0;
        warm.prefill_only = true;
        warm.priority = std::numeric_limits<int>::max();
        m.engine.submit(std::move(warm)); // runs while the user types; nobody reads it
    } catch (const std::exception&) {
        // Best effort: a next turn that is not warmed is only slower.
    }
}

int64_t rendered_prompt_tokens(TextModel& m, const Conversation& conv, const TextOptions& o) {
    text::ChatOptions copt;
    copt.variables = template_variables(o.template_vars);
    return int64_t(m.tokenizer.encode(m.chat_template.render(conv.messages, conv.tools, copt))
                       .size());
}

Conversation build_conversation(const TextOptions& o) {
    require(o.prompt.empty() != o.messages_file.empty(),
            "give exactly one of --prompt or --messages");
    Conversation c;
    if (!o.messages_file.empty())
        c = read_messages_file(o.messages_file);
    else
        c.messages.push_back(user_message_with_media(o.prompt, o.images, o.videos));
    require(o.messages_file.empty() || (o.images.empty() && o.videos.empty()),
            "--image and --video go with --prompt (a messages file gives its own media parts)");
    if (!o.system.empty()) {
        require(c.messages.empty() || c.messages[0].value("role", "") != "system",
                "--system: the messages already start with a system message");
        const nlohmann::ordered_json system = {{"role", "system"}, {"content", o.system}};
        c.messages.insert(c.messages.begin(), system); // (an init list would insert 2 items)
    }
    return c;
}

namespace {

void write_out(FILE* f, const std::string& s) {
    if (s.empty()) return;
    std::fwrite(s.data(), 1, s.size(), f);
    std::fflush(f);
}

struct Printer {
    const TextOptions& o;
    bool reasoning_open = false;
    void show(const text::ParsedDelta& d) {
        if (!d.reasoning.empty() && !o.hide_reasoning) {
            if (!reasoning_open) write_out(stderr, "[reasoning] ");
            reasoning_open = true;
            write_out(stderr, d.reasoning);
        }
        if (!d.content.empty()) {
            end_reasoning();
            write_out(stdout, d.content);
        }
    }
    void end_reasoning() {
        if (reasoning_open) write_out(stderr, "\n");
        reasoning_open = false;
    }
};

} // namespace

TurnResult generate_turn(TextModel& m, const Conversation& conv, const TextOptions& o,
                         GenerationRequest request, const std::atomic<bool>* cancel) {
    text::ChatOptions copt;
    copt.variables = template_variables(o.template_vars);
    const std::string prompt = m.chat_template.render(conv.messages, conv.tools, copt);
    request.prompt = m.tokenizer.encode(prompt);
    attach_file_media(conv.messages, m.engine.model_info(), m.vision.get(), m.tokenizer,
                      request.prompt, request);
    text::ParserOptions popt;
    popt.starts_in_reasoning = text::prompt_opens_reasoning(prompt);
    popt.stop = o.stop;
    if (conv.tools.is_array()) popt.tools = conv.tools;
    text::OutputParser parser(popt);
    text::StreamingDetokenizer detok(m.tokenizer, true);
    Printer printer{o};
    TurnResult r;
    std::vector<int32_t> stop_ids = request.stop_token_ids; // never shown as text
    if (!request.ignore_eos)
        stop_ids.insert(stop_ids.end(), m.engine.model_info().eos_token_ids.begin(),
                        m.engine.model_info().eos_token_ids.end());
    RequestStream stream = m.engine.submit(request);
    RequestUpdate u;
    bool stopped = false;
    while (stream.next(u)) {
        for (const auto& t : u.tokens) {
            if (o.print_token_ids) std::fprintf(stderr, "[id %d]", t.id);
            if (std::find(stop_ids.begin(), stop_ids.end(), t.id) != stop_ids.end()) continue;
            if (!stopped) printer.show(parser.push(detok.push(t.id)));
            if (!stopped && parser.stopped()) {
                stopped = true;
                stream.cancel();
            }
        }
        if (!stopped && cancel && cancel->load()) stream.cancel();
        if (u.finished) {
            r.reason = stopped ? FinishReason::Stop : u.reason;
            r.error = u.error;
            r.timings = u.timings;
        }
    }
    if (!stopped) printer.show(parser.push(detok.finish()));
    const bool cut_in_reasoning = r.reason == FinishReason::Length && parser.in_reasoning();
    printer.show(parser.finish());
    printer.end_reasoning();
    if (cut_in_reasoning) // else a thinking model's answer seems to vanish: stdout stays empty
        std::fprintf(stderr,
                     "ninfer: the token limit ended the output inside the reasoning block, "
                     "before any answer (raise --max-new, or pass --no-thinking)\n");
    for (const auto& call : parser.tool_calls())
        write_out(stdout,
                  "\n" +
                      nlohmann::ordered_json{{"tool_call", text::openai_tool_call(call)}}.dump() +
                      "\n");
    r.content = parser.content();
    r.reasoning = parser.reasoning();
    r.tool_calls = parser.tool_calls();
    return r;
}

void print_generation_stats(const RequestTimings& t, FinishReason reason) {
    const double prefill = t.prefill_s > 0 ? t.prompt_tokens / t.prefill_s : 0;
    const double decode =
        t.decode_s > 0 && t.generated_tokens > 1 ? (t.generated_tokens - 1) / t.decode_s : 0;
    std::fprintf(stderr,
                 "ninfer: prompt %d tokens (%d cached), generated %d tokens (%s); prefill %.1f "
                 "tok/s, decode %.1f tok/s, TTFT %.3f s\n",
                 t.prompt_tokens, t.cached_tokens, t.generated_tokens, finish_reason_name(reason),
                 prefill, decode, t.first_token_s);
}

int run_text(const EngineOptions& engine, const TextOptions& o, GenerationRequest request) {
    const Conversation conv = build_conversation(o);
    TextModel model(engine, o.chat_template);
    const TurnResult r = generate_turn(model, conv, o, std::move(request), nullptr);
    write_out(stdout, "\n");
    print_generation_stats(r.timings, r.reason);
    if (r.reason == FinishReason::Error) {
        std::fprintf(stderr, "ninfer: request failed: %s\n", r.error.c_str());
        return 1;
    }
    return 0;
}

} // namespace ninfer::app

#include <CLI/CLI.hpp>

namespace ninfer::app {

void add_text_options(CLI::App& app, TextOptions& o) {
    app.add_option("--prompt", o.prompt, "A user message (rendered with the chat template)");
    app.add_option("--messages", o.messages_file,
                   "JSON file: a messages array, or {\"messages\": [...], \"tools\": [...]}");
    app.add_option("--system", o.system, "A system message");
    app.add_option("--image", o.images, "An image file for the --prompt message (repeatable)");
    app.add_option("--video", o.videos, "A video file for the --prompt message (repeatable)");
    app.add_option("--chat-template", o.chat_template,
                   "A Jinja chat template file to use instead of the model's");
    add_template_var_options(app, o.template_vars);
    app.add_option("--stop", o.stop, "Stop string (repeatable); held back until resolved");
    app.add_flag("--hide-reasoning", o.hide_reasoning, "Do not print the reasoning to stderr");
}

} // namespace ninfer::app
