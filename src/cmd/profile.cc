// tierfs profile MOUNTPOINT|LOGFILE [--duration S] [--interval 2] [--top 10] [--json]:
// aggregates the access log (MOUNTPOINT/.accesslog, fuse/access_log.h) live, or a saved
// copy of it: the operations and the paths that took the most requests and time.
#include <fcntl.h>
#include <signal.h>
#include <sys/time.h>
#include <sys/stat.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cstring>
#include <iostream>
#include <map>
#include <nlohmann/json.hpp>
#include <regex>

#include "cmd/commands.h"
#include "cmd/util.h"

namespace tierfs::cmd {
namespace {

struct Agg {
  uint64_t count = 0, errors = 0;
  double seconds = 0;
};

struct Profile {
  std::map<std::string, Agg> ops, paths;
  uint64_t lines = 0, skipped = 0;

  void Add(const std::string& line) {
    // 2026.11.25 20:50:01.123456 [uid:0,gid:0,pid:42] write /a/b (1181,4096,0): OK <0.000123>
    static const std::regex re(R"(^\S+ \S+ \[uid:\d+,gid:\d+,pid:\d+\] (\w+) (.*) \([0-9,]+\): (.*) <([0-9.]+)>$)");
    std::smatch m;
    if (!std::regex_match(line, m, re)) {
      if (!line.empty() && line[0] != '#') skipped++;
      return;
    }
    lines++;
    double s = std::stod(m[4].str());
    bool err = m[3].str() != "OK";
    for (Agg* a : {&ops[m[1].str()], &paths[m[2].str()]}) {
      a->count++;
      a->seconds += s;
      if (err) a->errors++;
    }
  }
};

std::vector<std::pair<std::string, Agg>> Top(const std::map<std::string, Agg>& m, size_t n) {
  std::vector<std::pair<std::string, Agg>> v(m.begin(), m.end());
  std::sort(v.begin(), v.end(), [](const auto& a, const auto& b) { return a.second.seconds > b.second.seconds; });
  if (v.size() > n) v.resize(n);
  return v;
}

nlohmann::json ToJson(const Profile& p, size_t top) {
  auto list = [&](const std::map<std::string, Agg>& m, const char* key) {
    nlohmann::json out = nlohmann::json::array();
    for (const auto& [name, a] : Top(m, top)) {
      out.push_back({{key, name}, {"count", a.count}, {"errors", a.errors}, {"seconds", a.seconds}});
    }
    return out;
  };
  return {{"lines", p.lines}, {"skipped", p.skipped}, {"ops", list(p.ops, "op")}, {"paths", list(p.paths, "path")}};
}

void Print(const Profile& p, size_t top) {
  std::printf("%llu requests\n%-18s %10s %8s %12s %10s\n", static_cast<unsigned long long>(p.lines), "OPERATION",
              "COUNT", "ERRORS", "TOTAL-S", "AVG-MS");
  for (const auto& [name, a] : Top(p.ops, top)) {
    std::printf("%-18s %10llu %8llu %12.3f %10.3f\n", name.c_str(), static_cast<unsigned long long>(a.count),
                static_cast<unsigned long long>(a.errors), a.seconds, a.count ? a.seconds * 1000 / a.count : 0);
  }
  std::printf("%-40s %10s %12s\n", "PATH", "COUNT", "TOTAL-S");
  for (const auto& [name, a] : Top(p.paths, top)) {
    std::printf("%-40s %10llu %12.3f\n", name.c_str(), static_cast<unsigned long long>(a.count), a.seconds);
  }
  std::fflush(stdout);
}

int Run(const std::string& source, double duration, double interval, size_t top, bool json) {
  struct stat st;
  if (stat(source.c_str(), &st) != 0) {
    return Fail("profile", Status::Err(errno, "cannot stat " + source + ": " + strerror(errno)));
  }
  const bool live = S_ISDIR(st.st_mode);
  const std::string path = live ? source + "/.accesslog" : source;
  int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    return Fail("profile", Status::Err(errno, live ? source + " is not the root of a TierFS mount, or you are not "
                                                          "root (" + std::string(strerror(errno)) + ")"
                                                    : "cannot open " + source + ": " + strerror(errno)));
  }
  if (live && duration > 0) {
    // A live read blocks until requests come: an alarm interrupts it when time is up.
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = [](int) {};
    sigaction(SIGALRM, &sa, nullptr);  // no SA_RESTART: read(2) returns EINTR
    struct itimerval t;
    memset(&t, 0, sizeof t);
    t.it_value.tv_sec = static_cast<time_t>(duration);
    t.it_value.tv_usec = static_cast<suseconds_t>((duration - static_cast<double>(t.it_value.tv_sec)) * 1e6);
    t.it_interval.tv_usec = 200000;  // again, should the first land before the read began
    setitimer(ITIMER_REAL, &t, nullptr);
  }
  Profile p;
  std::string pending;
  auto start = std::chrono::steady_clock::now();
  auto last_print = start;
  std::string buf(1 << 16, '\0');
  for (;;) {
    if (live && duration > 0 &&
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() >= duration) {
      break;
    }
    ssize_t n = read(fd, buf.data(), buf.size());
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      close(fd);
      return Fail("profile", Status::Err(errno, "reading " + path + ": " + strerror(errno)));
    }
    if (n == 0 && !live) break;
    pending.append(buf.data(), static_cast<size_t>(n));
    for (size_t nl; (nl = pending.find('\n')) != std::string::npos;) {
      p.Add(pending.substr(0, nl));
      pending.erase(0, nl + 1);
    }
    auto now = std::chrono::steady_clock::now();
    if (live && !json && std::chrono::duration<double>(now - last_print).count() >= interval) {
      last_print = now;
      std::printf("\n");
      Print(p, top);
    }
  }
  close(fd);
  if (!pending.empty()) p.Add(pending);
  if (json) {
    std::cout << ToJson(p, top).dump() << std::endl;
  } else {
    Print(p, top);
  }
  return 0;
}

}  // namespace

void RegisterProfile(CLI::App& app, int* exit_code) {
  struct A {
    std::string source;
    double duration = 0, interval = 2;
    size_t top = 10;
    bool json = false;
  };
  auto a = std::make_shared<A>();
  auto* sub = app.add_subcommand("profile", "Top operations and paths by requests and time, from the access log");
  sub->add_option("SOURCE", a->source, "A mount's root (reads MOUNTPOINT/.accesslog live) or a saved access log")
      ->required();
  sub->add_option("--duration", a->duration, "Seconds to read a live log (0: until interrupted)")
      ->capture_default_str();
  sub->add_option("--interval", a->interval, "Seconds between tables of a live log")->capture_default_str();
  sub->add_option("--top", a->top, "Rows per table")->capture_default_str();
  sub->add_flag("--json", a->json, "Print the final aggregate as JSON");
  sub->callback([a, exit_code] { *exit_code = Run(a->source, a->duration, a->interval, a->top, a->json); });
}

}  // namespace tierfs::cmd
