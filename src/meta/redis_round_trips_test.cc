// How many round trips the Redis engine's reads take, counted by a throwaway server's own
// command statistics: a prefetched read (open: attributes and the first chunk's map) is
// one script and needs no validation, where the same reads one by one take four round
// trips and an EXEC.
#include <gtest/gtest.h>

#include <map>
#include <sstream>
#include <string>

#include "meta/key_schema.h"
#include "meta/kv_engine.h"
#include "meta/redis_test_util.h"

namespace tierfs {
namespace {

using redis_test::RawClient;
using redis_test::ThrowawayRedis;

// Calls per command since the last reset ("evalsha" -> 3), from INFO commandstats.
std::map<std::string, long> Calls(RawClient& c) {
  std::map<std::string, long> out;
  std::istringstream in(c.Command({"INFO", "commandstats"}));
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("cmdstat_", 0) != 0) continue;
    size_t colon = line.find(':'), calls = line.find("calls=");
    if (colon == std::string::npos || calls == std::string::npos) continue;
    out[line.substr(8, colon - 8)] = std::stol(line.substr(calls + 6));
  }
  return out;
}

Status ReadLikeAnOpen(KvEngine& e, bool prefetch, size_t* records) {
  return e.Txn(
      [&](KvTxn& t) -> Status {
        if (prefetch) RETURN_IF_ERROR(t.Prefetch({keys::Inode(9)}, {keys::ChunkPrefix(9, 0), keys::TruncRulesPrefix(9)}));
        ASSIGN_OR_RETURN(auto attr, t.Get(keys::Inode(9)));
        if (!attr) return Status::Err(ENOENT, "no attributes");
        *records = 0;
        for (const std::string& p : {keys::ChunkPrefix(9, 0), keys::TruncRulesPrefix(9)}) {
          RETURN_IF_ERROR(t.Scan(p, PrefixEnd(p), 0, [&](std::string_view, std::string_view) {
            ++*records;
            return true;
          }));
        }
        return Status::OK();
      },
      true);
}

TEST(RedisRoundTrips, APrefetchedOpenIsOneScriptWithoutValidation) {
  ThrowawayRedis server;
  ASSERT_TRUE(server.ok());
  auto e = OpenKvEngine(server.Url(0));
  ASSERT_TRUE(e.ok()) << e.status().ToString();
  ASSERT_TRUE((*e)->Txn([](KvTxn& t) {
                   RETURN_IF_ERROR(t.Put(keys::Inode(9), "attr"));
                   RETURN_IF_ERROR(t.Put(keys::ChunkRecord(9, 0, 1), "a"));
                   return t.Put(keys::ChunkRecord(9, 0, 2), "b");
                 })
                  .ok());
  RawClient stats(server.port(), 0);
  size_t records = 0;

  ASSERT_EQ(stats.Command({"CONFIG", "RESETSTAT"}), "OK");
  ASSERT_TRUE(ReadLikeAnOpen(**e, /*prefetch=*/false, &records).ok());
  EXPECT_EQ(records, 2u);
  auto plain = Calls(stats);
  EXPECT_GE(plain["get"], 1);
  EXPECT_EQ(plain["evalsha"], 2);  // one scan script per prefix
  EXPECT_EQ(plain["exec"], 1);     // three reads: validated

  ASSERT_EQ(stats.Command({"CONFIG", "RESETSTAT"}), "OK");
  ASSERT_TRUE(ReadLikeAnOpen(**e, /*prefetch=*/true, &records).ok());
  EXPECT_EQ(records, 2u);
  auto hinted = Calls(stats);
  // (GETs run by the script are counted too: 3 here. The only round trip is the script.)
  EXPECT_EQ(hinted["evalsha"], 1);
  EXPECT_EQ(hinted["exec"], 0);
}

}  // namespace
}  // namespace tierfs
