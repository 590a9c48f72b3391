// Subcommands of the ninfer binary. Each registers its options on the CLI11 app and returns
// the action to run when the subcommand is chosen.
#pragma once

#include <functional>

#include <CLI/CLI.hpp>

namespace ninfer::app {

using Action = std::function<int()>;

Action add_run_command(CLI::App& app);
Action add_info_command(CLI::App& app);
Action add_tokenize_command(CLI::App& app);
Action add_render_command(CLI::App& app);
Action add_chat_command(CLI::App& app);
Action add_bench_command(CLI::App& app);
Action add_perplexity_command(CLI::App& app);
Action add_serve_command(CLI::App& app);
Action add_convert_command(CLI::App& app);
Action add_tune_command(CLI::App& app);

} // namespace ninfer::app
