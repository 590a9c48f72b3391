// apps/ninfer/load_progress.h: the load progress line's formatting, and the printer's TTY and
// plain (log) forms on a temporary file.
#include <gtest/gtest.h>

#include <cstdio>
#include <string>
#include <vector>

#include "load_progress.h"

namespace ninfer::app {
namespace {

constexpr int64_t kGB = 1000000000;
constexpr int64_t kGiB = int64_t(1) << 30;

TEST(LoadProgressFormat, BarBytesPercentAndRate) {
    EXPECT_EQ(format_load_progress(25 * kGB, 100 * kGB, 10.0, 8),
              "loading weights [##......]   25.00/100.00 GB   25%    2.50 GB/s");
}

TEST(LoadProgressFormat, OtherWordsForOtherJobs) {
    const ProgressWords convert{"converting weights", "converted"};
    EXPECT_EQ(format_load_progress(3 * kGB, 4 * kGB, 2.0, 0, convert).rfind("converting weights  ", 0),
              0u);
    EXPECT_EQ(format_load_done(4 * kGB, 2.0, convert).rfind("converted 4.00 GB of weights in", 0),
              0u);
}

TEST(LoadProgressFormat, WithoutBarForLogs) {
    EXPECT_EQ(format_load_progress(3 * kGB, 4 * kGB, 2.0, 0),
              "loading weights  3.00/4.00 GB   75%    1.50 GB/s");
}

TEST(LoadProgressFormat, KeepsItsLengthAsDoneGrows) {
    // A redrawn line that shrank would leave characters of the last one behind.
    const size_t n = format_load_progress(0, 67 * kGB, 0.5, 24).size();
    for (int64_t done : {int64_t(1), 5 * kGB, 66 * kGB, 67 * kGB})
        EXPECT_EQ(format_load_progress(done, 67 * kGB, 9.0, 24).size(), n) << done;
}

TEST(LoadProgressFormat, HundredPercentAndAFullBarOnlyAtTheEnd) {
    const int64_t total = 100 * kGB;
    const std::string almost = format_load_progress(total - 1, total, 1.0, 10);
    EXPECT_NE(almost.find("[#########.]"), std::string::npos) << almost;
    EXPECT_NE(almost.find(" 99%"), std::string::npos) << almost;
    const std::string done = format_load_progress(total, total, 1.0, 10);
    EXPECT_NE(done.find("[##########]"), std::string::npos) << done;
    EXPECT_NE(done.find("100%"), std::string::npos) << done;
}

TEST(LoadProgressFormat, NoTimeYetAndOutOfRangeInputs) {
    // No time has passed at the first report: a rate of 0, not a division by zero.
    EXPECT_EQ(format_load_progress(0, 2 * kGB, 0.0, 4),
              "loading weights [....]  0.00/2.00 GB    0%    0.00 GB/s");
    // done is clamped to [0, total]; an empty total counts as done.
    EXPECT_EQ(format_load_progress(3 * kGB, 2 * kGB, 1.0, 4),
              format_load_progress(2 * kGB, 2 * kGB, 1.0, 4));
    EXPECT_EQ(format_load_progress(-5, 2 * kGB, 1.0, 4), format_load_progress(0, 2 * kGB, 1.0, 4));
    EXPECT_NE(format_load_progress(0, 0, 1.0, 4).find("[####]"), std::string::npos);
}

TEST(LoadProgressFormat, DoneLine) {
    EXPECT_EQ(format_load_done(67 * kGB, 27.9), "loaded 67.00 GB of weights in 27.9 s (2.40 GB/s)");
    EXPECT_EQ(format_load_done(2 * kGB, 0.0), "loaded 2.00 GB of weights in 0.0 s (0.00 GB/s)");
}

// What a printer wrote to a temporary file, given reports of done bytes of total.
std::string printed(bool tty, int64_t total, const std::vector<int64_t>& done) {
    std::FILE* f = std::tmpfile();
    if (!f) {
        ADD_FAILURE() << "no temporary file";
        return {};
    }
    const LoadProgressFn fn = load_progress_printer(f, tty);
    for (int64_t d : done) fn(d, total);
    std::string out(size_t(std::ftell(f)), '\0');
    std::rewind(f);
    out.resize(std::fread(out.data(), 1, out.size(), f));
    std::fclose(f);
    return out;
}

std::vector<std::string> lines(const std::string& s) {
    std::vector<std::string> out;
    size_t at = 0;
    for (size_t nl; (nl = s.find('\n', at)) != std::string::npos; at = nl + 1)
        out.push_back(s.substr(at, nl - at));
    if (at < s.size()) out.push_back(s.substr(at));
    return out;
}

std::vector<int64_t> steps_of(int64_t total, int64_t step) {
    std::vector<int64_t> done;
    for (int64_t d = 0; d < total; d += step) done.push_back(d);
    done.push_back(total);
    return done;
}

TEST(LoadProgressPrinter, SilentBelowOneGiB) {
    EXPECT_EQ(printed(false, kGiB - 1, steps_of(kGiB - 1, 64 << 20)), "");
    EXPECT_EQ(printed(true, kGiB - 1, steps_of(kGiB - 1, 64 << 20)), "");
}

TEST(LoadProgressPrinter, PlainLinesAtEachTenPercentStep) {
    // Reports every 1% (and twice at 40%): one line at 0%, 10%, ..., 90%, then the done line.
    const int64_t total = 100 * kGiB;
    std::vector<int64_t> done = steps_of(total, kGiB);
    done.insert(done.begin() + 40, 40 * kGiB);
    const std::vector<std::string> out = lines(printed(false, total, done));
    ASSERT_EQ(out.size(), 11u) << printed(false, total, done);
    for (size_t i = 0; i < 10; ++i) {
        EXPECT_EQ(out[i].rfind("loading weights  ", 0), 0u) << out[i];
        std::string percent = " "; // (no "literal" + string: GCC 12's -Wrestrict misfires)
        percent += std::to_string(i * 10) + "%";
        EXPECT_NE(out[i].find(percent), std::string::npos) << out[i];
        EXPECT_EQ(out[i].find('\r'), std::string::npos) << out[i];
    }
    EXPECT_EQ(out[10].rfind("loaded 107.37 GB of weights in ", 0), 0u) << out[10];
}

TEST(LoadProgressPrinter, TtyRedrawsOneLineThenEndsIt) {
    const int64_t total = 2 * kGiB;
    const std::string s = printed(true, total, {0, kGiB, total});
    ASSERT_FALSE(s.empty());
    EXPECT_EQ(s.back(), '\n');
    EXPECT_EQ(lines(s).size(), 1u) << s; // redrawn in place: one line in all
    std::vector<std::string> draws;      // what each '\r' drew
    for (size_t at = s.find('\r'); at != std::string::npos;) {
        const size_t next = s.find('\r', at + 1);
        draws.push_back(s.substr(at + 1, (next == std::string::npos ? s.size() : next) - at - 1));
        at = next;
    }
    ASSERT_EQ(draws.size(), 3u) << s;
    EXPECT_NE(draws[0].find("[....."), std::string::npos) << draws[0];
    EXPECT_NE(draws[1].find(" 50%"), std::string::npos) << draws[1];
    // The done line is padded over the longer bar line, and ends it.
    EXPECT_EQ(draws[2].rfind("loaded 2.15 GB of weights in ", 0), 0u) << draws[2];
    EXPECT_EQ(draws[2].size(), draws[1].size() + 1) << draws[2];
}

TEST(LoadProgressPrinter, ASecondLoadStartsOver) {
    const int64_t total = 2 * kGiB;
    const std::vector<std::string> out = lines(printed(false, total, {0, total, 0, total}));
    ASSERT_EQ(out.size(), 4u);
    EXPECT_NE(out[2].find("  0%"), std::string::npos) << out[2];
}

TEST(LoadProgressPrinter, EndLineAfterAFailedLoad) {
    std::FILE* f = std::tmpfile();
    ASSERT_NE(f, nullptr);
    const LoadProgressFn fn = load_progress_printer(f, true);
    fn(0, 4 * kGiB);
    fn(kGiB, 4 * kGiB); // and then the load fails
    end_load_progress_line();
    end_load_progress_line(); // a second call: nothing left open
    const long size = std::ftell(f);
    std::string out(size_t(size), '\0');
    std::rewind(f);
    out.resize(std::fread(out.data(), 1, out.size(), f));
    std::fclose(f);
    ASSERT_FALSE(out.empty());
    EXPECT_EQ(out.back(), '\n');
    EXPECT_EQ(out.find('\n'), out.size() - 1) << out;
}

} // namespace
} // namespace ninfer::app
