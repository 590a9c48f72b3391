// ninfer chat: interactive multi-turn chat in the terminal. Line editing and history come from
// libedit (BSD); Ctrl-C stops the current answer and returns to the prompt. Commands: /reset
// (forget the conversation), /exit, /help. Without a terminal on stdin, every line is one user
// turn (commands included). A one-line banner and the commands' notes go to stderr, the answers
// to stdout.
#include <algorithm>
#include <atomic>
#include <csignal>
#include <cstdio>
#include <editline/readline.h>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <unistd.h>

#include "cli_media.h"
#include "commands.h"
#include "core/error.h"
#include "default_model.h"
#include "engine_flags.h"
#include "ops/cpu/threads.h"
#include "sampling_flags.h"
#include "text/follow_up.h"
#include "text_generation.h"

namespace ninfer::app {
namespace {

std::atomic<bool> g_interrupted{false};

extern "C" void on_sigint(int) {
    g_interrupted.store(true);
}

struct ChatOptions {
    EngineOptions engine;
    TextOptions text;
    std::string tools_file; // --tools: a JSON array of OpenAI tools, or {"tools": [...]}
    int max_new = 1024;
    SamplingFlags sampling;
    bool warm_next_turn = true; // prefill the next turn's prefix while the user types
};

// One line of input; false at end of input. Ctrl-C at the prompt gives an empty line.
bool read_line(bool tty, std::string& line) {
    if (!tty) return static_cast<bool>(std::getline(std::cin, line));
    g_interrupted.store(false);
    char* raw = readline(">>> ");
    if (!raw) {
        if (!g_interrupted.load()) return false;
        std::fputs("\n", stdout);
        line.clear();
        return true;
    }
    line = raw;
    std::free(raw);
    if (!line.empty()) add_history(line.c_str());
    return true;
}

constexpr const char* kHelp = "commands:\n"
                              "  /reset  forget the conversation (keeps --system)\n"
                              "  /image PATH  attach an image file to your next message\n"
                              "  /video PATH  attach a video file to your next message\n"
                              "  /exit   quit (also /quit, or Ctrl-D)\n"
                              "  /help   this list\n"
                              "Ctrl-C stops an answer; any other line is your message.\n";

// The banner: "ninfer chat: NAME (DIR) on cpu, N threads; /help for commands, /exit to quit"
void print_banner(const ChatOptions& o) {
    namespace fs = std::filesystem;
    fs::path dir = fs::path(o.engine.model_dir).lexically_normal();
    if (dir.filename().empty()) dir = dir.parent_path();
    std::string where = o.engine.device;
    if (o.engine.device == "cpu") {
        const int n = ops::cpu_threads();
        where += ", " + std::to_string(n) + (n == 1 ? " thread" : " threads");
    }
    std::fprintf(stderr, "ninfer chat: %s (%s) on %s; /help for commands, /exit to quit\n",
                 dir.filename().string().c_str(), o.engine.model_dir.c_str(), where.c_str());
}

// The tools the model may call in every turn: an OpenAI "tools" array, bare or in an object.
nlohmann::ordered_json read_tools_file(const std::string& path) {
    std::ifstream in(path);
    if (!in) fail(ErrorCategory::Io, "--tools ", path, ": cannot open");
    const auto j = nlohmann::ordered_json::parse(in, nullptr, false);
    require(!j.is_discarded(), "--tools ", path, ": not valid JSON");
    const auto& tools = j.is_object() && j.contains("tools") ? j["tools"] : j;
    require(tools.is_array(), "--tools ", path,
            ": expected an array of tools or {\"tools\": [...]}");
    for (const auto& t : tools)
        require(t.is_object(), "--tools ", path, ": every tool must be an object");
    return tools;
}

// Drops the oldest turns after the first `base` messages (the system message) until the
// conversation's prompt leaves room for an answer: min(max_new, a quarter of the context) tokens.
// The last message (the new user turn) always stays. Says on stderr what it dropped.
void fit_context(TextModel& model, Conversation& conv, size_t base, const TextOptions& text,
                 int max_new) {
    const int64_t context = model.engine.model_info().max_context;
    const int64_t room = std::min<int64_t>(std::max(max_new, 1), std::max<int64_t>(1, context / 4));
    size_t dropped = 0;
    while (conv.messages.size() > base + 1 &&
           rendered_prompt_tokens(model, conv, text) + room > context) {
        // One turn: the oldest message and whatever follows it up to the next user message.
        size_t end = base + 1;
        while (end < conv.messages.size() - 1 && conv.messages[end].value("role", "") != "user")
            ++end;
        dropped += end - base;
        conv.messages.erase(conv.messages.begin() + long(base), conv.messages.begin() + long(end));
    }
    if (dropped > 0)
        std::fprintf(stderr,
                     "(the conversation outgrew the context of %lld tokens: its %zu oldest "
                     "messages were dropped; /reset clears the rest)\n",
                     (long long)context, dropped);
}

int chat(const ChatOptions& o) {
    require(o.text.prompt.empty() && o.text.messages_file.empty(),
            "chat reads the conversation from the terminal (no --prompt/--messages)");
    TextModel model(o.engine, o.text.chat_template);
    struct sigaction sa {};
    sa.sa_handler = on_sigint; // no SA_RESTART: Ctrl-C interrupts the line editor's read
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, nullptr);
    const bool tty = isatty(STDIN_FILENO);
    Conversation conv;
    if (!o.tools_file.empty()) conv.tools = read_tools_file(o.tools_file);
    if (!o.text.system.empty())
        conv.messages.push_back({{"role", "system"}, {"content", o.text.system}});
    const size_t base = conv.messages.size();
    std::vector<std::string> images, videos; // /image, /video: for the next message
    print_banner(o);
    GenerationRequest request;
    request.max_new_tokens = o.max_new;
    request.sampling = resolve_sampling_flags(o.sampling, o.engine.model_dir);
    for (std::string line; read_line(tty, line);) {
        if (line == "/exit" || line == "/quit") break;
        if (line == "/reset") {
            conv.messages.erase(conv.messages.begin() + long(base), conv.messages.end());
            std::fputs("(conversation cleared)\n", stderr);
            continue;
        }
        if (line.rfind("/image ", 0) == 0 || line.rfind("/video ", 0) == 0) {
            const bool video = line[1] == 'v';
            std::string path = line.substr(7);
            path.erase(0, path.find_first_not_of(" \t"));
            if (path.empty()) {
                std::fprintf(stderr, "usage: /%s PATH\n", video ? "video" : "image");
            } else {
                (video ? videos : images).push_back(path);
                std::fprintf(stderr, "(%s %s attached to your next message)\n",
                             video ? "video" : "image", path.c_str());
            }
            continue;
        }
        if (line == "/help" || line == "/?") {
            std::fputs(kHelp, stderr);
            continue;
        }
        // A lone "/word" is a mistyped command rather than a message.
        if (line.size() > 1 && line[0] == '/' &&
            line.find_first_of(" \t/", 1) == std::string::npos) {
            std::fprintf(stderr, "unknown command %s (/help lists the commands)\n", line.c_str());
            continue;
        }
        if (line.empty()) continue;
        conv.messages.push_back(user_message_with_media(line, images, videos));
        images.clear();
        videos.clear();
        fit_context(model, conv, base, o.text, o.max_new);
        g_interrupted.store(false);
        TurnResult r;
        try {
            r = generate_turn(model, conv, o.text, request, &g_interrupted);
        } catch (const std::exception& e) { // a medium that does not load: the turn is dropped
            conv.messages.erase(conv.messages.end() - 1);
            std::fprintf(stderr, "ninfer: %s\n", e.what());
            continue;
        }
        std::fputs("\n", stdout);
        std::fflush(stdout);
        if (r.reason == FinishReason::Cancelled) std::fputs("(answer stopped)\n", stderr);
        print_generation_stats(r.timings, r.reason);
        conv.messages.push_back(text::assistant_message(r.content, r.reasoning, r.tool_calls));
        const bool answered = r.reason == FinishReason::Stop || r.reason == FinishReason::Length;
        if (answered && o.engine.prefix_cache && o.warm_next_turn)
            warm_next_turn(model, conv, o.text);
    }
    return 0;
}

} // namespace

