// Damaged metadata is never hidden (issue 22 item 3), on every engine: dump names every
// record it cannot read and fails (writing the rest only when asked), load refuses a dump
// holding values the file system never writes, Readdir leaves a damaged entry out instead
// of failing the whole directory, and a damaged chunk record reads as an error.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "meta/key_schema.h"
#include "meta/kv_engine.h"
#include "meta/meta.h"
#include "meta/meta_dump.h"
#include "meta/meta_test_fixture.h"

namespace tierfs {
namespace {

using namespace meta_testing;  // NOLINT: the fixture and its engines
using nlohmann::json;

// Writes a raw value under a key, as damage on the engine's disk or a hand edit would.
void Damage(KvEngine* engine, const std::string& key, const std::string& value) {
  ASSERT_TRUE(engine->Txn([&](KvTxn& t) { return t.Put(key, value); }).ok());
}

std::string EntryValue(Ino ino, uint32_t mode) {
  std::string v = keys::EncodeU64(ino);
  v.push_back(static_cast<char>((mode & S_IFMT) >> 12));
  return v;
}

std::string FirstChunkRecordKey(KvEngine* engine, Ino ino) {
  std::string key;
  EXPECT_TRUE(engine
                  ->Txn(
                      [&](KvTxn& t) {
                        std::string p = keys::ChunksPrefix(ino);
                        return t.Scan(p, PrefixEnd(p), 1, [&](std::string_view k, std::string_view) {
                          key.assign(k);
                          return false;
                        });
                      },
                      true)
                  .ok());
  return key;
}

std::set<std::string> Names(const std::vector<DirEntry>& entries) {
  std::set<std::string> out;
  for (const auto& e : entries) out.insert(e.name);
  return out;
}

std::set<std::string> Keys(const std::vector<DamagedRecord>& damaged) {
  std::set<std::string> out;
  for (const auto& d : damaged) out.insert(d.key);
  return out;
}

TYPED_TEST(MetaTest, DumpNamesEveryDamagedRecordAndWritesTheRestOnlyWhenAsked) {
  Meta& m = *this->m_;
  Ino d = this->Dir("d");
  Ino a = this->File("a", d), b = this->File("b", d), c = this->File("c", d), ok = this->File("ok", d);
  this->WriteSlice(c, 0, 0, 1000);
  this->WriteSlice(ok, 0, 0, 500);
  (void)b;
  std::string chunk_key = FirstChunkRecordKey(m.engine(), c);
  ASSERT_FALSE(chunk_key.empty());
  Damage(m.engine(), keys::Inode(a), "\x01");        // attributes cut short
  Damage(m.engine(), keys::Dentry(d, "b"), "xx");    // an entry's value cut short
  Damage(m.engine(), chunk_key, "zz");               // a chunk record cut short
  const std::set<std::string> want = {keys::Inode(a), keys::Dentry(d, "b"), chunk_key};

  std::stringstream out;
  DumpStats stats;
  Status st = DumpVolume(m.engine(), out, false, {}, &stats);
  EXPECT_EQ(st.code(), EIO) << st.ToString();
  EXPECT_EQ(Keys(stats.damaged), want);
  EXPECT_NE(st.message().find("attributes of inode " + std::to_string(a)), std::string::npos) << st.message();
  EXPECT_NE(st.message().find("entry 'b' of directory inode " + std::to_string(d)), std::string::npos);
  // Cut short at the first damaged record: no load takes it.
  EXPECT_FALSE(json::accept(out.str()));
  auto copy = OpenKvEngine("mem://dump_damaged_" + std::to_string(g_counter++));
  ASSERT_TRUE(copy.ok());
  std::stringstream in(out.str());
  EXPECT_FALSE(LoadVolume(copy->get(), in, {}, nullptr).ok());

  // With skip_damaged: still an error naming them, and a complete dump of everything else.
  std::stringstream partial;
  DumpStats pstats;
  st = DumpVolume(m.engine(), partial, false, {}, &pstats, /*skip_damaged=*/true);
  EXPECT_EQ(st.code(), EIO);
  EXPECT_TRUE(pstats.finished);
  EXPECT_EQ(Keys(pstats.damaged), want);
  json doc = json::parse(partial.str());
  std::set<Ino> inos;
  for (const auto& i : doc["inodes"]) inos.insert(i["ino"].get<Ino>());
  EXPECT_FALSE(inos.count(a));  // its attributes are gone: the whole inode
  EXPECT_TRUE(inos.count(c) && inos.count(ok) && inos.count(d));
  // It loads once the entry of the left-out inode is dropped, and holds the rest.
  std::stringstream again(partial.str());
  DumpStats lstats;
  ASSERT_TRUE(LoadVolume(copy->get(), again, {}, &lstats, /*skip_dangling=*/true).ok());
  EXPECT_EQ(lstats.dropped_entries, 1u);
  auto loaded = Meta::Open(std::move(*copy));
  ASSERT_TRUE(loaded.ok());
  auto listing = (*loaded)->Readdir(this->root_, d, true);
  ASSERT_TRUE(listing.ok());
  EXPECT_EQ(Names(*listing), (std::set<std::string>{"c", "ok"}));
  EXPECT_EQ((*loaded)->ReadChunk(ok, 0)->size(), 1u);
}

TYPED_TEST(MetaTest, ReaddirLeavesDamagedEntriesOutInsteadOfFailing) {
  Meta& m = *this->m_;
  Ino d = this->Dir("d");
  Ino a = this->File("a", d);
  Ino c = this->File("c", d);
  this->File("e", d);
  Damage(m.engine(), keys::Dentry(d, "b"), "xx");
  Damage(m.engine(), keys::Dentry(d, "with/slash"), EntryValue(a, S_IFREG));
  Damage(m.engine(), keys::Dentry(d, "zero"), EntryValue(0, S_IFREG));
  Damage(m.engine(), keys::Dentry(d, "type"), EntryValue(a, 0170000));
  Damage(m.engine(), keys::Inode(c), "\x09");  // c's attributes
  for (bool plus : {false, true}) {
    std::vector<DamagedRecord> damaged;
    auto r = m.Readdir(this->root_, d, plus, &damaged);
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    EXPECT_EQ(Names(*r), (std::set<std::string>{"a", "c", "e"}));
    std::set<std::string> want = {keys::Dentry(d, "b"), keys::Dentry(d, "with/slash"), keys::Dentry(d, "zero"),
                                  keys::Dentry(d, "type")};
    if (plus) want.insert(keys::Inode(c));  // listed, without attributes
    EXPECT_EQ(Keys(damaged), want);
    for (const auto& e : *r) {
      if (plus && e.name == "c") {
        EXPECT_EQ(e.attr.mode, 0u);
      }
      if (plus && e.name == "a") {
        EXPECT_TRUE(S_ISREG(e.attr.mode));
      }
    }
    // Without a list to fill, the same answer (the damage goes to the log).
    auto logged = m.Readdir(this->root_, d, plus);
    ASSERT_TRUE(logged.ok()) << logged.status().ToString();
    EXPECT_EQ(Names(*logged), Names(*r));
  }
  // fsck's repair of a damaged entry removes its key.
  ASSERT_TRUE(m.RepairRemoveEntry(d, "with/slash").ok());
  std::vector<DamagedRecord> damaged;
  ASSERT_TRUE(m.Readdir(this->root_, d, false, &damaged).ok());
  EXPECT_EQ(damaged.size(), 3u);
}

TYPED_TEST(MetaTest, DamagedChunkRecordReadsAsAnErrorNotAsOtherBytes) {
  Meta& m = *this->m_;
  Ino f = this->File("f");
  this->WriteSlice(f, 0, 0, 1000);
  this->WriteSlice(f, 0, 100, 10);
  std::string key = FirstChunkRecordKey(m.engine(), f);
  Damage(m.engine(), key, "garbage");
  auto r = m.ReadChunk(f, 0);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), EIO);
  EXPECT_NE(r.status().message().find(keys::Hex(key)), std::string::npos) << r.status().message();
  EXPECT_EQ(this->Err(m.ReadChunkRecords(f, 0)), EIO);
  std::vector<DamagedRecord> damaged;
  ASSERT_TRUE(m.ForEachSliceRef([](uint64_t, uint32_t) {}, &damaged).ok());
  EXPECT_EQ(Keys(damaged), std::set<std::string>{key});
}

