// `tierfs changelog META-URL [--from SEQ] [--limit N] [--follow]`: the volume's change log
// (meta/change_log.h) as JSON lines, one per committed transaction, in commit order.
// `--compact SECONDS` packs the records older than that into blocks now (each client does
// it in the background for records older than a minute) and prints what it packed.
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <iostream>
#include <nlohmann/json.hpp>
#include <thread>

#include "cmd/commands.h"
#include "common/clock.h"
#include "cmd/util.h"
#include "meta/change_consumers.h"
#include "meta/change_log.h"
#include "meta/key_schema.h"
#include "meta/meta.h"

namespace tierfs::cmd {
namespace {

struct Args {
  std::string meta_url;
  uint64_t from = 0;
  uint64_t limit = 0;
  bool follow = false;
  bool values = false;
  std::string drop_consumer;
  double compact_s = -1;  // < 0: not asked
};

// What one logged key is, for people and scripts.
nlohmann::json DescribeWrite(const std::string& key, const std::optional<std::string>& value, bool values) {
  nlohmann::json w = {{"op", value ? "put" : "delete"}};
  if (key.size() >= 10 && key[0] == 'A') {
    w["ino"] = keys::DecodeU64(key.substr(1, 8));
    std::string rest = key.substr(10);
    switch (key[9]) {
      case 'I': w["kind"] = "attr"; break;
      case 'D':
        w["kind"] = "entry";
        w["name"] = rest;
        if (value && value->size() >= 8) w["child"] = keys::DecodeU64(value->substr(0, 8));
        break;
      case 'C': w["kind"] = "chunk"; break;
      case 'T': w["kind"] = "truncation"; break;
      case 'X': w["kind"] = "xattr"; w["name"] = rest; break;
      case 'S': w["kind"] = "symlink"; break;
      default: w["kind"] = "inode-record"; break;
    }
  } else if (key[0] == 'K') {
    w["kind"] = "slice-refs";
  } else if (key[0] == 'W') {
    w["kind"] = "staged";
  } else if (key.starts_with("PL") || key.starts_with("PM")) {
    w["kind"] = "pack";
  } else if (key.starts_with("GU")) {
    w["kind"] = "gateway-user";
  } else {
    w["kind"] = "other";
  }
  w["key"] = keys::Hex(key);
  if (values && value) w["value"] = keys::Hex(*value);
  return w;
}

int Run(const Args& a) {
  auto meta = OpenVolume(a.meta_url, a.drop_consumer.empty());
  if (!meta.ok()) return Fail("changelog", meta.status());
  KvEngine* engine = (*meta)->engine();
  if (!a.drop_consumer.empty()) {
    Status st = DropChangeConsumer(engine, a.drop_consumer);
    if (!st.ok()) return Fail("changelog", st);
    std::cerr << "tierfs: changelog: " << a.drop_consumer
              << " no longer holds the log or released data back; if it comes back it must be re-seeded\n";
    return 0;
  }
  if (a.compact_s >= 0) {
    auto packed = CompactChangeLog(engine, NowNanos() - static_cast<int64_t>(a.compact_s * 1e9));
    if (!packed.ok()) return Fail("changelog", packed.status());
    std::cout << nlohmann::json({{"packed_records", *packed}}).dump() << "\n";
    return 0;
  }
  auto range = ChangeLogRange(engine);
  if (!range.ok()) return Fail("changelog", range.status());
  if ((*meta)->format().changelog_hours == 0 && range->last == 0) {
    return Fail("changelog", Status::Err(ENOENT, "the volume keeps no change log (turn it on with `tierfs config "
                                                 "META-URL --changelog-hours N` while no client has it mounted)"));
  }
  uint64_t from = a.from ? a.from : range->first;
  if (from < range->first) {
    return Fail("changelog", Status::Err(ERANGE, "records before " + std::to_string(range->first) +
                                                     " were trimmed (the log keeps " +
                                                     std::to_string((*meta)->format().changelog_hours) + " hours)"));
  }
  uint64_t printed = 0;
  for (;;) {
    Status st = ReadChanges(engine, from, a.limit ? a.limit - printed : 0, [&](const ChangeRecord& r) {
      nlohmann::json changes = nlohmann::json::array();
      for (const auto& [key, value] : r.writes) changes.push_back(DescribeWrite(key, value, a.values));
      nlohmann::json j = {{"seq", r.seq}, {"time_ns", r.time_ns}, {"changes", changes}};
      std::cout << j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) << "\n";
      from = r.seq + 1;
      ++printed;
      return true;
    });
    if (!st.ok()) return Fail("changelog", st);
    std::cout.flush();
    if (!std::cout) return 1;
    if (!a.follow || (a.limit && printed >= a.limit)) return 0;
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
}

}  // namespace

void RegisterChangelog(CLI::App& app, int* exit_code) {
  auto args = std::make_shared<Args>();
  auto* sub = app.add_subcommand("changelog", "Print a volume's change log as JSON lines, in commit order");
  sub->add_option("META-URL", args->meta_url, "Metadata engine of the volume")->required();
  sub->add_option("--from", args->from, "First sequence number to print (default: the oldest kept)");
  sub->add_option("--limit", args->limit, "Print at most this many records");
  sub->add_flag("--follow", args->follow, "Keep printing new records as they commit");
  sub->add_flag("--values", args->values, "Include each new value (hex)");
  sub->add_option("--drop-consumer", args->drop_consumer,
                  "Forget a registered reader (a mirror, `tierfs status` lists them): the log and released data "
                  "are no longer kept for it");
  sub->add_option("--compact", args->compact_s,
                  "Pack the records older than this many seconds into compressed blocks now (each client does it "
                  "in the background for records older than a minute)")
      ->check(CLI::NonNegativeNumber);
  sub->callback([args, exit_code] { *exit_code = Run(*args); });
}

}  // namespace tierfs::cmd
