#include "text/jinja/lexer.h"

#include <algorithm>
#include <cstring>

#include "core/error.h"
#include "text/unicode.h"

namespace ninfer::text::jinja {
namespace {

// jinja2 joins source.splitlines() with "\n": every line break becomes "\n" and one trailing
// line break is dropped (keep_trailing_newline = False).
std::string normalize_newlines(const std::string& src) {
    const std::vector<char32_t> cps = to_code_points(src);
    std::string out;
    out.reserve(src.size());
    for (size_t i = 0; i < cps.size(); ++i) {
        const char32_t c = cps[i];
        if (c == '\r' && i + 1 < cps.size() && cps[i + 1] == '\n') continue; // "\r\n": one break
        if (c == '\r' || c == '\n' || c == '\v' || c == '\f' || c == 0x1C || c == 0x1D ||
            c == 0x1E || c == 0x85 || c == 0x2028 || c == 0x2029)
            out += '\n';
        else
            append_utf8(out, c);
    }
    if (!out.empty() && out.back() == '\n') out.pop_back();
    return out;
}

bool is_space_at(const std::string& s, size_t i, size_t* len) {
    const unsigned char c = static_cast<unsigned char>(s[i]);
    if (c < 0x80) {
        *len = 1;
        return is_py_space(c);
    }
    const size_t n = valid_utf8_prefix(std::string_view(s).substr(i, c < 0xE0   ? 2
                                                                     : c < 0xF0 ? 3
                                                                                : 4));
    if (n == 0) return false;
    *len = n;
    return is_py_space(to_code_points(std::string_view(s).substr(i, n))[0]);
}

size_t skip_space(const std::string& s, size_t i) {
    size_t n = 0;
    while (i < s.size() && is_space_at(s, i, &n)) i += n;
    return i;
}

std::string rstrip_space(const std::string& text) {
    return py_strip(text, false, true, nullptr);
}

class Lexer {
public:
    explicit Lexer(const std::string& src) : s_(normalize_newlines(src)) {
        for (size_t i = 0; i < s_.size(); ++i)
            if (s_[i] == '\n') newlines_.push_back(i);
    }
    std::vector<Token> run();

private:
    void text_before(size_t tag, char kind, char modifier);
    void lex_tag(char kind);
    void lex_string();
    size_t decode_escape(size_t i, int line, std::string& out) const;
    void lex_number();
    int line_at(size_t pos) const;