Action add_chat_command(CLI::App& app) {
    auto o = std::make_shared<ChatOptions>();
    app.add_option("--model", o->engine.model_dir,
                   "Model directory, or ORG/NAME in the Hugging Face cache (default: the demo "
                   "model)");
    app.add_option("--system", o->text.system, "A system message");
    app.add_option("--chat-template", o->text.chat_template,
                   "A Jinja chat template file to use instead of the model's");
    app.add_option("--tools", o->tools_file, "JSON file of OpenAI tools the model may call");
    add_template_var_options(app, o->text.template_vars);
    app.add_option("--stop", o->text.stop, "Stop string (repeatable)");
    app.add_flag("--hide-reasoning", o->text.hide_reasoning, "Do not print the reasoning");
    app.add_flag("!--no-warm-next-turn", o->warm_next_turn,
                 "Do not prefill the next turn (the answer as the history will render it) into "
                 "the prefix cache while you type");
    app.add_option("--max-new", o->max_new, "Most tokens per answer")
        ->check(CLI::NonNegativeNumber);
    add_sampling_options(app, o->sampling, /*all_penalties=*/true);
    // the prefix cache serves each turn the conversation's earlier turns
    add_engine_options(app, o->engine,
                       kDeviceFlags | kContextFlag | kSingleRequestPrefill | kMemoryFlags |
                           kPrefixCacheFlags | kSpeculativeFlags);
    return [o] {
        o->engine.model_dir = model_dir_or_default(o->engine.model_dir);
        // One answer at a time: the graphs of batch 1 are the ones a chat replays.
        if (o->engine.graph_warmup < 0) o->engine.graph_warmup = 1;
        return chat(*o);
    };
}

} // namespace ninfer::app
