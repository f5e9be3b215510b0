// The Redis engine's change notification (redis_watch.h) against throwaway redis-server
// processes: other clients' commits arrive once each, whole and in order, the engine's own
// do not; a restart is reported as "everything may have changed" and the watch goes on;
// volumes in other databases of the server are not heard; a user whom ACLs deny the
// channel cannot watch but still commits.
#include "meta/redis_watch.h"

#include <gtest/gtest.h>

#include <chrono>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "meta/kv_engine.h"
#include "meta/redis_test_util.h"
#include "meta/watch_collector_for_test.h"

namespace tierfs {
namespace {

using redis_test::RawClient;
using redis_test::ThrowawayRedis;
using testing_engines::Collected;

Status Put(KvEngine& e, const std::string& k, const std::string& v) {
  return e.Txn([&](KvTxn& t) { return t.Put(k, v); });
}

std::unique_ptr<KvEngine> MustOpen(const std::string& url) {
  auto e = OpenKvEngine(url);
  EXPECT_TRUE(e.ok()) << url << ": " << e.status().ToString();
  return e.ok() ? std::move(e).value() : nullptr;
}

TEST(RedisWatch, ParsesPublishedCommits) {
  std::string marker;
  std::vector<std::string> keys;
  ASSERT_TRUE(redis::ParseChange(std::string("xabc\n3:a:b0:5:\n\0xyz", 19), &marker, &keys));
  EXPECT_EQ(marker, "xabc");
  EXPECT_EQ(keys, (std::vector<std::string>{"a:b", "", std::string("\n\0xyz", 5)}));
  ASSERT_TRUE(redis::ParseChange("xm\n", &marker, &keys));
  EXPECT_TRUE(keys.empty());
  for (const char* bad : {"no newline", "x\n3:ab", "x\n:a", "x\nq:a", "x\n99999999999:a", "x\n1:a2"}) {
    EXPECT_FALSE(redis::ParseChange(bad, &marker, &keys)) << bad;
  }
}

TEST(RedisWatch, ReportsOtherClientsCommitsOnceEachButNotItsOwn) {
  ThrowawayRedis server;
  ASSERT_TRUE(server.ok());
  auto a = MustOpen(server.Url(1)), b = MustOpen(server.Url(1));
  ASSERT_TRUE(a && b);
  Collected got;
  ASSERT_TRUE(a->Watch(got.Fn()).ok());
  EXPECT_EQ(a->Watch(got.Fn()).code(), EBUSY);
  // Every commit after Watch returned is reported: it subscribed before returning.
  ASSERT_TRUE(Put(*b, "theirs", "1").ok());
  ASSERT_TRUE(Put(*a, "mine", "1").ok());
  ASSERT_TRUE(b->Txn([](KvTxn& t) {
                 RETURN_IF_ERROR(t.Put("t2", "2"));
                 RETURN_IF_ERROR(t.Put(std::string("bin\0\n:9", 7), "3"));
                 return t.Delete("theirs");
               })
                  .ok());
  EXPECT_TRUE(got.WaitFor({"theirs"}));
  // One commit, one call: written keys, then deleted ones.
  EXPECT_TRUE(got.WaitFor({std::string("bin\0\n:9", 7), "t2", "theirs"}));
  // A transaction that only reads publishes nothing.
  ASSERT_TRUE(b->Txn([](KvTxn& t) { return t.Get("t2").status(); }, true).ok());
  ASSERT_TRUE(Put(*b, "last", "1").ok());
  EXPECT_TRUE(got.WaitFor({"last"}));
  EXPECT_FALSE(got.Mentions("mine"));
  {
    std::lock_guard<std::mutex> l(got.mu);
    EXPECT_EQ(got.batches.size(), 3u);
    EXPECT_EQ(got.alls, 0);
  }
  // Stopped: nothing more is reported, and a new watch may start.
  ASSERT_TRUE(a->Watch(nullptr).ok());
  ASSERT_TRUE(Put(*b, "after", "1").ok());
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  EXPECT_FALSE(got.Mentions("after"));
  Collected again;
  ASSERT_TRUE(a->Watch(again.Fn()).ok());
  ASSERT_TRUE(Put(*b, "again", "1").ok());
  EXPECT_TRUE(again.WaitFor({"again"}));
  EXPECT_TRUE(a->Watch(nullptr).ok());  // before `again` goes
}

TEST(RedisWatch, SaysWhichInodesAndNamesChanged) {
  ThrowawayRedis server;
  ASSERT_TRUE(server.ok());
  auto a = MustOpen(server.Url(0)), b = MustOpen(server.Url(0));
  ASSERT_TRUE(a && b);
  testing_engines::ExpectWatchSaysWhichInodesAndNamesChanged(a.get(), b.get());
}

TEST(RedisWatch, OtherDatabasesOfTheServerAreNotHeard) {
  ThrowawayRedis server;
  ASSERT_TRUE(server.ok());
  auto a = MustOpen(server.Url(2)), same = MustOpen(server.Url(2)), other = MustOpen(server.Url(3));
  ASSERT_TRUE(a && same && other);
  Collected got;
  ASSERT_TRUE(a->Watch(got.Fn()).ok());
  ASSERT_TRUE(Put(*other, "elsewhere", "1").ok());
  ASSERT_TRUE(Put(*same, "here", "1").ok());
  EXPECT_TRUE(got.WaitFor({"here"}));  // published after "elsewhere": it had its chance
  EXPECT_FALSE(got.Mentions("elsewhere"));
  ASSERT_TRUE(a->Watch(nullptr).ok());
}

// The server is killed and restarted: the watch says everything may have changed once it
// is subscribed again (commits in the gap were not heard), then reports commits as before.
TEST(RedisWatch, ARestartIsReportedAsEverythingChangedAndTheWatchGoesOn) {
  ThrowawayRedis server;
  ASSERT_TRUE(server.ok());
  auto a = MustOpen(server.Url(0)), b = MustOpen(server.Url(0));
  ASSERT_TRUE(a && b);
  Collected got;
  ASSERT_TRUE(a->Watch(got.Fn()).ok());
  ASSERT_TRUE(Put(*b, "before", "1").ok());
  EXPECT_TRUE(got.WaitFor({"before"}));
  EXPECT_EQ(got.Alls(), 0);
  server.Kill();
  server.Start();
  for (int i = 0; i < 200 && got.Alls() == 0; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(50));
  EXPECT_EQ(got.Alls(), 1);
  ASSERT_TRUE(Put(*b, "after", "1").ok());
  EXPECT_TRUE(got.WaitFor({"after"}));
  ASSERT_TRUE(a->Watch(nullptr).ok());
}

// A user denied every channel (Redis 7's default for new ACL users) cannot watch: Watch
// says how to grant it; the user's commits still apply (the script's PUBLISH is a pcall).
TEST(RedisWatch, AUserDeniedTheChannelCannotWatchButStillCommits) {
  ThrowawayRedis server;
  ASSERT_TRUE(server.ok());
  RawClient admin(server.port(), 0);
  ASSERT_EQ(admin.Command({"ACL", "SETUSER", "noch", "on", ">pw", "~*", "+@all", "resetchannels"}), "OK");
  auto a = MustOpen(server.Url(0, "noch:pw@"));
  ASSERT_TRUE(a);
  Collected got;
  Status st = a->Watch(got.Fn());
  EXPECT_EQ(st.code(), EACCES) << st.ToString();
  EXPECT_NE(st.message().find("ACL SETUSER"), std::string::npos) << st.message();
  ASSERT_TRUE(Put(*a, "k", "v").ok());
  std::string v;
  ASSERT_TRUE(a->Txn([&](KvTxn& t) -> Status {
                 ASSIGN_OR_RETURN(auto got, t.Get("k"));
                 v = got.value_or("");
                 return Status::OK();
               })
                  .ok());
  EXPECT_EQ(v, "v");
  // A watch that was refused can be asked for again (nothing was left half set up).
  EXPECT_EQ(a->Watch(got.Fn()).code(), EACCES);
}

}  // namespace
}  // namespace tierfs