    std::string s_;
    size_t pos_ = 0;
    std::vector<Token> out_;
    std::vector<size_t> newlines_;
};

int Lexer::line_at(size_t pos) const {
    return 1 + int(std::lower_bound(newlines_.begin(), newlines_.end(), pos) - newlines_.begin());
}

void Lexer::text_before(size_t tag, char kind, char modifier) {
    std::string text = s_.substr(pos_, tag - pos_);
    const bool line_starting = pos_ == 0 || s_[pos_ - 1] == '\n';
    if (modifier == '-') {
        text = rstrip_space(text);
    } else if (modifier != '+' && kind != '{') { // lstrip_blocks: blocks and comments
        const size_t l_pos = text.rfind('\n') == std::string::npos ? 0 : text.rfind('\n') + 1;
        if ((l_pos > 0 || line_starting) &&
            text.find_first_not_of(" \t", l_pos) == std::string::npos)
            text.resize(l_pos);
    }
    if (!text.empty()) out_.push_back({Tok::Text, std::move(text), line_at(pos_)});
}

std::vector<Token> Lexer::run() {
    while (pos_ < s_.size()) {
        size_t tag = pos_;
        while ((tag = s_.find('{', tag)) != std::string::npos) {
            if (tag + 1 < s_.size() && std::strchr("{%#", s_[tag + 1])) break;
            ++tag;
        }
        if (tag == std::string::npos) {
            out_.push_back({Tok::Text, s_.substr(pos_), line_at(pos_)});
            break;
        }
        const char kind = s_[tag + 1];
        const char modifier = tag + 2 < s_.size() ? s_[tag + 2] : 0;
        text_before(tag, kind, modifier);
        pos_ = tag + 2 + (modifier == '-' || modifier == '+' ? 1 : 0);
        if (kind == '#') {
            const size_t end = s_.find("#}", pos_);
            if (end == std::string::npos)
                fail_invalid("template line ", line_at(tag), ": unterminated comment");
            const bool strip = end > pos_ && s_[end - 1] == '-';
            pos_ = end + 2;
            if (strip)
                pos_ = skip_space(s_, pos_);
            else if (pos_ < s_.size() && s_[pos_] == '\n')
                ++pos_; // trim_blocks
            continue;
        }
        lex_tag(kind);
    }
    out_.push_back({Tok::End, "", line_at(s_.size())});
    return out_;
}

void Lexer::lex_tag(char kind) {
    const int line = line_at(pos_);
    out_.push_back({kind == '{' ? Tok::VarBegin : Tok::BlockBegin, "", line});
    const char close = kind == '{' ? '}' : '%';
    static const char* kOps2[] = {"//", "**", "==", "!=", "<=", ">="};
    while (true) {
        pos_ = skip_space(s_, pos_);
        if (pos_ >= s_.size()) fail_invalid("template line ", line, ": unterminated tag");
        const char c = s_[pos_];
        const bool minus_end =
            c == '-' && s_.compare(pos_ + 1, 2, std::string(1, close) + "}") == 0;
        const bool plus_end = c == '+' && close == '%' && s_.compare(pos_ + 1, 2, "%}") == 0;
        if (minus_end || plus_end || (c == close && pos_ + 1 < s_.size() && s_[pos_ + 1] == '}')) {
            pos_ += minus_end || plus_end ? 3 : 2;
            out_.push_back({kind == '{' ? Tok::VarEnd : Tok::BlockEnd, "", line_at(pos_)});
            if (minus_end)
                pos_ = skip_space(s_, pos_);
            else if (close == '%' && !plus_end && pos_ < s_.size() && s_[pos_] == '\n')
                ++pos_;
            return;
        }
        if (std::isalpha(static_cast<unsigned char>(c)) || c == '_') {
            const size_t b = pos_;
            while (pos_ < s_.size() &&
                   (std::isalnum(static_cast<unsigned char>(s_[pos_])) || s_[pos_] == '_'))
                ++pos_;
            out_.push_back({Tok::Name, s_.substr(b, pos_ - b), line_at(b)});
        } else if (std::isdigit(static_cast<unsigned char>(c))) {
            lex_number();
        } else if (c == '\'' || c == '"') {
            lex_string();
        } else {
            std::string op(1, c);
            for (const char* o : kOps2)
                if (s_.compare(pos_, 2, o) == 0) op = o;
            if (op.size() == 1 && !std::strchr("+-*/%~<>=.,:|()[]{}!", c))
                fail_invalid("template line ", line_at(pos_), ": unexpected character '", op, "'");
            if (op == "!") fail_invalid("template line ", line_at(pos_), ": unexpected '!'");
            pos_ += op.size();
            out_.push_back({Tok::Op, op, line_at(pos_)});
        }
    }
}

void Lexer::lex_number() {
    const size_t b = pos_;
    bool is_float = false;
    while (pos_ < s_.size() &&
           (std::isdigit(static_cast<unsigned char>(s_[pos_])) || s_[pos_] == '_'))
        ++pos_;
    if (pos_ + 1 < s_.size() && s_[pos_] == '.' &&
        std::isdigit(static_cast<unsigned char>(s_[pos_ + 1]))) {
        is_float = true;
        ++pos_;
        while (pos_ < s_.size() &&
               (std::isdigit(static_cast<unsigned char>(s_[pos_])) || s_[pos_] == '_'))
            ++pos_;
    }
    if (pos_ < s_.size() && (s_[pos_] == 'e' || s_[pos_] == 'E')) {
        size_t e = pos_ + 1;
        if (e < s_.size() && (s_[e] == '+' || s_[e] == '-')) ++e;
        if (e < s_.size() && std::isdigit(static_cast<unsigned char>(s_[e]))) {
            is_float = true;
            pos_ = e;
            while (pos_ < s_.size() && std::isdigit(static_cast<unsigned char>(s_[pos_]))) ++pos_;
        }
    }
    std::string text;
    for (size_t i = b; i < pos_; ++i)
        if (s_[i] != '_') text += s_[i];
    out_.push_back({is_float ? Tok::Float : Tok::Int, text, line_at(b)});
}

// Decodes the escape after the backslash at s_[i] (Python "unicode-escape"), appending to out;
// returns the index of the escape's last character.
size_t Lexer::decode_escape(size_t i, int line, std::string& out) const {
    static const std::string kFrom = "ntr\\'\"abfv", kTo = "\n\t\r\\'\"\a\b\f\v";
    const char e = s_[i];
    if (const size_t k = kFrom.find(e); k != std::string::npos) {
        out += kTo[k];
        return i;
    }
    if (e == '\n') return i; // line continuation
    if (e == 'x' || e == 'u' || e == 'U') {
        const size_t n = e == 'x' ? 2 : e == 'u' ? 4 : 8;
        require(i + n < s_.size(), "template line ", line, ": truncated escape");
        const std::string h = s_.substr(i + 1, n);
        for (char x : h)
            require(std::isxdigit(static_cast<unsigned char>(x)), "template line ", line,
                    ": bad escape");
        const unsigned long cp = std::stoul(h, nullptr, 16);
        require(cp <= 0x10FFFF && (cp < 0xD800 || cp > 0xDFFF), "template line ", line,
                ": escape is not a Unicode scalar value");
        append_utf8(out, char32_t(cp));
        return i + n;
    }
    if (e >= '0' && e <= '7') { // up to three octal digits
        int v = e - '0', n = 1;
        while (n < 3 && i + 1 < s_.size() && s_[i + 1] >= '0' && s_[i + 1] <= '7')
            v = v * 8 + (s_[++i] - '0'), ++n;
        append_utf8(out, char32_t(v));
        return i;
    }
    out += '\\'; // unknown escapes stay as written
    out += e;
    return i;
}

void Lexer::lex_string() {
    const char q = s_[pos_];
    const int line = line_at(pos_);
    std::string out;
    size_t i = pos_ + 1;
    for (;; ++i) {
        if (i >= s_.size()) fail_invalid("template line ", line, ": unterminated string");
        const char c = s_[i];
        if (c == q) break;
        if (c == '\\' && i + 1 < s_.size())
            i = decode_escape(i + 1, line, out);
        else
            out += c;
    }
    pos_ = i + 1;
    out_.push_back({Tok::String, std::move(out), line});
}

} // namespace

std::vector<Token> lex(const std::string& source) {
    require_utf8(source, "chat template");
    return Lexer(source).run();
}

} // namespace ninfer::text::jinja
