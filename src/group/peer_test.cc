// A member's server and another member's CacheGroup on 127.0.0.1, with membership through
// two sessions of one in-memory volume: the block arrives verified; a damaged reply, a
// wrong secret, another volume's key and a dead owner all fail (so the caller goes to the
// store), and a dead owner is skipped after its first failure.
#include <gtest/gtest.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <map>
#include <mutex>
#include <thread>

#include "chunk/block_key.h"
#include "group/cache_group.h"
#include "group/peer_server.h"
#include "meta/kv_engine.h"
#include "meta/meta.h"

namespace tierfs::group {
namespace {

constexpr uint64_t kGiB = 1ull << 30;
std::atomic<int> g_n{0};

class PeerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    name_ = "peer_test_" + std::to_string(g_n++);
    auto engine = OpenKvEngine("mem://" + name_);
    ASSERT_TRUE(engine.ok());
    FormatRecord rec;
    rec.name = "vol";
    rec.uuid = "uuid-" + name_;
    rec.storage = "mem";
    rec.bucket = name_;
    ASSERT_TRUE(Meta::Format(engine->get(), rec, false).ok());
    auto secret = Meta::GroupSecret(engine->get());
    ASSERT_TRUE(secret.ok()) << secret.status().ToString();
    secret_ = *secret;
    ASSERT_EQ(secret_.size(), 64u);
    auto again = Meta::GroupSecret(engine->get());
    ASSERT_TRUE(again.ok());
    EXPECT_EQ(*again, secret_) << "the secret is made once";
    owner_meta_ = OpenMeta();
    reader_meta_ = OpenMeta();
  }
  void TearDown() override {
    reader_.reset();
    server_.reset();
  }
  std::unique_ptr<Meta> OpenMeta() {
    auto engine = OpenKvEngine("mem://" + name_);
    EXPECT_TRUE(engine.ok());
    auto m = Meta::Open(std::move(*engine));
    EXPECT_TRUE(m.ok());
    SessionInfo info;
    info.host = "test";
    info.cache_group = "g";
    EXPECT_TRUE((*m)->NewSession(info).ok());
    return std::move(*m);
  }
  // The owner: a server whose provider serves blocks_ (or fails for keys it lacks).
  void StartOwner(std::string secret = "") {
    PeerServerOptions o;
    o.host = "127.0.0.1";
    o.volume_name = "vol";
    o.volume_uuid = "uuid-" + name_;
    o.secret = secret.empty() ? secret_ : secret;
    server_ = std::make_unique<PeerServer>(o, [this](const std::string& key, uint32_t, bool) -> Result<std::shared_ptr<const std::string>> {
      if (delay_ms_ > 0) std::this_thread::sleep_for(std::chrono::milliseconds(delay_ms_.load()));
      std::lock_guard<std::mutex> l(mu_);
      provided_++;
      auto it = blocks_.find(key);
      if (it == blocks_.end()) return Status::Err(EIO, "block " + key + " is missing from object storage");
      return it->second;
    });
    ASSERT_TRUE(server_->Start().ok());
    owner_addr_ = "127.0.0.1:" + std::to_string(server_->port());
    ASSERT_TRUE(owner_meta_->UpdateSession([&](SessionInfo& s) {
      s.group_addr = owner_addr_;
      s.group_capacity = 10 * kGiB;
    }).ok());
  }
  CacheGroupOptions Options() {
    CacheGroupOptions o;
    o.name = "g";
    o.volume_name = "vol";
    o.volume_uuid = "uuid-" + name_;
    o.secret = secret_;
    return o;
  }
  void StartReader(std::string secret = "") {
    CacheGroupOptions o = Options();
    if (!secret.empty()) o.secret = secret;
    o.connect_timeout_ms = 300;
    o.request_timeout_ms = 2000;
    o.down_ms = 60000;
    reader_ = std::make_unique<CacheGroup>(reader_meta_.get(), o);
    ASSERT_TRUE(reader_->Refresh().ok());
  }
  // An ask without a hedge.
  static Result<std::shared_ptr<const std::string>> Get(CacheGroup* g, const std::string& key, uint32_t len) {
    bool from_peer = false;
    auto got = g->Fetch(key, len, {}, &from_peer);
    EXPECT_EQ(from_peer, got.ok());
    return got;
  }
  std::string AddBlock(uint64_t id, uint32_t len) {
    std::string key = BlockKey("vol", id, 0, len);
    auto data = std::make_shared<std::string>(len, '\0');
    for (uint32_t i = 0; i < len; ++i) (*data)[i] = static_cast<char>(i * 7 + id);
    std::lock_guard<std::mutex> l(mu_);
    blocks_[key] = data;
    return key;
  }

  std::string name_, secret_, owner_addr_;
  std::unique_ptr<Meta> owner_meta_, reader_meta_;
  std::unique_ptr<PeerServer> server_;
  std::unique_ptr<CacheGroup> reader_;
  std::mutex mu_;
  std::map<std::string, std::shared_ptr<const std::string>> blocks_;
  int provided_ = 0;
  std::atomic<int> delay_ms_{0};
};

TEST_F(PeerTest, MembersComeFromSessionsAndTheBlockArrivesVerified) {
  StartOwner();
  StartReader();
  auto members = reader_->members();
  ASSERT_EQ(members.size(), 2u);  // the owner and this reader (not serving)
  EXPECT_EQ(reader_->stats().members, 1u);
  std::string key = AddBlock(1, 300000);
  EXPECT_EQ(reader_->OwnerOf(key), owner_addr_);
  auto got = Get(reader_.get(), key, 300000);
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  EXPECT_EQ(**got, *blocks_[key]);
  EXPECT_EQ(reader_->stats().received, 1u);
  EXPECT_EQ(server_->stats().served, 1u);
  // A block the owner cannot get: an error, so the caller reads the store itself.
  auto missing = Get(reader_.get(), BlockKey("vol", 99, 0, 1000), 1000);
  EXPECT_FALSE(missing.ok());
  EXPECT_EQ(reader_->stats().refused, 1u);
}

