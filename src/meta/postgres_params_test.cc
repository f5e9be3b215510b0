// META-URL -> libpq parameters (postgres_params.h), without a server; then, against the
// shared test server ($TIERFS_TEST_PG_URL), a host list with a dead host in it, a
// read-only server that is never written to, and the commit markers a closed engine leaves
// (none). Linked into postgres_engine_test; the failover itself is tests/test_pg_failover.py.
#include "meta/postgres_params.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <thread>
#include <vector>

#include "meta/kv_engine.h"

namespace tierfs::pg {
namespace {

Result<Params> Parse(const std::string& text) {
  auto url = ParseUrl(text);
  if (!url.ok()) return url.status();
  return ParamsFromUrl(*url);
}

std::map<std::string, std::string> Keywords(const Params& p) {
  std::map<std::string, std::string> out;
  for (size_t i = 0; i < p.keywords.size(); ++i) out[p.keywords[i]] = p.values[i];
  return out;
}

TEST(PostgresParams, OneHostKeepsLibpqDefaults) {
  auto p = Parse("postgres://u:pw@db1/vol");
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  auto kw = Keywords(*p);
  EXPECT_EQ(kw["host"], "db1");
  EXPECT_EQ(kw.count("port"), 0u);  // libpq's own default (PGPORT, 5432)
  EXPECT_EQ(kw.count("target_session_attrs"), 0u);
  EXPECT_EQ(p->where, "db1:5432");

  p = Parse("postgres://u:pw@db1:6000/vol");
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  EXPECT_EQ(Keywords(*p)["port"], "6000");
  EXPECT_EQ(p->where, "db1:6000");
}

TEST(PostgresParams, OneExchangeWaitsAThirdOfTheTimeoutWithinBounds) {
  using std::chrono::milliseconds;
  auto p = Parse("postgres://u:pw@h1,h2/vol?timeout=21s");
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  EXPECT_EQ(p->io_timeout, milliseconds(7000));
  EXPECT_EQ(Keywords(*p)["tcp_user_timeout"], "7000");  // a host that does not answer is passed over
  p = Parse("postgres://u:pw@h1/vol");                   // 30 s
  EXPECT_EQ(p->io_timeout, milliseconds(10000));
  p = Parse("postgres://u:pw@h1/vol?timeout=3s");
  EXPECT_EQ(p->io_timeout, milliseconds(2000));
  p = Parse("postgres://u:pw@h1/vol?timeout=1s");  // never past the timeout itself
  EXPECT_EQ(p->io_timeout, milliseconds(1000));
  p = Parse("postgres://u:pw@h1/vol?timeout=60s&io-timeout=500ms&tcp_user_timeout=900");
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  EXPECT_EQ(p->io_timeout, milliseconds(500));
  EXPECT_EQ(Keywords(*p)["tcp_user_timeout"], "900");  // given: kept
  EXPECT_EQ(Keywords(*p).count("io-timeout"), 0u);    // ours, not libpq's
  EXPECT_EQ(Parse("postgres://u:pw@h1/vol?io-timeout=soon").status().code(), EINVAL);
}

TEST(PostgresParams, SeveralHostsBecomeLibpqListsAndDefaultToReadWrite) {
  auto p = Parse("postgres://u:pw@h1:5432,h2,h3:5433/vol?timeout=20s");
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  auto kw = Keywords(*p);
  EXPECT_EQ(kw["host"], "h1,h2,h3");
  EXPECT_EQ(kw["port"], "5432,5432,5433");
  EXPECT_EQ(kw["target_session_attrs"], "read-write");
  EXPECT_EQ(kw["dbname"], "vol");
  EXPECT_EQ(p->where, "h1:5432,h2:5432,h3:5433");
  EXPECT_EQ(p->timeout, std::chrono::seconds(20));
  // Every host without a port gets 5432, the last one too.
  p = Parse("postgres://u:pw@h1:6000,h2/vol");
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  EXPECT_EQ(Keywords(*p)["port"], "6000,5432");
}

TEST(PostgresParams, TargetSessionAttrsGivenIsKept) {
  auto p = Parse("postgres://u:pw@h1,h2/vol?target_session_attrs=primary");
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  EXPECT_EQ(Keywords(*p)["target_session_attrs"], "primary");
  size_t n = 0;
  for (const auto& k : p->keywords) n += k == "target_session_attrs";
  EXPECT_EQ(n, 1u);
}

TEST(PostgresParams, Ipv6Literals) {
  auto p = Parse("postgres://u:pw@[::1]:5433,[fe80::2],h3:5434/vol");
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  auto kw = Keywords(*p);
  EXPECT_EQ(kw["host"], "::1,fe80::2,h3");
  EXPECT_EQ(kw["port"], "5433,5432,5434");
  EXPECT_EQ(p->where, "[::1]:5433,[fe80::2]:5432,h3:5434");
  p = Parse("postgres://u:pw@[::1]:6543/vol");
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  EXPECT_EQ(Keywords(*p)["host"], "::1");
  EXPECT_EQ(Keywords(*p)["port"], "6543");
}

TEST(PostgresParams, MalformedHostListsSayTheExpectedForm) {
  for (const char* bad : {"postgres://u:pw@h1,,h2/vol", "postgres://u:pw@h1:99999,h2:5432/vol",
                          "postgres://u:pw@h1:,h2:5432/vol",
                          "postgres://u:pw@[::1]x,h2/vol", "postgres://u:pw@,h2:5432/vol"}) {
    auto p = Parse(bad);
    ASSERT_FALSE(p.ok()) << bad;
    EXPECT_EQ(p.status().code(), EINVAL) << bad;
    EXPECT_NE(p.status().message().find("expected postgres://USER:PASSWORD@HOST[:PORT][,HOST2"),
              std::string::npos)
        << p.status().message();
    EXPECT_EQ(p.status().message().find(":pw@"), std::string::npos) << p.status().message();
  }
  // Hosts both in the URL and as a query parameter: one of them would be ignored.
  auto p = Parse("postgres://u:pw@h1,h2/vol?host=h3");
  ASSERT_FALSE(p.ok());
  EXPECT_NE(p.status().message().find("'host' twice"), std::string::npos) << p.status().message();
}

// The shared server's "HOST:PORT", or "" outside ctest.
std::string ServerHostPort() {
  const char* base = getenv("TIERFS_TEST_PG_URL");
  if (base == nullptr || *base == '\0') return "";
  std::string url = base;
  return url.substr(url.find('@') + 1);
}

std::string ServerCredentials() {
  std::string url = getenv("TIERFS_TEST_PG_URL");
  size_t start = url.find("://") + 3;
  return url.substr(start, url.find('@') - start);
}

// A TCP port on 127.0.0.1 that nothing listens on (at the time of the call).
int DeadPort() {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof(addr);
  int port = 0;
  if (bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0 &&
      getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) == 0) {
    port = ntohs(addr.sin_port);
  }
  close(fd);
  return port;
}

// psql on the shared server's database db; what it printed.
std::string Psql(const std::string& db, const std::string& sql) {
  std::string cmd = "psql 'postgres://" + ServerCredentials() + "@" + ServerHostPort() + "/" + db +
                    "' -X -q -At -v ON_ERROR_STOP=1 -c \"" + sql + "\" 2>&1";
  std::string out;
  if (FILE* f = popen(cmd.c_str(), "r")) {
    char buf[512];
    while (fgets(buf, sizeof(buf), f) != nullptr) out += buf;
    pclose(f);
  }
  return out;
}

constexpr char kDb[] = "tierfs_kv_test";
constexpr char kSchema[] = "tierfs_pg_hosts_test";

#define SKIP_WITHOUT_SERVER()                                                            \
  do {                                                                                   \
    if (ServerHostPort().empty()) GTEST_SKIP() << "no test server: run through ctest"; \
  } while (0)

// postgres://CREDENTIALS@DEAD,SERVER/tierfs_kv_test in a schema of this test's own.
std::string ListUrl(const std::string& query = "") {
  return "postgres://" + ServerCredentials() + "@127.0.0.1:" + std::to_string(DeadPort()) + "," +
         ServerHostPort() + "/" + kDb + "?options=-csearch_path%3D" + kSchema + query;
}

TEST(PostgresHosts, ADeadHostInTheListIsPassedOver) {
  SKIP_WITHOUT_SERVER();
  Psql(kDb, std::string("CREATE SCHEMA IF NOT EXISTS ") + kSchema);
  auto e = OpenKvEngine(ListUrl());
  ASSERT_TRUE(e.ok()) << e.status().ToString();
  ASSERT_TRUE((*e)->Txn([](KvTxn& t) { return t.Put("k", "v"); }).ok());
  std::optional<std::string> got;
  ASSERT_TRUE((*e)->Txn([&](KvTxn& t) {
                 ASSIGN_OR_RETURN(got, t.Get("k"));
                 return Status::OK();
               }).ok());
  EXPECT_EQ(got, std::optional<std::string>("v"));
}

// A server that is read-only (as a standby, or a primary being demoted) is never settled on
// for writes: with the default target_session_attrs=read-write it is skipped, and opening
// waits for a writable one until the timeout, saying why; told to take any server, the
// engine's first write is refused there and it gives up after the timeout, saying so.
TEST(PostgresHosts, ReadOnlyServersAreNotWrittenTo) {
  SKIP_WITHOUT_SERVER();
  Psql(kDb, std::string("CREATE SCHEMA IF NOT EXISTS ") + kSchema);
  const std::string read_only = "&options=-cdefault_transaction_read_only%3Don";
  auto start = std::chrono::steady_clock::now();
  auto e = OpenKvEngine(ListUrl(read_only + "&timeout=1500ms"));
  ASSERT_FALSE(e.ok());
  EXPECT_NE(e.status().message().find("read-only"), std::string::npos) << e.status().message();
  EXPECT_GE(std::chrono::steady_clock::now() - start, std::chrono::milliseconds(1400));

  e = OpenKvEngine(ListUrl(read_only + "&timeout=1500ms&target_session_attrs=any"));
  ASSERT_FALSE(e.ok());
  EXPECT_NE(e.status().message().find("read-only"), std::string::npos) << e.status().message();
}

// Every connection plants a commit marker; a closed engine leaves none behind.
TEST(PostgresHosts, ClosedEngineLeavesNoCommitMarkers) {
  SKIP_WITHOUT_SERVER();
  Psql(kDb, std::string("CREATE SCHEMA IF NOT EXISTS ") + kSchema);
  {
    auto e = OpenKvEngine(ListUrl());
    ASSERT_TRUE(e.ok()) << e.status().ToString();
    std::vector<std::thread> threads;
    for (int i = 0; i < 6; ++i) {
      threads.emplace_back([&, i] {
        for (int j = 0; j < 20; ++j) {
          EXPECT_TRUE((*e)->Txn([&](KvTxn& t) { return t.Put("m" + std::to_string(i), std::to_string(j)); }).ok());
        }
      });
    }
    for (auto& t : threads) t.join();
    std::string during = Psql(kDb, std::string("SELECT count(*) FROM ") + kSchema + ".tierfs_commits");
    EXPECT_GE(atoi(during.c_str()), 1) << during;
  }
  // The DELETE is sent as the connection closes; the server runs it a moment later.
  std::string left;
  for (int i = 0; i < 50; ++i) {
    left = Psql(kDb, std::string("SELECT count(*) FROM ") + kSchema + ".tierfs_commits");
    if (atoi(left.c_str()) == 0 && left.rfind("0", 0) == 0) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  EXPECT_EQ(left, "0\n");
}

}  // namespace
}  // namespace tierfs::pg
