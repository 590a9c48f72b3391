// Tree-walking evaluation of a parsed template, with jinja2's scoping: the template's top level
// is one scope, every for loop and macro call opens a new one (so `set` inside a loop does not
// leak out; namespaces carry state out), `if` opens none.
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "core/error.h"
#include "text/jinja/builtins.h"
#include "text/jinja/parser.h"
#include "text/jinja/template.h"

namespace ninfer::text::jinja {

struct Template::Impl {
    Body body;
};

namespace {

using Frame = std::unordered_map<std::string, Value>;

class Interp {
public:
    Interp(const RenderLimits& limits) : limits_(limits) {}

    void run(const Body& body, const Value& context, std::string& out) {
        auto globals = std::make_shared<Frame>();
        Dict builtins;
        detail::install_globals(builtins);
        for (auto& [k, v] : builtins.items) (*globals)[k] = v;
        for (auto& [k, v] : context.as_dict().items) (*globals)[k] = v;
        scopes_ = {globals};
        exec(body, out);
    }

    int line = 0;

private:
    enum class Flow { Normal, Break, Continue };

    void step() {
        if (++steps_ > limits_.max_steps)
            fail_invalid("template exceeded ", limits_.max_steps, " steps");
    }
    Value lookup(const std::string& name) const {
        for (auto it = scopes_.rbegin(); it != scopes_.rend(); ++it) {
            auto f = (*it)->find(name);
            if (f != (*it)->end()) return f->second;
        }
        return Value::undefined(name);
    }
    void assign(const std::string& name, Value v) { (*scopes_.back())[name] = std::move(v); }

    Flow exec(const Body& body, std::string& out);
    Flow exec_for(const Stmt& s, std::string& out);
    void exec_set(const Stmt& s);
    Value make_macro(const Stmt& s);
    Value eval(const Expr& e);
    Value eval_binary(const Expr& e);
    Value eval_compare(const Expr& e);
    CallArgs eval_args(const Expr& e, size_t first);

