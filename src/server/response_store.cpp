#include "server/response_store.h"

namespace ninfer::server {

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
    for (const auto& item : entry.conversation())
        if (item.is_object() && item.contains("id") && item["id"].is_string())
            item_owner_[item["id"].get<std::string>()] = id;
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
    for (const auto& item : it->second.entry.conversation())
        if (item.is_object() && item.value("id", nlohmann::ordered_json()) == item_id) return item;
    return std::nullopt;
}

void ResponseStore::drop_locked(std::unordered_map<std::string, Slot>::iterator it) {
    // Its items' index entries, unless a later response (which repeats its conversation) owns them.
    for (const auto& item : it->second.entry.conversation())
        if (item.is_object() && item.contains("id") && item["id"].is_string()) {
            const auto owner = item_owner_.find(item["id"].get<std::string>());
            if (owner != item_owner_.end() && owner->second == it->first) item_owner_.erase(owner);
        }
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
