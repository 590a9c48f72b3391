// The Responses API's store (server/response_store.h): least recently used out past the entry
// and byte bounds, a get refreshes, the newest stays even over the byte bound, and a store of
// size 0 keeps nothing.
#include <gtest/gtest.h>

#include <string>

#include "server/response_store.h"

namespace ninfer::server {
namespace {

using Json = nlohmann::ordered_json;

ResponseStore::Entry entry(const std::string& text, size_t pad = 0) {
    return {Json::array({{{"role", "user"}, {"content", text + std::string(pad, ' ')}}}),
            {{"id", text}, {"output", Json::array({{{"type", "message"}, {"id", "m"}}})}}};
}

TEST(ResponseStore, LeastRecentlyUsedGoFirst) {
    ResponseStore store(2);
    store.put("a", entry("a"));
    store.put("b", entry("b"));
    ASSERT_TRUE(store.get("a")); // a is now the most recently used
    store.put("c", entry("c"));
    EXPECT_TRUE(store.get("a"));
    EXPECT_FALSE(store.get("b"));
    EXPECT_TRUE(store.get("c"));
    EXPECT_EQ(store.size(), 2u);
    EXPECT_TRUE(store.erase("a"));
    EXPECT_FALSE(store.erase("a"));
    EXPECT_EQ(store.size(), 1u);
}

TEST(ResponseStore, ConversationIsInputThenOutput) {
    ResponseStore store(4);
    store.put("a", entry("hello"));
    const Json conversation = store.get("a")->conversation();
    ASSERT_EQ(conversation.size(), 2u);
    EXPECT_EQ(conversation[0]["content"], "hello");
    EXPECT_EQ(conversation[1]["type"], "message");
}

TEST(ResponseStore, ByteBoundKeepsTheNewest) {
    ResponseStore store(100, 1000);
    store.put("a", entry("a", 400));
    store.put("b", entry("b", 400));
    EXPECT_TRUE(store.get("a"));
    store.put("c", entry("c", 400)); // over 1,000 bytes: b (least recently used) goes
    EXPECT_FALSE(store.get("b"));
    EXPECT_TRUE(store.get("c"));
    store.put("huge", entry("huge", 5000)); // alone over the bound: it stays, the rest go
    EXPECT_TRUE(store.get("huge"));
    EXPECT_EQ(store.size(), 1u);
    store.put("huge", entry("small")); // replacing an id frees its old bytes
    store.put("d", entry("d"));
    EXPECT_EQ(store.size(), 2u);
}

TEST(ResponseStore, ItemsByIdWhileTheirResponseIsStored) {
    ResponseStore store(2);
    ResponseStore::Entry a = entry("a");
    a.response["output"][0]["id"] = "msg_a";
    store.put("a", a);
    ASSERT_TRUE(store.item("msg_a"));
    EXPECT_EQ((*store.item("msg_a"))["type"], "message");
    EXPECT_FALSE(store.item("msg_none"));
    ResponseStore::Entry b = entry("b"); // continues a: its conversation repeats msg_a
    b.input = a.conversation();
    b.response["output"][0]["id"] = "msg_b";
    store.put("b", b);
    EXPECT_TRUE(store.erase("a"));
    EXPECT_TRUE(store.item("msg_a")); // b still holds it
    store.put("c", entry("c"));
    store.put("d", entry("d")); // b is evicted: its items go with it
    EXPECT_FALSE(store.item("msg_a"));
    EXPECT_FALSE(store.item("msg_b"));
}

TEST(ResponseStore, SizeZeroKeepsNothing) {
    ResponseStore store(0);
    EXPECT_FALSE(store.enabled());
    store.put("a", entry("a"));
    EXPECT_FALSE(store.get("a"));
    EXPECT_EQ(store.size(), 0u);
}

} // namespace
} // namespace ninfer::server
