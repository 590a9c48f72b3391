// Stored responses of the Responses API (`store`, true by default there, as OpenAI keeps them):
// each response's conversation as Responses input items, so that a follow-up names it by
// `previous_response_id` (or an item by an `item_reference`) instead of sending the items again,
// and GET / DELETE /v1/responses/{id} and GET /v1/responses/{id}/input_items read it. In memory
// and bounded: past `max_entries` responses or `max_bytes` of their JSON, the least recently used
// go first (a follow-up of an evicted one is a 400 naming it, as for an unknown id).
#pragma once

#include <cstddef>
#include <list>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>

#include <nlohmann/json.hpp>

namespace ninfer::server {

class ResponseStore {
public:
    struct Entry {
        nlohmann::ordered_json input;    // the items before this response's output: the items of
                                         // its previous_response_id chain, then its own input
        nlohmann::ordered_json response; // the Response object as returned
        // The conversation a follow-up continues: input, then the response's output items.
        nlohmann::ordered_json conversation() const;
    };

    // max_entries 0: nothing is stored (previous_response_id is refused).
    explicit ResponseStore(size_t max_entries = 0, size_t max_bytes = size_t(1) << 30);
    bool enabled() const { return max_entries_ > 0; }

    void put(const std::string& id, Entry entry);
    std::optional<Entry> get(const std::string& id); // and marks it recently used
    bool erase(const std::string& id);
    // The item with this "id" among the stored conversations (an item_reference's target).
    std::optional<nlohmann::ordered_json> item(const std::string& item_id);
    size_t size() const;

private:
    struct Slot {
        Entry entry;
        size_t bytes = 0;
        std::list<std::string>::iterator lru;
    };
    void evict_locked();
    void drop_locked(std::unordered_map<std::string, Slot>::iterator it);

    size_t max_entries_, max_bytes_;
    mutable std::mutex mutex_;
    std::list<std::string> lru_; // front: most recently used
    std::unordered_map<std::string, Slot> slots_;
    std::unordered_map<std::string, std::string> item_owner_; // item id -> response id
    size_t bytes_ = 0;
};

} // namespace ninfer::server
