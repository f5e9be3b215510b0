// Liveness of sessions on every engine (meta_liveness.cc): a client whose heartbeat commits
// before another ends its session keeps it; a client whose session was ended writes nothing
// more under it, learns of it, and goes on in a new session.
#include <fcntl.h>

#include <condition_variable>
#include <mutex>
#include <thread>

#include "common/clock.h"
#include "meta/hook_engine_for_test.h"
#include "meta/key_schema.h"
#include "meta/meta_test_fixture.h"

namespace tierfs::meta_testing {
namespace {

template <typename Kind>
using LivenessTest = MetaTest<Kind>;

}  // namespace

TYPED_TEST_SUITE(LivenessTest, Engines);

// The purge reads the heartbeat again in the transaction that ends the session: a heartbeat
// that commits between the purger's scan and its purge keeps the session alive (before,
// the purger decided in the scan and purged later without looking again).
TYPED_TEST(LivenessTest, HeartbeatBetweenScanAndPurgeKeepsTheSession) {
  Meta& a = *this->m_;
  Ino f = this->File("f");
  ASSERT_TRUE(a.Flock(f, 1, F_WRLCK).ok());
  const uint64_t sid = a.sid();
  auto setHeartbeat = [&](int64_t ns) {
    ASSERT_TRUE(a.engine()
                    ->Txn([&](KvTxn& t) {
                      return t.Put(keys::Heartbeat(sid), keys::EncodeU64(static_cast<uint64_t>(ns)));
                    })
                    .ok());
  };
  setHeartbeat(NowNanos() - 30'000'000'000);  // silent for 30 s

  auto inner = OpenKvEngine(this->url_);
  ASSERT_TRUE(inner.ok());
  auto hook = std::make_unique<testing::HookEngine>(std::move(*inner));
  testing::HookEngine* hooks = hook.get();
  MetaOptions o;
  o.session_timeout_ns = 10'000'000'000;
  auto b = Meta::Open(std::move(hook), o);
  ASSERT_TRUE(b.ok());
  ASSERT_TRUE((*b)->NewSession(SessionInfo{}).ok());
  // Right after the purger's scan found the session silent, its heartbeat commits.
  hooks->AfterNextRead([&] { setHeartbeat(NowNanos()); });
  ASSERT_TRUE((*b)->RunCleanupOnce().ok());

  auto sessions = (*b)->ListSessions();
  ASSERT_TRUE(sessions.ok());
  EXPECT_EQ(sessions->size(), 2u) << "a session that beat in time was ended";
  EXPECT_TRUE((*b)->ListPurgedSessions()->empty());
  EXPECT_EQ((*b)->Flock(f, 2, F_WRLCK).code(), EAGAIN) << "the live client's lock was dropped";

  // Silent again, and nobody beats: now it is ended, and the record says so.
  setHeartbeat(NowNanos() - 30'000'000'000);
  ASSERT_TRUE((*b)->RunCleanupOnce().ok());
  EXPECT_EQ((*b)->ListSessions()->size(), 1u);
  auto purged = (*b)->ListPurgedSessions();
  ASSERT_TRUE(purged.ok());
  ASSERT_EQ(purged->size(), 1u);
  EXPECT_EQ((*purged)[0].info.sid, sid);
  EXPECT_EQ((*purged)[0].info.host, "test");
  EXPECT_EQ((*purged)[0].purged_by, (*b)->sid());
  EXPECT_TRUE((*purged)[0].done);
  EXPECT_TRUE((*b)->Flock(f, 2, F_WRLCK).ok());
}

// A client whose session was ended writes nothing more under it (its lease has expired, so
// every such transaction looks for the session), learns of the loss, and goes on in a new
// session; what it held open after an unlink is reported to it as gone.
TYPED_TEST(LivenessTest, EndedClientIsFencedAndResumes) {
  MetaOptions silent;
  silent.session_timeout_ns = 1;  // its lease is never fresh; every other session looks dead
  auto ea = OpenKvEngine(this->url_);
  ASSERT_TRUE(ea.ok());
  auto a = Meta::Open(std::move(*ea), silent);
  ASSERT_TRUE(a.ok());
  SessionInfo info;
  info.host = "client-a";
  info.mountpoint = "/mnt/a";
  ASSERT_TRUE((*a)->NewSession(info).ok());
  std::vector<SessionLoss> losses;
  (*a)->SetSessionLossHandler([&](const SessionLoss& l) { losses.push_back(l); });
  const uint64_t old_sid = (*a)->sid();

  auto f = (*a)->Mknod(this->root_, kRootIno, "locked", S_IFREG | 0644, 0);
  ASSERT_TRUE(f.ok());
  ASSERT_TRUE((*a)->Flock(f->first, 7, F_WRLCK).ok());
  auto free_file = (*a)->Mknod(this->root_, kRootIno, "free", S_IFREG | 0644, 0);
  ASSERT_TRUE(free_file.ok());
  auto g = (*a)->Mknod(this->root_, kRootIno, "held", S_IFREG | 0644, 0);
  ASSERT_TRUE(g.ok());
  ASSERT_TRUE((*a)->Open(this->root_, g->first, O_RDONLY).ok());
  ASSERT_TRUE((*a)->Unlink(this->root_, kRootIno, "held").ok());
  auto before = this->m_->GetStatFs();
  ASSERT_TRUE(before.ok());

  // Another client (with a 1 ns timeout, everybody else is silent) ends a's session.
  auto eb = OpenKvEngine(this->url_);
  ASSERT_TRUE(eb.ok());
  auto b = Meta::Open(std::move(*eb), silent);
  ASSERT_TRUE(b.ok());
  ASSERT_TRUE((*b)->NewSession(SessionInfo{}).ok());
  std::this_thread::sleep_for(std::chrono::milliseconds(2));
  ASSERT_TRUE((*b)->RunCleanupOnce().ok());
  EXPECT_TRUE((*b)->Flock(f->first, 9, F_WRLCK).ok()) << "the ended session's lock is gone";
  EXPECT_EQ((*b)->GetAttr(g->first).status().code(), ENOENT) << "its open-unlinked file is freed";

  // a, not knowing yet: nothing that names its old session gets written.
  Status lock = (*a)->Flock(free_file->first, 8, F_WRLCK);
  EXPECT_EQ(lock.code(), EIO) << lock.ToString();
  EXPECT_TRUE((*b)->Flock(free_file->first, 9, F_WRLCK).ok()) << "a lock of the ended session was written";
  auto made = (*a)->Mknod(this->root_, kRootIno, "late", S_IFREG | 0644, 0);
  EXPECT_EQ(made.status().code(), EIO) << made.status().ToString();
  EXPECT_EQ((*b)->Lookup(this->root_, kRootIno, "late").status().code(), ENOENT);
  EXPECT_TRUE(losses.empty());

  // It checks, finds out, and registers anew.
  ASSERT_TRUE((*a)->CheckSession().ok());
  ASSERT_EQ(losses.size(), 1u);
  EXPECT_EQ(losses[0].old_sid, old_sid);
  EXPECT_EQ(losses[0].new_sid, (*a)->sid());
  EXPECT_NE((*a)->sid(), old_sid);
  EXPECT_EQ(losses[0].sustained.count(g->first), 1u);
  auto purged = (*b)->ListPurgedSessions();  // the fixture's own client was silent too
  ASSERT_TRUE(purged.ok());
  bool recorded = false;
  for (const auto& p : *purged) {
    if (p.info.sid != old_sid) continue;
    recorded = true;
    EXPECT_EQ(p.purged_by, (*b)->sid());
    EXPECT_EQ(p.info.mountpoint, "/mnt/a");
    EXPECT_NE(losses[0].purged_by.find(p.purged_by_host + " (session " + std::to_string(p.purged_by) + ")"),
              std::string::npos)
        << losses[0].purged_by;
  }
  EXPECT_TRUE(recorded);
  EXPECT_EQ((*a)->session_losses(), 1u);

  auto again = (*a)->Mknod(this->root_, kRootIno, "late", S_IFREG | 0644, 0);
  EXPECT_TRUE(again.ok()) << again.status().ToString();
  bool found = false;
  auto listed = (*b)->ListSessions();
  ASSERT_TRUE(listed.ok());
  for (const auto& s : *listed) {
    if (s.sid != (*a)->sid()) continue;
    found = true;
    EXPECT_EQ(s.resumed_from, old_sid);
    EXPECT_EQ(s.lost_files, 1u);
    EXPECT_EQ(s.host, "client-a");
    EXPECT_EQ(s.mountpoint, "/mnt/a");
    EXPECT_GT(s.lost_ns, 0);
  }
  EXPECT_TRUE(found) << "the resumed session is not listed";
  // Usage stays exact across the loss: the old session's shares were folded once, and the
  // refused create counted nothing.
  auto after = this->m_->GetStatFs();
  ASSERT_TRUE(after.ok());
  EXPECT_EQ(after->inodes, before->inodes);  // "held" freed (-1), "late" made (+1)
}

// The heartbeat does not wait for the background cleaner: while deleting a slice's blocks
// hangs (a store where each DELETE takes long), heartbeats keep committing.
TYPED_TEST(LivenessTest, HeartbeatGoesOnWhileCleanupIsBlocked) {
  auto engine = OpenKvEngine(this->url_);
  ASSERT_TRUE(engine.ok());
  MetaOptions o;
  o.heartbeat_ns = 20'000'000;  // 20 ms
  auto m = Meta::Open(std::move(*engine), o);
  ASSERT_TRUE(m.ok());
  ASSERT_TRUE((*m)->NewSession(SessionInfo{}).ok());
  auto f = (*m)->Mknod(this->root_, kRootIno, "f", S_IFREG | 0644, 0);
  ASSERT_TRUE(f.ok());
  auto id = (*m)->NewSliceId();
  ASSERT_TRUE(id.ok());
  SliceRecord rec;
  rec.id = *id;
  rec.size = rec.len = 100;
  ASSERT_TRUE((*m)->WriteSlice(f->first, 0, rec, 100, 1).ok());
  ASSERT_TRUE((*m)->Unlink(this->root_, kRootIno, "f").ok());

  std::mutex mu;
  std::condition_variable cv;
  bool entered = false, release = false;
  (*m)->StartBackground([&](uint64_t, uint32_t) {
    std::unique_lock<std::mutex> l(mu);
    entered = true;
    cv.notify_all();
    cv.wait(l, [&] { return release; });
    return Status::OK();
  });
  auto heartbeat = [&] {
    uint64_t v = 0;
    EXPECT_TRUE((*m)->engine()
                    ->Txn(
                        [&](KvTxn& t) {
                          ASSIGN_OR_RETURN(auto hb, t.Get(keys::Heartbeat((*m)->sid())));
                          v = hb ? keys::DecodeU64(*hb) : 0;
                          return Status::OK();
                        },
                        true)
                    .ok());
    return v;
  };
  {
    std::unique_lock<std::mutex> l(mu);
    ASSERT_TRUE(cv.wait_for(l, std::chrono::seconds(30), [&] { return entered; })) << "the cleaner never ran";
  }
  // The cleaner is stuck in a delete now; heartbeats must still commit.
  uint64_t first = heartbeat();
  bool moved = false;
  for (int i = 0; i < 300 && !moved; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    moved = heartbeat() > first;
  }
  EXPECT_TRUE(moved) << "no heartbeat while the cleaner was blocked";
  EXPECT_TRUE((*m)->LeaseFresh());
  {
    std::lock_guard<std::mutex> l(mu);
    release = true;
  }
  cv.notify_all();
  (*m)->StopBackground();
}

}  // namespace tierfs::meta_testing
