// The fixture of the metadata semantics suite (meta_test.cc, meta_acl_test.cc, one
// binary): every TYPED_TEST(MetaTest, ...) runs against each engine, real servers
// included. Test code only.
#pragma once

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "meta/engine_for_test.h"
#include "meta/kv_engine.h"
#include "meta/meta.h"

namespace tierfs::meta_testing {

using testing_engines::ServerUrl;

inline std::atomic<int> g_counter{0};

struct MemEngineKind {
  static std::string Url() { return "mem://meta_test_" + std::to_string(g_counter++); }
};

// The SQLite files' directories, removed when the test process exits (a test may reopen
// its URL until then); they were left behind in the temporary directory, 70 per run.
struct TempDirs {
  std::mutex mu;
  std::vector<std::filesystem::path> dirs;
  ~TempDirs() {
    std::error_code ec;
    for (const auto& d : dirs) std::filesystem::remove_all(d, ec);
  }
};
inline TempDirs g_temp_dirs;

struct SqliteEngineKind {
  static std::string Url() {
    auto dir = std::filesystem::temp_directory_path() /
               ("tierfs_meta_test_" + std::to_string(getpid()) + "_" + std::to_string(g_counter++));
    std::filesystem::remove_all(dir);
    std::filesystem::create_directories(dir);
    {
      std::lock_guard<std::mutex> l(g_temp_dirs.mu);
      g_temp_dirs.dirs.push_back(dir);
    }
    return "sqlite3://" + (dir / "meta.db").string();
  }
};

struct RedisEngineKind {
  // Database 1 of the test server; kv_engine_test uses database 2.
  static std::string Url() { return ServerUrl("TIERFS_TEST_REDIS_URL", "/1"); }
};

struct PostgresEngineKind {
  static std::string Url() { return ServerUrl("TIERFS_TEST_PG_URL", "/tierfs_meta_test"); }
};

struct EtcdEngineKind {
  // Prefix meta_test/ of the test cluster (three members); kv_engine_test uses kv_test/.
  static std::string Url() { return ServerUrl("TIERFS_TEST_ETCD_URL", "meta_test"); }
};

template <typename Kind>
class MetaTest : public ::testing::Test {
 protected:
  void SetUp() override {
    url_ = Kind::Url();
    if (url_.empty()) GTEST_SKIP() << "no test server: run through ctest, which starts one";
    m_ = Open(true);
  }
  std::unique_ptr<Meta> Open(bool format) {
    auto engine = OpenKvEngine(url_);
    EXPECT_TRUE(engine.ok()) << engine.status().ToString();
    if (format) {
      FormatRecord rec;
      rec.name = "test";
      rec.uuid = "uuid";
      rec.storage = "mem";
      rec.bucket = "b";
      EXPECT_TRUE(Meta::Format(engine->get(), rec, false).ok());
    }
    auto m = Meta::Open(std::move(*engine));
    EXPECT_TRUE(m.ok()) << m.status().ToString();
    SessionInfo info;
    info.host = "test";
    EXPECT_TRUE((*m)->NewSession(info).ok());
    return std::move(*m);
  }
  // Formats the volume anew with a change log (the fixture's keeps none) and opens a session.
  void FormatWithChangeLog() {
    m_.reset();
    auto engine = OpenKvEngine(url_);
    ASSERT_TRUE(engine.ok());
    FormatRecord rec;
    rec.name = "logged";
    rec.uuid = "uuid";
    rec.storage = "mem";
    rec.bucket = "b";
    rec.changelog_hours = 1;
    ASSERT_TRUE(Meta::Format(engine->get(), rec, true).ok());
    auto opened = Meta::Open(std::move(*engine));
    ASSERT_TRUE(opened.ok());
    m_ = std::move(*opened);
    ASSERT_TRUE(m_->NewSession(SessionInfo{}).ok());
  }
  Ino File(const std::string& name, Ino parent = kRootIno, uint32_t mode = 0644) {
    auto r = m_->Mknod(root_, parent, name, S_IFREG | mode, 0);
    EXPECT_TRUE(r.ok()) << r.status().ToString();
    return r.ok() ? r->first : 0;
  }
  Ino Dir(const std::string& name, Ino parent = kRootIno, uint32_t mode = 0755) {
    auto r = m_->Mkdir(root_, parent, name, mode);
    EXPECT_TRUE(r.ok()) << r.status().ToString();
    return r.ok() ? r->first : 0;
  }
  int Err(const Status& st) { return st.code(); }
  template <typename T>
  int Err(const Result<T>& r) {
    return r.status().code();
  }
  void WriteSlice(Ino ino, uint32_t chunk, uint32_t pos, uint32_t len, uint64_t* id_out = nullptr) {
    auto id = m_->NewSliceId();
    ASSERT_TRUE(id.ok());
    SliceRecord rec;
    rec.pos = pos;
    rec.id = *id;
    rec.size = len;
    rec.len = len;
    ASSERT_TRUE(m_->WriteSlice(ino, chunk, rec, uint64_t{chunk} * kChunkSize + pos + len, 1).ok());
    if (id_out) *id_out = *id;
  }

  std::string url_;
  std::unique_ptr<Meta> m_;
  Ctx root_ = Ctx::Root();
};

using Engines =
    ::testing::Types<MemEngineKind, SqliteEngineKind, RedisEngineKind, PostgresEngineKind, EtcdEngineKind>;
TYPED_TEST_SUITE(MetaTest, Engines);

}  // namespace tierfs::meta_testing
