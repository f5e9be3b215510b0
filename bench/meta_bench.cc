// Per-operation latency of the metadata layer on each engine, in process (no FUSE): lookup,
// getattr, create, rename, unlink and slice commit, from one or more client threads, as seen by the
// POSIX semantics layer (so it includes its transactions' round trips).
//
//   meta_bench [-n N] [-t THREADS] [--changelog-hours H] META-URL...
//       (each URL is formatted: use throwaway engines; H > 0 turns the change log on;
//        THREADS clients' threads, each N operations a phase in a directory of its own)
//
// Prints one markdown table: rows are operations, columns engines, cells "avg µs (p99),
// operations/s of all threads".
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <map>
#include <thread>
#include <string>
#include <sys/stat.h>
#include <vector>

#include "meta/kv_engine.h"
#include "meta/meta.h"

using namespace tierfs;
using Clock = std::chrono::steady_clock;

namespace {

struct Stat {
  double avg_us = 0, p99_us = 0;
  double rate = 0;  // operations per second, all threads
};

Stat Summarize(std::vector<double>& v) {
  Stat s;
  if (v.empty()) return s;
  std::sort(v.begin(), v.end());
  for (double x : v) s.avg_us += x;
  s.avg_us /= v.size();
  s.p99_us = v[std::min(v.size() - 1, v.size() * 99 / 100)];
  return s;
}

template <typename F>
void Time(std::vector<double>* out, F&& f) {
  auto t0 = Clock::now();
  Status st = f();
  out->push_back(std::chrono::duration<double, std::micro>(Clock::now() - t0).count());
  if (!st.ok()) {
    std::fprintf(stderr, "meta_bench: %s\n", st.ToString().c_str());
    std::exit(1);
  }
}

std::map<std::string, Stat> Bench(const std::string& url, int n, int changelog_hours, int threads) {
  std::map<std::string, double> rates;
  auto engine = OpenKvEngine(url);
  if (!engine.ok()) {
    std::fprintf(stderr, "meta_bench: %s\n", engine.status().ToString().c_str());
    std::exit(1);
  }
  FormatRecord rec;
  rec.name = "bench";
  rec.uuid = "bench";
  rec.storage = "mem";
  rec.bucket = "bench";
  rec.changelog_hours = changelog_hours;
  Status st = Meta::Format(engine->get(), rec, true);
  if (!st.ok()) {
    std::fprintf(stderr, "meta_bench: format %s: %s\n", url.c_str(), st.ToString().c_str());
    std::exit(1);
  }
  auto meta = Meta::Open(std::move(*engine));
  if (!meta.ok()) std::exit(1);
  Meta& m = **meta;
  SessionInfo info;
  info.host = "bench";
  (void)m.NewSession(info);
  Ctx root = Ctx::Root();
  // Each thread works in a directory of its own, n operations a phase; a phase's rate is
  // all threads' operations over the phase's wall time.
  std::vector<Ino> dirs(threads);
  for (int k = 0; k < threads; ++k) {
    auto dir = m.Mkdir(root, kRootIno, "d" + std::to_string(k), 0755);
    if (!dir.ok()) std::exit(1);
    dirs[k] = dir->first;
  }
  std::map<std::string, std::vector<double>> t;
  std::vector<std::vector<Ino>> inos(threads, std::vector<Ino>(n));
  auto phase = [&](const char* name, const std::function<Status(int, int)>& op) {
    std::vector<std::vector<double>> lat(threads);
    auto t0 = Clock::now();
    std::vector<std::thread> ts;
    for (int k = 0; k < threads; ++k) {
      ts.emplace_back([&, k] {
        for (int i = 0; i < n; ++i) Time(&lat[k], [&] { return op(k, i); });
      });
    }
    for (auto& th : ts) th.join();
    double secs = std::chrono::duration<double>(Clock::now() - t0).count();
    auto& all = t[name];
    for (auto& v : lat) all.insert(all.end(), v.begin(), v.end());
    rates[name] = threads * n / secs;
  };
  phase("create", [&](int k, int i) -> Status {
    ASSIGN_OR_RETURN(auto r, m.Mknod(root, dirs[k], "f" + std::to_string(i), S_IFREG | 0644, 0));
    inos[k][i] = r.first;
    return Status::OK();
  });
  phase("lookup", [&](int k, int i) { return m.Lookup(root, dirs[k], "f" + std::to_string(i)).status(); });
  phase("getattr", [&](int k, int i) { return m.GetAttr(inos[k][i]).status(); });
  phase("slice commit", [&](int k, int i) -> Status {
    ASSIGN_OR_RETURN(uint64_t id, m.NewSliceId());
    SliceRecord s;
    s.id = id;
    s.size = s.len = 65536;
    return m.WriteSlice(inos[k][i], 0, s, 65536, 1);
  });
  phase("rename", [&](int k, int i) {
    return m.Rename(root, dirs[k], "f" + std::to_string(i), dirs[k], "g" + std::to_string(i), 0);
  });
  phase("unlink", [&](int k, int i) { return m.Unlink(root, dirs[k], "g" + std::to_string(i)); });
  std::map<std::string, Stat> out;
  for (auto& [op, v] : t) {
    out[op] = Summarize(v);
    out[op].rate = rates[op];
  }
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  int n = 2000;
  int changelog_hours = 0;
  int threads = 1;
  std::vector<std::string> urls;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "-n") == 0 && i + 1 < argc) {
      n = std::atoi(argv[++i]);
    } else if (std::strcmp(argv[i], "-t") == 0 && i + 1 < argc) {
      threads = std::max(1, std::atoi(argv[++i]));
    } else if (std::strcmp(argv[i], "--changelog-hours") == 0 && i + 1 < argc) {
      changelog_hours = std::atoi(argv[++i]);
    } else {
      urls.push_back(argv[i]);
    }
  }
  if (urls.empty()) {
    std::fprintf(stderr, "usage: meta_bench [-n N] [-t THREADS] [--changelog-hours H] META-URL...\n");
    return 2;
  }
  std::vector<std::map<std::string, Stat>> results;
  for (const auto& u : urls) results.push_back(Bench(u, n, changelog_hours, threads));
  std::printf("| operation |");
  for (const auto& u : urls) std::printf(" %s |", u.substr(0, u.find("://")).c_str());
  std::printf("\n|---|");
  for (size_t i = 0; i < urls.size(); ++i) std::printf("---:|");
  std::printf("\n");
  for (const char* op : {"lookup", "getattr", "create", "rename", "unlink", "slice commit"}) {
    std::printf("| %s |", op);
    for (auto& r : results) std::printf(" %.0f µs (p99 %.0f), %.0f/s |", r[op].avg_us, r[op].p99_us, r[op].rate);
    std::printf("\n");
  }
  return 0;
}
