#include "server/response_store.h"

namespace ninfer::server {
namespace {

// Calls f(id, item) for each item of the entry's conversation that has a string "id", until f
// returns true, in place
// (the index's walks run under the store's mutex: no copy of the conversation).
template <typename F> void for_each_item_id(const ResponseStore::Entry& e, F&& f) {
    auto visit = [&](const nlohmann::ordered_json& items) -> bool {
        if (!items.is_array()) return false;
        for (const auto& item : items)
            if (item.is_object())
                if (const auto id = item.find("id"); id != item.end() && id->is_string())
                    if (f(id->get_ref<const std::string&>(), item)) return true;
        return false;
    };
    if (visit(e.input)) return;
    if (const auto out = e.response.find("output"); out != e.response.end()) visit(*out);
}

} // namespace

nlohmann::ordered_json ResponseStore::Entry::conversation() const {
    nlohmann::ordered_json items = input;
    if (const auto it = response.find("output"); it != response.end() && it->is_array())
        for (const auto& item : *it) items.push_back(item);
    return items;
}

ResponseStore::ResponseStore(size_t max_entries, size_t max_bytes)
    : max_entries_(max_entries), max_bytes_(max_bytes) {}

void ResponseStore::put(const std::string& id, Entry entry) {
    if (!enabled()) return;
    // The JSON text's size stands for the entry's memory (the parsed form is a small multiple).
    const size_t bytes = entry.input.dump().size() + entry.response.dump().size();
    std::lock_guard lock(mutex_);
    if (const auto old = slots_.find(id); old != slots_.end()) drop_locked(old);
    for_each_item_id(entry, [&](const std::string& item_id, const auto&) {
        item_owner_[item_id] = id;
        return false;
    });
    lru_.push_front(id);
    slots_[id] = Slot{std::move(entry), bytes, lru_.begin()};
    bytes_ += bytes;
    evict_locked();
}

std::optional<nlohmann::ordered_json> ResponseStore::item(const std::string& item_id) {
    std::lock_guard lock(mutex_);
    const auto owner = item_owner_.find(item_id);
    if (owner == item_owner_.end()) return std::nullopt;
    const auto it = slots_.find(owner->second);
    if (it == slots_.end()) return std::nullopt;
    std::optional<nlohmann::ordered_json> found;
    for_each_item_id(it->second.entry, [&](const std::string& id, const auto& item) {
        if (id == item_id) found = item;
        return found.has_value(); // stop at the first
    });
    return found;
}

void ResponseStore::drop_locked(std::unordered_map<std::string, Slot>::iterator it) {
    // Its items' index entries, unless a later response (which repeats its conversation) owns them.
    for_each_item_id(it->second.entry, [&](const std::string& item_id, const auto&) {
        const auto owner = item_owner_.find(item_id);
        if (owner != item_owner_.end() && owner->second == it->first) item_owner_.erase(owner);
        return false;
    });
    bytes_ -= it->second.bytes;
    lru_.erase(it->second.lru);
    slots_.erase(it);
}

std::optional<ResponseStore::Entry> ResponseStore::get(const std::string& id) {
    std::lock_guard lock(mutex_);
    const auto it = slots_.find(id);
    if (it == slots_.end()) return std::nullopt;
    lru_.splice(lru_.begin(), lru_, it->second.lru);
    return it->second.entry;
}

bool ResponseStore::erase(const std::string& id) {
    std::lock_guard lock(mutex_);
    const auto it = slots_.find(id);
    if (it == slots_.end()) return false;
    drop_locked(it);
    return true;
}

size_t ResponseStore::size() const {
    std::lock_guard lock(mutex_);
    return slots_.size();
}

void ResponseStore::evict_locked() {
    // The newest entry stays even when it alone is over max_bytes: its follow-up must work.
    while (slots_.size() > 1 && (slots_.size() > max_entries_ || bytes_ > max_bytes_))
        drop_locked(slots_.find(lru_.back()));
}

} // namespace ninfer::server