    const RenderLimits& limits_;
    std::vector<std::shared_ptr<Frame>> scopes_;
    int64_t steps_ = 0;
    int call_depth_ = 0;
};

Interp::Flow Interp::exec(const Body& body, std::string& out) {
    for (const auto& sp : body) {
        const Stmt& s = *sp;
        step();
        line = s.line;
        switch (s.kind) {
        case StmtKind::Text:
            out += s.text;
            break;
        case StmtKind::Output:
            out += eval(*s.expr).str();
            break;
        case StmtKind::If: {
            const Body* chosen = &s.else_body;
            for (const auto& [cond, b] : s.branches) {
                line = s.line;
                if (eval(*cond).truthy()) {
                    chosen = &b;
                    break;
                }
            }
            const Flow f = exec(*chosen, out);
            if (f != Flow::Normal) return f;
            break;
        }
        case StmtKind::For: {
            const Flow f = exec_for(s, out);
            if (f != Flow::Normal) return f;
            break;
        }
        case StmtKind::Set:
            exec_set(s);
            break;
        case StmtKind::SetBlock: {
            std::string text;
            exec(s.body, text);
            assign(s.targets[0], Value(std::move(text)));
            break;
        }
        case StmtKind::Macro:
            assign(s.text, make_macro(s));
            break;
        case StmtKind::Break:
            return Flow::Break;
        case StmtKind::Continue:
            return Flow::Continue;
        case StmtKind::Scope: {
            const Flow f = exec(s.body, out);
            if (f != Flow::Normal) return f;
            break;
        }
        }
        if (out.size() > limits_.max_output)
            fail_invalid("template output exceeds ", limits_.max_output, " bytes");
    }
    return Flow::Normal;
}

Interp::Flow Interp::exec_for(const Stmt& s, std::string& out) {
    const Value seq = eval(*s.expr);
    if (seq.is_none()) fail_invalid("'NoneType' object is not iterable");
    List items = seq.iterate();
    if (s.filter) { // {% for x in xs if cond %}: filtered before loop.* is computed
        List kept;
        scopes_.push_back(std::make_shared<Frame>());
        for (const Value& item : items) {
            if (s.targets.size() == 1) assign(s.targets[0], item);
            if (eval(*s.filter).truthy()) kept.push_back(item);
        }
        scopes_.pop_back();
        items.swap(kept);
    }
    if (items.empty()) return exec(s.else_body, out);
    scopes_.push_back(std::make_shared<Frame>());
    const int64_t n = int64_t(items.size());
    Flow result = Flow::Normal;
    for (int64_t i = 0; i < n; ++i) {
        step();
        scopes_.back() =
            std::make_shared<Frame>(); // jinja2: loop-body variables reset per iteration
        const Value& item = items[size_t(i)];
        if (s.targets.size() == 1) {
            assign(s.targets[0], item);
        } else {
            if (!item.is_list() || item.as_list().size() != s.targets.size())
                fail_invalid("cannot unpack ", item.repr(), " into ", s.targets.size(), " names");
            for (size_t k = 0; k < s.targets.size(); ++k) assign(s.targets[k], item.as_list()[k]);
        }
        Value loop = Value::dict();
        Dict& d = loop.as_dict();
        d.set("index0", Value(i));
        d.set("index", Value(i + 1));
        d.set("revindex0", Value(n - i - 1));
        d.set("revindex", Value(n - i));
        d.set("first", Value(i == 0));
        d.set("last", Value(i == n - 1));
        d.set("length", Value(n));
        d.set("depth", Value(int64_t(1)));
        d.set("depth0", Value(int64_t(0)));
        d.set("previtem", i > 0 ? items[size_t(i - 1)] : Value::undefined("previtem"));
        d.set("nextitem", i + 1 < n ? items[size_t(i + 1)] : Value::undefined("nextitem"));
        d.set("cycle", Value::function("cycle", [i](CallArgs& a) {
                  require(!a.args.empty(), "loop.cycle needs at least one value");
                  return a.args[size_t(i) % a.args.size()];
              }));
        assign("loop", loop);
        if (exec(s.body, out) == Flow::Break) break;
    }
    scopes_.pop_back();
    return result;
}

// Whether v is, or holds through lists and dicts, the dict d. Namespaces are the only mutable
// objects, so storing a value that holds a namespace into that namespace is the only way to
// make a cycle, which shared ownership could never free. Each container is visited once (lists
// may share sublists: [l, l] forty times over is 40 containers, not 2^40 paths).
bool holds(const Value& v, const Dict* d) {
    std::unordered_set<const void*> seen;
    std::vector<const Value*> todo = {&v}; // a stack, not recursion: nesting may be deep
    while (!todo.empty()) {
        const Value* x = todo.back();
        todo.pop_back();
        if (x->is_dict()) {
            if (&x->as_dict() == d) return true;
            if (!seen.insert(&x->as_dict()).second) continue;
            for (const auto& [key, item] : x->as_dict().items) todo.push_back(&item);
        } else if (x->is_list()) {
            if (!seen.insert(&x->as_list()).second) continue;
            for (const Value& item : x->as_list()) todo.push_back(&item);
        }
    }
    return false;
}

void Interp::exec_set(const Stmt& s) {
    Value v = eval(*s.expr);
    if (!s.attr.empty()) {
        Value target = lookup(s.targets[0]);
        if (!target.is_namespace())
            fail_invalid("cannot assign attribute '", s.attr, "' on a non-namespace object");
        if (holds(v, &target.as_dict()))
            fail_invalid("cannot assign attribute '", s.attr,
                         "': the value holds its own namespace (a cycle)");
        target.as_dict().set(s.attr, std::move(v));
        return;
    }
    if (s.targets.size() == 1) {
        assign(s.targets[0], std::move(v));
        return;
    }
    const List items = v.iterate();
    if (items.size() != s.targets.size())
        fail_invalid("cannot unpack ", items.size(), " values into ", s.targets.size(), " names");
    for (size_t k = 0; k < items.size(); ++k) assign(s.targets[k], items[k]);
}

Value Interp::make_macro(const Stmt& s) {
    const Stmt* def = &s;
    return Value::function(s.text, [this, def](CallArgs& a) {
        if (a.args.size() > def->params.size())
            fail_invalid("macro '", def->text, "' takes not more than ", def->params.size(),
                         " argument(s)");
        if (++call_depth_ > limits_.max_call_depth)
            fail_invalid("macro calls nested deeper than ", limits_.max_call_depth);
        auto frame = std::make_shared<Frame>();
        for (const auto& [k, v] : a.kwargs) {
            bool known = false;
            for (const auto& p : def->params) known = known || p.first == k;
            if (!known) fail_invalid("macro '", def->text, "' has no parameter '", k, "'");
        }
        std::vector<std::shared_ptr<Frame>> saved = {scopes_.front(), frame};
        saved.swap(scopes_);
        for (size_t i = 0; i < def->params.size(); ++i) {
            const auto& [name, dflt] = def->params[i];
            Value v = a.get(i, name.c_str());
            if (v.is_undefined() && dflt) v = eval(*dflt);
            (*frame)[name] = v;
        }
        std::string text;
        exec(def->body, text);
        saved.swap(scopes_);
        --call_depth_;
        return Value(std::move(text));
    });
}

CallArgs Interp::eval_args(const Expr& e, size_t first) {
    CallArgs a;
    for (size_t i = first; i < e.args.size(); ++i) a.args.push_back(eval(*e.args[i]));
    for (const auto& [k, v] : e.kwargs) a.kwargs.emplace_back(k, eval(*v));
    return a;
}

Value Interp::eval(const Expr& e) {
    switch (e.kind) {
    case ExprKind::Literal:
        return e.value;
    case ExprKind::Name:
        return lookup(e.name);
    case ExprKind::ListLit: {
        List items;
        for (const auto& x : e.args) items.push_back(eval(*x));
        return e.negated ? Value::tuple(std::move(items)) : Value::list(std::move(items));
    }
    case ExprKind::DictLit: {
        Value d = Value::dict();
        for (size_t i = 0; i + 1 < e.args.size(); i += 2) {
            const Value k = eval(*e.args[i]);
            if (!k.is_string()) fail_invalid("dict literal keys must be strings");
            d.as_dict().set(k.as_string(), eval(*e.args[i + 1]));
        }
        return d;
    }
    case ExprKind::Attr:
        return detail::get_attr(eval(*e.args[0]), e.name);
    case ExprKind::Item:
        return detail::get_item(eval(*e.args[0]), eval(*e.args[1]));
    case ExprKind::Slice: {
        const auto part = [&](size_t k) { return e.args[k] ? eval(*e.args[k]) : Value(); };
        return detail::get_slice(eval(*e.args[0]), part(1), part(2), part(3));
    }
    case ExprKind::Call: {
        const Value fn = eval(*e.args[0]);
        CallArgs a = eval_args(e, 1);
        step();
        if (fn.kind() != Value::Kind::Callable)
            fail_invalid(fn.is_undefined() ? "'" + fn.name() + "' is undefined"
                                           : fn.repr() + " is not callable");
        return fn.as_function()(a);
    }
    case ExprKind::Filter: {
        CallArgs a = eval_args(e, 1);
        step();
        return detail::apply_filter(e.name, eval(*e.args[0]), a);
    }
    case ExprKind::Test: {
        CallArgs a = eval_args(e, 1);
        return Value(detail::apply_test(e.name, eval(*e.args[0]), a) != e.negated);
    }
    case ExprKind::Unary: {
        const Value v = eval(*e.args[0]);
        if (e.name == "not") return Value(!v.truthy());
        return detail::arithmetic(e.name == "-" ? "neg" : "pos", v, v);
    }
    case ExprKind::Binary:
        return eval_binary(e);
    case ExprKind::Compare:
        return eval_compare(e);
    case ExprKind::Cond:
        if (eval(*e.args[0]).truthy()) return eval(*e.args[1]);
        return e.args[2] ? eval(*e.args[2]) : Value::undefined("conditional expression");
    }
    return Value();
}

Value Interp::eval_binary(const Expr& e) {
    const Value a = eval(*e.args[0]);
    if (e.name == "and") return a.truthy() ? eval(*e.args[1]) : a;
    if (e.name == "or") return a.truthy() ? a : eval(*e.args[1]);
    const Value b = eval(*e.args[1]);
    if (e.name == "~") {
        std::string s = a.str();
        const std::string t = b.str();
        check_size(s.size() + t.size());
        return Value(s + t);
    }
    return detail::arithmetic(e.name, a, b);
}

Value Interp::eval_compare(const Expr& e) {
    Value left = eval(*e.args[0]);
    for (size_t i = 0; i < e.ops.size(); ++i) {
        const Value right = eval(*e.args[i + 1]);
        const std::string& op = e.ops[i];
        bool r;
        if (op == "==")
            r = equals(left, right);
        else if (op == "!=")
            r = !equals(left, right);
        else if (op == "in")
            r = detail::contains(right, left);
        else if (op == "not in")
            r = !detail::contains(right, left);
        else {
            if (left.is_undefined() || right.is_undefined())
                fail_invalid("cannot compare an undefined value");
            const int c = compare(left, right);
            r = op == "<" ? c < 0 : op == "<=" ? c <= 0 : op == ">" ? c > 0 : c >= 0;
        }
        if (!r) return Value(false);
        left = right;
    }
    return Value(true);
}

} // namespace

namespace {

// Any other exception (a library's) becomes a ninfer::Error: templates never escape otherwise.
[[noreturn]] void rethrow_as_error(const std::string& where) {
    try {
        throw;
    } catch (const Error&) {
        throw;
    } catch (const std::bad_alloc&) {
        fail(ErrorCategory::OutOfMemory, where, ": out of memory");
    } catch (const std::exception& e) {
        fail(ErrorCategory::InvalidArgument, where, ": ", e.what());
    }
}

} // namespace

Template::Template(const std::string& source) : impl_(std::make_unique<Impl>()) {
    try {
        impl_->body = parse(lex(source));
    } catch (...) {
        rethrow_as_error("chat template");
    }
}
Template::~Template() = default;
Template::Template(Template&&) noexcept = default;
Template& Template::operator=(Template&&) noexcept = default;

std::string Template::render(const Value& context, const RenderLimits& limits) const {
    require(context.is_dict(), "template context must be a dict");
    Interp interp(limits);
    std::string out;
    try {
        interp.run(impl_->body, context, out);
    } catch (const Error& e) {
        throw Error(e.category(), concat("chat template line ", interp.line, ": ", e.what()));
    } catch (...) {
        rethrow_as_error(concat("chat template line ", interp.line));
    }
    return out;
}

} // namespace ninfer::text::jinja
