#include "load_progress.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>
#include <memory>

#include <unistd.h>

namespace ninfer::app {
namespace {

// A bar of 24 cells keeps the whole line within 80 columns.
constexpr int kBarWidth = 24;

double gigabytes(int64_t bytes) {
    return double(bytes) / 1e9;
}

double gb_per_second(int64_t bytes, double seconds) {
    return seconds > 0 ? gigabytes(bytes) / seconds : 0.0;
}

// Integer shares of done in [0, total] (total > 0): exact, so 100% and a full bar mean done.
int share(int64_t done, int64_t total, int parts) {
    return total > 0 ? int(done * parts / total) : parts;
}

std::string bar(int64_t done, int64_t total, int width) {
    const int filled = share(done, total, width);
    std::string s = "[";
    s.append(size_t(filled), '#').append(size_t(width - filled), '.');
    return s + ']';
}

// The stream whose redrawn line is open (no line end yet), for end_load_progress_line.
std::atomic<std::FILE*> g_open_line{nullptr};

struct PrinterState {
    std::FILE* out = nullptr;
    bool tty = false;
    ProgressWords words;
    bool started = false; // a load is under way: the clock runs
    bool shown = false;   // and it is large enough to print
    std::chrono::steady_clock::time_point start;
    int last_step = -1;  // the last 10% step printed (plain lines)
    size_t line_len = 0; // of the redrawn line, to blank what a shorter one leaves

    void begin(int64_t total) {
        started = true;
        shown = total >= kLoadProgressMinBytes;
        start = std::chrono::steady_clock::now();
        last_step = -1;
        line_len = 0;
    }

    double seconds() const {
        return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    }

    // Redraws the one line over what was there.
    void redraw(const std::string& line) {
        const size_t pad = line_len > line.size() ? line_len - line.size() : 0;
        std::fprintf(out, "\r%s%s", line.c_str(), std::string(pad, ' ').c_str());
        line_len = line.size();
        g_open_line = out;
    }

    void report(int64_t done, int64_t total) {
        if (!started) begin(total);
        if (!shown) {
            if (done >= total) started = false; // the next load starts over
            return;
        }
        const double s = seconds();
        if (done >= total) {
            if (tty) {
                redraw(format_load_done(total, s, words));
                g_open_line = nullptr;
                std::fputc('\n', out);
            } else {
                std::fprintf(out, "%s\n", format_load_done(total, s, words).c_str());
            }
            started = false;
        } else if (tty) {
            redraw(format_load_progress(done, total, s, kBarWidth, words));
        } else {
            const int step = share(std::max<int64_t>(done, 0), total, 10);
            if (step <= last_step) return;
            last_step = step;
            std::fprintf(out, "%s\n", format_load_progress(done, total, s, 0, words).c_str());
        }
        std::fflush(out);
    }
};

} // namespace

std::string format_load_progress(int64_t done, int64_t total, double seconds, int width,
                                 const ProgressWords& words) {
    total = std::max<int64_t>(total, 0);
    done = std::clamp<int64_t>(done, 0, total);
    char total_text[32];
    std::snprintf(total_text, sizeof total_text, "%.2f", gigabytes(total));
    char text[160];
    // done is padded to the total's width, so the line keeps its length as it is redrawn.
    std::snprintf(text, sizeof text, "%*.2f/%s GB  %3d%%  %6.2f GB/s", int(std::strlen(total_text)),
                  gigabytes(done), total_text, share(done, total, 100),
                  gb_per_second(done, seconds));
    std::string line = std::string(words.active) + " ";
    line += width > 0 ? bar(done, total, width) + "  " : " ";
    return line + text;
}

std::string format_load_done(int64_t total, double seconds, const ProgressWords& words) {
    char text[160];
    std::snprintf(text, sizeof text, "%s %.2f GB of weights in %.1f s (%.2f GB/s)", words.done,
                  gigabytes(total), seconds, gb_per_second(total, seconds));
    return text;
}

LoadProgressFn load_progress_printer(std::FILE* out, bool tty, const ProgressWords& words) {
    auto state = std::make_shared<PrinterState>();
    state->out = out;
    state->tty = tty;
    state->words = words;
    return [state](int64_t done, int64_t total) { state->report(done, total); };
}

LoadProgressFn stderr_load_progress(const ProgressWords& words) {
    return load_progress_printer(stderr, isatty(fileno(stderr)) != 0, words);
}

void end_load_progress_line() {
    if (std::FILE* out = g_open_line.exchange(nullptr)) std::fputc('\n', out);
}

} // namespace ninfer::app
