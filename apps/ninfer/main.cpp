// ninfer: one binary, many subcommands (run, info; chat, serve, bench arrive with their issues).
#include <cstdio>
#include <cstdlib>
#include <map>
#include <string>
#include <vector>

#include "commands.h"
#include "load_progress.h"
#include "ninfer/error.h"

#include <unistd.h>

namespace {

// Passive OpenMP waits unless the user chose (OMP_WAIT_POLICY or GOMP_SPINCOUNT): an idle worker
// sleeps instead of spinning for up to 300k iterations after every parallel region, so it does
// not take the core from the server's HTTP threads, the tokenizer or other processes (tests and
// benchmarks run side by side on few cores). libgomp reads the variable once, in a constructor
// that runs before main, and has no call to change it later: so the process sets it and executes
// itself again (same pid and arguments; about a millisecond). If that fails it runs as it is.
void ensure_passive_omp_wait(char** argv) {
    if (std::getenv("OMP_WAIT_POLICY") || std::getenv("GOMP_SPINCOUNT")) return;
    if (setenv("OMP_WAIT_POLICY", "PASSIVE", 1) != 0) return;
    execv("/proc/self/exe", argv);
}

} // namespace

int main(int argc, char** argv) {
    ensure_passive_omp_wait(argv);
    CLI::App app{"ninfer: inference engine for Qwen3.5 / Qwen3.6 / Qwen3.8 hybrid models"};
    app.require_subcommand(1);
    app.set_version_flag("--version", "ninfer 0.1.0");
    std::map<CLI::App*, ninfer::app::Action> actions;
    CLI::App* run = app.add_subcommand("run", "Generate tokens from a prompt");
    actions[run] = ninfer::app::add_run_command(*run);
    CLI::App* info = app.add_subcommand("info", "Show a model's config, parameters and memory");
    actions[info] = ninfer::app::add_info_command(*info);
    CLI::App* tokenize = app.add_subcommand("tokenize", "Text on stdin to token ids, or back");
    actions[tokenize] = ninfer::app::add_tokenize_command(*tokenize);
    CLI::App* render = app.add_subcommand("render", "Print the prompt a chat template makes");
    actions[render] = ninfer::app::add_render_command(*render);
    CLI::App* chat = app.add_subcommand("chat", "Interactive multi-turn chat");
    actions[chat] = ninfer::app::add_chat_command(*chat);
    CLI::App* bench = app.add_subcommand("bench", "Measure prefill and decode speed");
    actions[bench] = ninfer::app::add_bench_command(*bench);
    CLI::App* ppl = app.add_subcommand("perplexity", "Perplexity of a text file");
    actions[ppl] = ninfer::app::add_perplexity_command(*ppl);
    CLI::App* serve = app.add_subcommand("serve", "OpenAI- and Anthropic-compatible HTTP server");
    actions[serve] = ninfer::app::add_serve_command(*serve);
    CLI::App* convert = app.add_subcommand("convert", "Quantize a checkpoint (--to fp8, w8 or q4)");
    actions[convert] = ninfer::app::add_convert_command(*convert);
    CLI::App* tune =
        app.add_subcommand("tune", "Measure this GPU's kernel route table (or --show the one in force)");
    actions[tune] = ninfer::app::add_tune_command(*tune);
    // llama-bench spells the prefill+decode test "-pg"; CLI11 short options are one letter.
    std::vector<std::string> args(argv, argv + argc);
    for (auto& a : args)
        if (a == "-pg") a = "--pg";
    std::vector<char*> argp;
    for (auto& a : args) argp.push_back(a.data());
    CLI11_PARSE(app, int(argp.size()), argp.data());
    try {
        for (auto& [sub, action] : actions)
            if (sub->parsed()) return action();
    } catch (const ninfer::Error& e) {
        ninfer::app::end_load_progress_line(); // a load that failed mid-way (out of memory)
        std::fprintf(stderr, "ninfer: error (%s): %s\n", ninfer::error_category_name(e.category()),
                     e.what());
        return 1;
    } catch (const std::exception& e) {
        ninfer::app::end_load_progress_line();
        std::fprintf(stderr, "ninfer: error: %s\n", e.what());
        return 1;
    }
    return 0;
}
