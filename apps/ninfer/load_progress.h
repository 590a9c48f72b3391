// The CLI's progress line while a model's weights load (EngineOptions::on_load_progress): a bar,
// GB read of the checkpoint's total, percent and GB/s since the start. The formatting is pure
// (format_load_progress, format_load_done) so tests/unit/test_load_progress.cpp checks it; the
// printer holds the clock and writes.
#pragma once

#include <cstdint>
#include <cstdio>
#include <functional>
#include <string>

namespace ninfer::app {

// Checkpoints smaller than this load in a moment and print nothing (nor do the demo model and
// the test fixtures, whose CLI tests compare stderr).
inline constexpr int64_t kLoadProgressMinBytes = int64_t(1) << 30;

// The words of the two lines: "<active> [###...] ..." and "<done> 67.00 GB of weights in ...".
struct ProgressWords {
    const char* active = "loading weights";
    const char* done = "loaded";
};

// One progress line, without a line end:
//   "loading weights [#####...................]  12.34/67.00 GB  18%   2.41 GB/s"
// width: cells of the bar; 0 or less drops the bar (the plain form for logs). done is clamped to
// [0, total]; GB are 1e9 bytes; the rate is done / seconds (0 before any time has passed).
std::string format_load_progress(int64_t done, int64_t total, double seconds, int width,
                                 const ProgressWords& words = {});

// The closing line, without a line end: "loaded 67.00 GB of weights in 27.8 s (2.41 GB/s)".
std::string format_load_done(int64_t total, double seconds, const ProgressWords& words = {});

using LoadProgressFn = std::function<void(int64_t bytes_done, int64_t bytes_total)>;

// A progress callback writing to out, silent for checkpoints under kLoadProgressMinBytes. tty:
// one line redrawn with '\r' on every report; otherwise a plain line at 0% and each 10% step
// (logs stay short). At done == total the closing line ends it. The clock starts at a load's
// first report; copies of the callback share one state.
LoadProgressFn load_progress_printer(std::FILE* out, bool tty, const ProgressWords& words = {});

// load_progress_printer on stderr, redrawn when stderr is a terminal.
LoadProgressFn stderr_load_progress(const ProgressWords& words = {});

// Ends a redrawn line that a failed load left open, so that the error message which follows
// starts on a line of its own. Does nothing when no line is open.
void end_load_progress_line();

} // namespace ninfer::app
