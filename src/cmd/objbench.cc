// tierfs objbench STORAGE-URL: checks every call TierFS needs from an object store, then
// measures its throughput for large and small objects, and prints both as tables.
//
// STORAGE-URL: file:///DIR, s3 as http(s)://HOST:PORT/BUCKET (or http(s)://BUCKET.HOST),
// rados://POOL[?conf=/etc/ceph/ceph.conf], mem://NAME. With --storage TYPE it is instead
// the --bucket of `tierfs format --storage TYPE` (the only way to name an Azure container:
// --storage azure https://ACCOUNT.blob.core.windows.net/CONTAINER). Credentials as for format.
#include <sys/resource.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <mutex>
#include <random>
#include <thread>
#include <vector>

#include "cmd/commands.h"
#include "cmd/util.h"
#include "common/secret.h"
#include "common/size.h"
#include "common/url.h"
#include "object/object_store.h"

namespace tierfs::cmd {
namespace {

using Clock = std::chrono::steady_clock;

struct Args {
  std::string url, storage, access_key, secret_key, session_token, ceph_conf;
  std::string big_size = "4M", small_size = "4K";
  int big_count = 64, small_count = 500, threads = 4;
  std::string before_get;  // a shell command run between the PUTs and the GETs
  bool skip_functional = false, skip_bench = false;
};

// Runs --before-get (for example a command that drops the store's caches, so the GETs read
// cold objects as a mount's first read does).
Status RunBeforeGet(const std::string& cmd) {
  if (cmd.empty()) return Status::OK();
  std::fflush(stdout);
  int rc = std::system(cmd.c_str());
  if (rc != 0) return Status::Err(EIO, "--before-get command failed (status " + std::to_string(rc) + "): " + cmd);
  return Status::OK();
}

Result<StorageSpec> SpecFromUrl(const Args& a) {
  StorageSpec spec;
  auto u = ParseUrl(a.url);
  if (!a.storage.empty()) {
    // As `format --storage TYPE --bucket STORAGE-URL`.
    spec.storage = a.storage;
    spec.bucket = a.storage == "file" ? AbsPath(a.url) : a.url;
  } else if (!u.ok()) {
    return Status::Err(EINVAL, "bad STORAGE-URL: " + u.status().message());
  } else if (u->scheme == "file") {
    spec.storage = "file";
    spec.bucket = u->path;
  } else if (u->scheme == "mem") {
    spec.storage = "mem";
    spec.bucket = u->path;
  } else if (u->scheme == "http" || u->scheme == "https" || u->scheme == "s3") {
    spec.storage = "s3";
    spec.bucket = u->scheme == "s3" ? "https" + a.url.substr(2) : a.url;
  } else if (u->scheme == "rados") {
    spec.storage = "rados";
    spec.bucket = u->host;
    auto conf = u->query.find("conf");
    if (conf != u->query.end()) spec.ceph_conf = conf->second;
  } else {
    return Status::Err(EINVAL, "unknown storage URL scheme '" + u->scheme +
                                   "': expected file://, http(s):// (s3), rados:// or mem://, or give --storage "
                                   "(azure: --storage azure URL)");
  }
  ASSIGN_OR_RETURN(spec.access_key, ResolveSecret(a.access_key, kAccessKeyEnv));
  ASSIGN_OR_RETURN(spec.secret_key, ResolveSecret(a.secret_key, kSecretKeyEnv));
  spec.session_token = a.session_token;
  if (!a.ceph_conf.empty()) spec.ceph_conf = a.ceph_conf;
  return spec;
}

double Secs(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

// ---- functional checks ----

struct Check {
  std::string name;
  Status st;
  double ms = 0;
};

Status Expect(bool ok, const std::string& what) { return ok ? Status::OK() : Status::Err(EIO, what); }

std::vector<Check> Functional(ObjectStore& s, const std::string& p) {
  std::vector<Check> out;
  auto run = [&](const std::string& name, const std::function<Status()>& fn) {
    auto t0 = Clock::now();
    Status st = fn();
    out.push_back({name, st, Secs(t0) * 1e3});
  };
  const std::string data = "0123456789abcdefghijklmnopqrstuvwxyz";
  run("put", [&] { return s.Put(p + "a", data); });
  run("put from parts", [&] { return s.PutParts(p + "b", {data.substr(0, 10), data.substr(10)}); });
  run("get whole", [&]() -> Status {
    ASSIGN_OR_RETURN(auto v, s.Get(p + "a"));
    return Expect(v == data, "got " + std::to_string(v.size()) + " bytes that differ");
  });
  run("get range", [&]() -> Status {
    ASSIGN_OR_RETURN(auto v, s.Get(p + "b", 5, 10));
    return Expect(v == data.substr(5, 10), "range read returned wrong bytes");
  });
  run("get range past end", [&]() -> Status {
    ASSIGN_OR_RETURN(auto v, s.Get(p + "a", 30, 100));
    return Expect(v == data.substr(30), "read past the end returned " + std::to_string(v.size()) + " bytes");
  });
  run("get missing -> ENOENT", [&]() -> Status {
    auto v = s.Get(p + "missing");
    return Expect(!v.ok() && v.status().code() == ENOENT, "expected ENOENT, got " + v.status().ToString());
  });
  run("head", [&]() -> Status {
    ASSIGN_OR_RETURN(auto info, s.Head(p + "a"));
    return Expect(info.size == data.size(), "head says size " + std::to_string(info.size));
  });
  run("head missing -> ENOENT", [&]() -> Status {
    auto v = s.Head(p + "missing");
    return Expect(!v.ok() && v.status().code() == ENOENT, "expected ENOENT, got " + v.status().ToString());
  });
  run("list with paging", [&]() -> Status {
    for (int i = 0; i < 5; ++i) RETURN_IF_ERROR(s.Put(p + "l/" + std::to_string(i), "x"));
    std::vector<std::string> seen;
    std::string after;
    for (;;) {
      ASSIGN_OR_RETURN(auto page, s.List(p + "l/", after, 2));
      if (page.empty()) break;
      for (auto& o : page) seen.push_back(o.key);
      after = page.back().key;
    }
    bool ok = seen.size() == 5 && std::is_sorted(seen.begin(), seen.end());
    for (int i = 0; i < 5; ++i) RETURN_IF_ERROR(s.Delete(p + "l/" + std::to_string(i)));
    return Expect(ok, "listing returned " + std::to_string(seen.size()) + " keys (or out of order), expected 5");
  });
  run("multipart upload", [&]() -> Status {
    ASSIGN_OR_RETURN(auto id, s.CreateMultipart(p + "m"));
    std::string part1(5 << 20, 'a'), part2(1 << 20, 'b');
    RETURN_IF_ERROR(s.UploadPart(p + "m", id, 1, part1));
    RETURN_IF_ERROR(s.UploadPart(p + "m", id, 2, part2));
    RETURN_IF_ERROR(s.CompleteMultipart(p + "m", id, 2));
    ASSIGN_OR_RETURN(auto v, s.Get(p + "m"));
    return Expect(v == part1 + part2, "multipart object reads back wrong");
  });
  run("multipart abort", [&]() -> Status {
    ASSIGN_OR_RETURN(auto id, s.CreateMultipart(p + "n"));
    RETURN_IF_ERROR(s.UploadPart(p + "n", id, 1, "x"));
    RETURN_IF_ERROR(s.AbortMultipart(p + "n", id));
    auto v = s.Head(p + "n");
    return Expect(!v.ok() && v.status().code() == ENOENT, "aborted upload left an object");
  });
  run("delete", [&]() -> Status {
    for (const char* k : {"a", "b", "m"}) RETURN_IF_ERROR(s.Delete(p + k));
    auto v = s.Head(p + "a");
    return Expect(!v.ok() && v.status().code() == ENOENT, "deleted object still there");
  });
  run("delete missing", [&] { return s.Delete(p + "missing"); });
  return out;
}

// ---- throughput ----

struct Row {
  std::string what;
  size_t count = 0;
  uint64_t bytes = 0;
  double secs = 0;
  double cpu_secs = 0;  // user + system time of this process during the operation
  std::vector<double> lat_ms;
  Status st;
};

double ProcessCpuSecs() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  auto secs = [](const timeval& t) { return static_cast<double>(t.tv_sec) + static_cast<double>(t.tv_usec) / 1e6; };
  return secs(u.ru_utime) + secs(u.ru_stime);
}

Row Parallel(const std::string& what, int threads, size_t count, uint64_t bytes_each,
             const std::function<Status(size_t)>& op) {
  Row row;
  row.what = what;
  row.count = count;
  row.bytes = bytes_each * count;
  std::atomic<size_t> next{0};
  std::mutex mu;
  double cpu0 = ProcessCpuSecs();
  auto t0 = Clock::now();
  std::vector<std::thread> ts;
  for (int t = 0; t < threads; ++t) {
    ts.emplace_back([&] {
      std::vector<double> lat;
      Status first;
      for (size_t i; (i = next++) < count;) {
        auto s0 = Clock::now();
        Status st = op(i);
        lat.push_back(Secs(s0) * 1e3);
        if (!st.ok() && first.ok()) first = st;
      }
      std::lock_guard<std::mutex> lock(mu);
      row.lat_ms.insert(row.lat_ms.end(), lat.begin(), lat.end());
      if (!first.ok() && row.st.ok()) row.st = first;
    });
  }
  for (auto& t : ts) t.join();
  row.secs = Secs(t0);
  row.cpu_secs = ProcessCpuSecs() - cpu0;
  std::sort(row.lat_ms.begin(), row.lat_ms.end());
  return row;
}

void PrintRows(const std::vector<Row>& rows) {
  std::printf("\n| operation | count | MiB/s | ops/s | avg ms | p99 ms | result | cpu s |\n"
              "|---|---:|---:|---:|---:|---:|---|---:|\n");
  for (const auto& r : rows) {
    double avg = 0;
    for (double l : r.lat_ms) avg += l;
    avg = r.lat_ms.empty() ? 0 : avg / r.lat_ms.size();
    double p99 = r.lat_ms.empty() ? 0 : r.lat_ms[std::min(r.lat_ms.size() - 1, r.lat_ms.size() * 99 / 100)];
    std::printf("| %s | %zu | %.1f | %.0f | %.2f | %.2f | %s | %.2f |\n", r.what.c_str(), r.count,
                r.bytes / 1048576.0 / r.secs, r.count / r.secs, avg, p99,
                r.st.ok() ? "ok" : r.st.message().c_str(), r.cpu_secs);
  }
}

int Run(const Args& a) {
  auto spec = SpecFromUrl(a);
  if (!spec.ok()) return Fail("objbench", spec.status());
  auto store = CreateRawObjectStore(*spec);
  if (!store.ok()) return Fail("objbench", store.status());
  ObjectStore& s = **store;
  Status st = s.Init();
  if (!st.ok()) return Fail("objbench", st);
  std::mt19937_64 rng(std::random_device{}());
  std::string prefix = "__tierfs_objbench__/" + std::to_string(rng() % 1000000000) + "/";
  std::printf("object store: %s\n", s.Describe().c_str());
  int failures = 0;
  if (!a.skip_functional) {
    auto checks = Functional(s, prefix + "f/");
    std::printf("\n| check | result | ms |\n|---|---|---:|\n");
    for (const auto& c : checks) {
      std::printf("| %s | %s | %.1f |\n", c.name.c_str(), c.st.ok() ? "ok" : ("FAILED: " + c.st.message()).c_str(),
                  c.ms);
      failures += !c.st.ok();
    }
  }
  if (!a.skip_bench) {
    auto big = ParseSize(a.big_size);
    auto small = ParseSize(a.small_size);
    if (!big.ok()) return Fail("objbench", big.status().With("--big-size"));
    if (!small.ok()) return Fail("objbench", small.status().With("--small-size"));
    std::string big_data(*big, '\0'), small_data(*small, '\0');
    for (auto& c : big_data) c = static_cast<char>(rng());
    for (auto& c : small_data) c = static_cast<char>(rng());
    auto key = [&](const char* kind, size_t i) { return prefix + kind + std::to_string(i); };
    std::vector<Row> rows;
    std::string bs = FormatSize(*big), ss = FormatSize(*small);
    rows.push_back(Parallel("put " + bs, a.threads, a.big_count, *big, [&](size_t i) { return s.Put(key("B", i), big_data); }));
    rows.push_back(Parallel("put " + ss, a.threads, a.small_count, *small, [&](size_t i) { return s.Put(key("S", i), small_data); }));
    if (Status pre = RunBeforeGet(a.before_get); !pre.ok()) {
      std::fprintf(stderr, "tierfs: objbench: %s\n", pre.message().c_str());
      failures++;
    }
    rows.push_back(Parallel("get " + bs, a.threads, a.big_count, *big, [&](size_t i) -> Status {
      ASSIGN_OR_RETURN(auto v, s.Get(key("B", i)));
      return v.size() == big_data.size() ? Status::OK() : Status::Err(EIO, "short read");
    }));
    rows.push_back(Parallel("get " + ss, a.threads, a.small_count, *small, [&](size_t i) -> Status {
      ASSIGN_OR_RETURN(auto v, s.Get(key("S", i)));
      return v.size() == small_data.size() ? Status::OK() : Status::Err(EIO, "short read");
    }));
    rows.push_back(Parallel("head", a.threads, a.small_count, 0, [&](size_t i) { return s.Head(key("S", i)).status(); }));
    rows.push_back(Parallel("list 100 keys", 1, std::max<size_t>(1, a.small_count / 100), 0, [&](size_t i) {
      return s.List(prefix + "S", i == 0 ? "" : key("S", i * 100), 100).status();
    }));
    rows.push_back(Parallel("delete", a.threads, a.small_count, 0, [&](size_t i) { return s.Delete(key("S", i)); }));
    rows.push_back(Parallel("delete " + bs, a.threads, a.big_count, 0, [&](size_t i) { return s.Delete(key("B", i)); }));
    std::printf("\nthroughput with %d threads:", a.threads);
    PrintRows(rows);
    for (const auto& r : rows) failures += !r.st.ok();
  }
  if (failures) {
    std::fprintf(stderr, "tierfs: objbench: %d check(s) failed\n", failures);
    return 1;
  }
  return 0;
}

}  // namespace

void RegisterObjbench(CLI::App& app, int* exit_code) {
  auto args = std::make_shared<Args>();
  auto* sub = app.add_subcommand("objbench", "Check an object store's API and measure its throughput");
  sub->add_option("STORAGE-URL", args->url,
                  "file:///DIR, http(s)://HOST:PORT/BUCKET (s3), rados://POOL[?conf=PATH] or mem://NAME; "
                  "with --storage, the bucket as `tierfs format --storage TYPE --bucket` takes it")
      ->required();
  sub->add_option("--storage", args->storage,
                  "Storage type (file, s3, rados, azure): STORAGE-URL is then the --bucket of `tierfs format`");
  AddCredentialOptions(sub, &args->access_key, &args->secret_key, &args->session_token, &args->ceph_conf);
  sub->add_option("--big-size", args->big_size, "Size of large objects")->capture_default_str();
  sub->add_option("--big-count", args->big_count, "Number of large objects")->capture_default_str();
  sub->add_option("--small-size", args->small_size, "Size of small objects")->capture_default_str();
  sub->add_option("--small-count", args->small_count, "Number of small objects")->capture_default_str();
  sub->add_option("-p,--threads", args->threads, "Concurrent requests")->capture_default_str();
  sub->add_option("--before-get", args->before_get,
                  "Shell command run after the PUTs and before the GETs (e.g. one that drops the "
                  "store's caches, so the GETs read cold objects)");
  sub->add_flag("--skip-functional", args->skip_functional, "Only measure throughput");
  sub->add_flag("--skip-bench", args->skip_bench, "Only run the functional checks");
  sub->callback([args, exit_code] { *exit_code = Run(*args); });
}

}  // namespace tierfs::cmd