// One field at a time made impossible in an intact dump: load refuses naming the record,
// and writes nothing.
TYPED_TEST(MetaTest, LoadRefusesImpossibleValuesNamingTheEntry) {
  Meta& m = *this->m_;
  Ino d = this->Dir("d");
  Ino f = this->File("f", d);
  this->WriteSlice(f, 0, 0, 1000);
  std::stringstream out;
  ASSERT_TRUE(DumpVolume(m.engine(), out, false, {}, nullptr).ok());
  const json good = json::parse(out.str());
  auto inode = [&](json& doc, Ino ino) -> json& {
    for (auto& i : doc["inodes"]) {
      if (i["ino"].get<Ino>() == ino) return i;
    }
    ADD_FAILURE() << "no inode " << ino;
    return doc;
  };
  auto entry = [&](json& doc) -> json& { return inode(doc, d)["entries"][0]; };
  struct Case {
    std::string what;
    std::function<void(json&)> edit;
    std::string says;
  };
  const std::string u64max = "18446744073709551615";
  std::vector<Case> cases = {
      {"empty name", [&](json& j) { entry(j)["name"] = ""; }, "an empty name"},
      {"dot", [&](json& j) { entry(j)["name"] = "."; }, "'.'"},
      {"dotdot", [&](json& j) { entry(j)["name"] = ".."; }, "'..'"},
      {"slash", [&](json& j) { entry(j)["name"] = "a/b"; }, "'/'"},
      {"nul", [&](json& j) { entry(j)["name"] = std::string("a\0b", 3); }, "NUL"},
      {"long", [&](json& j) { entry(j)["name"] = std::string(256, 'x'); }, "256 bytes"},
      {"entry type", [&](json& j) { entry(j)["type"] = 4; }, "file type 4 but inode"},
      {"duplicate", [&](json& j) { inode(j, d)["entries"].push_back(entry(j)); }, "twice"},
      {"length", [&](json& j) { inode(j, f)["length"] = json::parse(u64max); }, "length"},
      {"uid", [&](json& j) { inode(j, f)["uid"] = json::parse(u64max); }, "uid"},
      {"uid -1", [&](json& j) { inode(j, f)["uid"] = 4294967295u; }, "uid"},
      {"gid", [&](json& j) { inode(j, f)["gid"] = -1; }, "gid"},
      {"mode", [&](json& j) { inode(j, f)["mode"] = 0170644; }, "mode"},
      {"nlink", [&](json& j) { inode(j, f)["nlink"] = 4000000000u; }, "link count"},
      {"nlink 0", [&](json& j) { inode(j, f)["nlink"] = 0; }, "link count 0"},
      {"flags", [&](json& j) { inode(j, f)["flags"] = 1u << 20; }, "flags"},
      {"chunk pos", [&](json& j) { inode(j, f)["chunks"][0]["pos"] = 70u << 20; }, "chunk"},
      {"chunk off", [&](json& j) { inode(j, f)["chunks"][0]["off"] = 999; }, "slice"},
      {"symlink on file", [&](json& j) { inode(j, f)["symlink"] = "x"; }, "not a symlink"},
      {"dir parent", [&](json& j) { inode(j, d)["parent"] = 987654; }, "parent"},
      {"float", [&](json& j) { inode(j, f)["length"] = 1.5; }, "length"},
  };
  for (const Case& c : cases) {
    json doc = good;
    c.edit(doc);
    std::stringstream in(doc.dump());
    auto engine = OpenKvEngine("mem://load_bad_" + std::to_string(g_counter++));
    ASSERT_TRUE(engine.ok());
    Status st = LoadVolume(engine->get(), in, {}, nullptr);
    EXPECT_EQ(st.code(), EINVAL) << c.what << ": " << st.ToString();
    EXPECT_NE(st.message().find(c.says), std::string::npos) << c.what << ": " << st.message();
    EXPECT_NE(st.message().find("nothing was loaded"), std::string::npos) << c.what << ": " << st.message();
    bool empty = true;
    ASSERT_TRUE((*engine)
                    ->Txn(
                        [&](KvTxn& t) {
                          return t.Scan("", std::string("\xff", 1), 1, [&](std::string_view, std::string_view) {
                            empty = false;
                            return false;
                          });
                        },
                        true)
                    .ok());
    EXPECT_TRUE(empty) << c.what << ": keys were written";
  }
  // And the intact one loads.
  std::stringstream in(good.dump());
  auto engine = OpenKvEngine("mem://load_good_" + std::to_string(g_counter++));
  ASSERT_TRUE(engine.ok());
  EXPECT_TRUE(LoadVolume(engine->get(), in, {}, nullptr).ok());
}

}  // namespace
TYPED_TEST(MetaTest, GatewayUsersTravelWithADumpAndADamagedOneIsNamed) {
  Meta& m = *this->m_;
  const std::string alice = std::string(keys::kGatewayUserPrefix) + "alice";
  const std::string bob = std::string(keys::kGatewayUserPrefix) + "bob";
  Damage(m.engine(), alice, R"({"access_key":"alice","secret_key":"s","uid":1000,"gid":1000,"read_only":true})");
  std::stringstream out;
  ASSERT_TRUE(DumpVolume(m.engine(), out, false, {}, nullptr).ok());
  auto copy = OpenKvEngine("mem://dump_gu_" + std::to_string(g_counter++));
  ASSERT_TRUE(copy.ok());
  std::stringstream in(out.str());
  ASSERT_TRUE(LoadVolume(copy->get(), in, {}, nullptr).ok());
  std::string got;
  ASSERT_TRUE((*copy)->Txn([&](KvTxn& t) -> Status {
                  ASSIGN_OR_RETURN(auto v, t.Get(alice));
                  got = v.value_or("");
                  return Status::OK();
                }, true).ok());
  EXPECT_EQ(json::parse(got)["uid"], 1000);
  EXPECT_EQ(json::parse(got)["read_only"], true);
  // A record that does not decode (or names another key) is damage, named like any other.
  Damage(m.engine(), bob, R"({"access_key":"mallory"})");
  std::stringstream again;
  DumpStats stats;
  EXPECT_EQ(DumpVolume(m.engine(), again, false, {}, &stats).code(), EIO);
  EXPECT_EQ(Keys(stats.damaged), std::set<std::string>{bob});
}

}  // namespace tierfs