TEST_F(PeerTest, ADamagedReplyIsNeverUsed) {
  StartOwner();
  StartReader();
  server_->set_corrupt_replies(true);
  std::string key = AddBlock(2, 100000);
  auto got = Get(reader_.get(), key, 100000);
  ASSERT_FALSE(got.ok());
  EXPECT_EQ(got.status().code(), EIO);
  EXPECT_EQ(reader_->stats().damaged, 1u);
  EXPECT_EQ(reader_->stats().received, 0u);
}

TEST_F(PeerTest, AWrongSecretIsRefused) {
  StartOwner();
  StartReader(std::string(64, 'f'));
  std::string key = AddBlock(3, 1000);
  auto got = Get(reader_.get(), key, 1000);
  EXPECT_FALSE(got.ok());
  EXPECT_EQ(server_->stats().refused, 1u);
  EXPECT_EQ(server_->stats().served, 0u);
  EXPECT_EQ(provided_, 0) << "nothing is fetched for a caller without the secret";
}

TEST_F(PeerTest, OnlyBlocksOfItsVolumeAreServed) {
  StartOwner();
  StartReader();
  // Signed correctly, but the key names another volume: refused before the provider.
  auto got = Get(reader_.get(), BlockKey("other", 4, 0, 1000), 1000);
  EXPECT_FALSE(got.ok());
  EXPECT_EQ(server_->stats().refused, 1u);
  EXPECT_EQ(provided_, 0);
}

TEST_F(PeerTest, ADeadOwnerFailsOnceThenIsSkipped) {
  StartOwner();
  StartReader();
  server_->Stop();
  std::string key = AddBlock(5, 1000);
  auto got = Get(reader_.get(), key, 1000);
  EXPECT_FALSE(got.ok());
  EXPECT_EQ(reader_->stats().unreachable, 1u);
  auto again = Get(reader_.get(), key, 1000);
  EXPECT_EQ(again.status().code(), EHOSTDOWN);
  EXPECT_EQ(reader_->stats().skipped_down, 1u);
}

// A slow owner is raced by the store after the hedge delay; a prompt one is not.
TEST_F(PeerTest, ASlowOwnerIsRacedByTheStore) {
  StartOwner();
  CacheGroupOptions o = Options();
  o.hedge_ms = 100;
  CacheGroup reader(reader_meta_.get(), o);
  ASSERT_TRUE(reader.Refresh().ok());
  std::string key = AddBlock(8, 5000);
  auto from_store = std::make_shared<const std::string>("from the store");
  int store_gets = 0;
  auto store = [&]() -> Result<std::shared_ptr<const std::string>> {
    store_gets++;
    return from_store;
  };
  bool from_peer = false;
  auto got = reader.Fetch(key, 5000, store, &from_peer);
  ASSERT_TRUE(got.ok());
  EXPECT_TRUE(from_peer);
  EXPECT_EQ(store_gets, 0);
  // A busy owner answers other asks meanwhile and is waited for; this one answers nothing
  // for longer than the hedge delay, as a hung one would.
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  delay_ms_ = 1500;
  auto t0 = std::chrono::steady_clock::now();
  got = reader.Fetch(key, 5000, store, &from_peer);
  ASSERT_TRUE(got.ok());
  EXPECT_FALSE(from_peer);
  EXPECT_EQ(*got, from_store);
  EXPECT_EQ(store_gets, 1);
  EXPECT_EQ(reader.stats().hedged, 1u);
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::milliseconds(1400)) << "the hedge did not wait for the owner";
  // The destructor waits for the owner's late answer; nothing touches freed state.
}

TEST_F(PeerTest, AMemberThatOwnsTheBlockAsksNobody) {
  StartOwner();
  CacheGroupOptions o = Options();
  o.self_addr = owner_addr_;  // the owner's own view: it is the only serving member
  o.capacity = 10 * kGiB;
  CacheGroup self(owner_meta_.get(), o);
  ASSERT_TRUE(self.Refresh().ok());
  auto got = Get(&self, AddBlock(6, 1000), 1000);
  EXPECT_EQ(got.status().code(), ENODATA);
  EXPECT_EQ(server_->stats().served, 0u);
}

TEST_F(PeerTest, ASilentMemberLeavesTheRing) {
  StartOwner();
  CacheGroupOptions o = Options();
  o.member_timeout_ns = 1;  // every other member's heartbeat is older than this
  CacheGroup strict(reader_meta_.get(), o);
  ASSERT_TRUE(strict.Refresh().ok());
  EXPECT_EQ(strict.stats().members, 0u);
  EXPECT_EQ(Get(&strict, AddBlock(7, 1000), 1000).status().code(), ENODATA);
}

TEST_F(PeerTest, ASecondServerOnATakenPortFailsToStart) {
  StartOwner();
  PeerServerOptions o;
  o.host = "127.0.0.1";
  o.port = server_->port();
  o.volume_name = "vol";
  o.volume_uuid = "uuid-" + name_;
  o.secret = secret_;
  PeerServer second(o, [](const std::string&, uint32_t, bool) -> Result<std::shared_ptr<const std::string>> {
    return Status::Err(EIO, "never asked");
  });
  Status st = second.Start();
  EXPECT_EQ(st.code(), EADDRINUSE) << st.ToString();
  EXPECT_NE(st.message().find("in use"), std::string::npos) << st.ToString();
}

}  // namespace
}  // namespace tierfs::group
