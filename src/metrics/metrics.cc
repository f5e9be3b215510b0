#include "metrics/metrics.h"

#include <dirent.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

namespace tierfs::metrics {

void Histogram::Observe(double seconds) {
  size_t i = 0;
  while (i < kLatencyBuckets.size() && seconds > kLatencyBuckets[i]) ++i;
  if (i < kLatencyBuckets.size()) buckets_[i].fetch_add(1, std::memory_order_relaxed);
  count_.fetch_add(1, std::memory_order_relaxed);
  sum_ns_.fetch_add(static_cast<uint64_t>(std::max(0.0, seconds) * 1e9), std::memory_order_relaxed);
}

std::array<uint64_t, kLatencyBuckets.size()> Histogram::Cumulative() const {
  std::array<uint64_t, kLatencyBuckets.size()> out{};
  uint64_t run = 0;
  for (size_t i = 0; i < kLatencyBuckets.size(); ++i) {
    run += buckets_[i].load(std::memory_order_relaxed);
    out[i] = run;
  }
  return out;
}

namespace {

std::string Escape(const std::string& v) {
  std::string out;
  for (char c : v) {
    if (c == '\\' || c == '"') out.push_back('\\');
    if (c == '\n') {
      out += "\\n";
      continue;
    }
    out.push_back(c);
  }
  return out;
}

std::string Number(double v) {
  if (std::isinf(v)) return v > 0 ? "+Inf" : "-Inf";
  if (v == std::floor(v) && std::fabs(v) < 1e15) return std::to_string(static_cast<int64_t>(v));
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.9g", v);
  return buf;
}

Labels Join(const Labels& a, const Labels& b) {
  Labels out = a;
  out.insert(out.end(), b.begin(), b.end());
  return out;
}

}  // namespace

std::string SeriesName(const std::string& name, const Labels& labels) {
  if (labels.empty()) return name;
  std::string s = name + "{";
  for (size_t i = 0; i < labels.size(); ++i) {
    if (i) s += ",";
    s += labels[i].first + "=\"" + Escape(labels[i].second) + "\"";
  }
  return s + "}";
}

Counter& Registry::GetCounter(const std::string& name, const std::string& help, const Labels& labels) {
  std::lock_guard<std::mutex> l(mu_);
  Family& f = families_[name];
  f.help = help;
  f.type = "counter";
  auto& c = f.counters[labels];
  if (!c) c = std::make_unique<Counter>();
  return *c;
}

Histogram& Registry::GetHistogram(const std::string& name, const std::string& help, const Labels& labels) {
  std::lock_guard<std::mutex> l(mu_);
  Family& f = families_[name];
  f.help = help;
  f.type = "histogram";
  auto& h = f.histograms[labels];
  if (!h) h = std::make_unique<Histogram>();
  return *h;
}

void Registry::AddCollector(Collector c) {
  std::lock_guard<std::mutex> l(mu_);
  collectors_.push_back(std::move(c));
}

void Registry::SetConstLabels(Labels labels) {
  std::lock_guard<std::mutex> l(mu_);
  const_labels_ = std::move(labels);
}

std::string Registry::Render() {
  std::vector<Collector> collectors;
  Labels cl;
  {
    std::lock_guard<std::mutex> l(mu_);
    collectors = collectors_;
    cl = const_labels_;
  }
  std::vector<CollectedFamily> collected;
  for (auto& c : collectors) c(&collected);
  std::ostringstream o;
  std::lock_guard<std::mutex> l(mu_);
  for (const auto& [name, f] : families_) {
    o << "# HELP " << name << " " << f.help << "\n# TYPE " << name << " " << f.type << "\n";
    for (const auto& [labels, c] : f.counters) o << SeriesName(name, Join(cl, labels)) << " " << c->value() << "\n";
    for (const auto& [labels, h] : f.histograms) {
      auto cum = h->Cumulative();
      for (size_t i = 0; i < kLatencyBuckets.size(); ++i) {
        o << SeriesName(name + "_bucket", Join(Join(cl, labels), {{"le", Number(kLatencyBuckets[i])}})) << " "
          << cum[i] << "\n";
      }
      o << SeriesName(name + "_bucket", Join(Join(cl, labels), {{"le", "+Inf"}})) << " " << h->count() << "\n";
      o << SeriesName(name + "_sum", Join(cl, labels)) << " " << Number(h->sum()) << "\n";
      o << SeriesName(name + "_count", Join(cl, labels)) << " " << h->count() << "\n";
    }
  }
  // Collected families, merged by name (several collectors may report one family).
  std::map<std::string, CollectedFamily> merged;
  for (auto& f : collected) {
    auto& m = merged[f.name];
    if (m.name.empty()) {
      m.name = f.name;
      m.help = f.help;
      m.type = f.type;
    }
    m.samples.insert(m.samples.end(), f.samples.begin(), f.samples.end());
  }
  for (const auto& [name, f] : merged) {
    o << "# HELP " << name << " " << f.help << "\n# TYPE " << name << " " << f.type << "\n";
    for (const auto& s : f.samples) o << SeriesName(name, Join(cl, s.labels)) << " " << Number(s.value) << "\n";
  }
  return o.str();
}

std::string Registry::SnapshotJson() {
  std::vector<Collector> collectors;
  {
    std::lock_guard<std::mutex> l(mu_);
    collectors = collectors_;
  }
  std::vector<CollectedFamily> collected;
  for (auto& c : collectors) c(&collected);
  nlohmann::json j = nlohmann::json::object();
  std::lock_guard<std::mutex> l(mu_);
  for (const auto& [name, f] : families_) {
    for (const auto& [labels, c] : f.counters) j[SeriesName(name, labels)] = c->value();
    for (const auto& [labels, h] : f.histograms) {
      j[SeriesName(name + "_count", labels)] = h->count();
      j[SeriesName(name + "_sum", labels)] = h->sum();
    }
  }
  for (const auto& f : collected) {
    for (const auto& s : f.samples) j[SeriesName(f.name, s.labels)] = s.value;
  }
  return j.dump();
}

ThreadTimes& ThisThread() {
  static thread_local ThreadTimes t;
  return t;
}

Registry& Default() {
  static Registry* r = new Registry;
  return *r;
}

Collector ProcessCollector() {
  return [](std::vector<CollectedFamily>* out) {
    // /proc/self/stat: utime and stime (fields 14, 15) in clock ticks, threads (20).
    std::ifstream stat("/proc/self/stat");
    std::string line;
    std::getline(stat, line);
    auto close = line.rfind(')');
    if (close == std::string::npos) return;
    std::istringstream rest(line.substr(close + 2));
    std::vector<std::string> f;
    std::string x;
    while (rest >> x) f.push_back(x);
    // f[0] is field 3 (state): utime is field 14 -> f[11], stime f[12], threads f[17].
    if (f.size() < 18) return;
    const double tick = static_cast<double>(sysconf(_SC_CLK_TCK));
    double cpu = (std::stod(f[11]) + std::stod(f[12])) / tick;
    long rss_pages = 0;
    std::ifstream statm("/proc/self/statm");
    long size_pages = 0;
    statm >> size_pages >> rss_pages;
    int fds = 0;
    if (DIR* d = opendir("/proc/self/fd")) {
      while (readdir(d)) ++fds;
      closedir(d);
      fds = std::max(0, fds - 2);
    }
    const double page = static_cast<double>(sysconf(_SC_PAGESIZE));
    out->push_back({"process_cpu_seconds_total", "CPU time of the process (user and system)", "counter",
                    {{"process_cpu_seconds_total", {}, cpu}}});
    out->push_back({"process_resident_memory_bytes", "Resident memory of the process", "gauge",
                    {{"process_resident_memory_bytes", {}, static_cast<double>(rss_pages) * page}}});
    out->push_back({"process_threads", "Threads of the process", "gauge", {{"process_threads", {}, std::stod(f[17])}}});
    out->push_back({"process_open_fds", "Open file descriptors of the process", "gauge",
                    {{"process_open_fds", {}, static_cast<double>(fds)}}});
  };
}

}  // namespace tierfs::metrics
