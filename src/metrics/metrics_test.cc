// The registry's text format (what Prometheus parses; tests/test_metrics.py parses a live
// mount's output with prometheus_client).
#include "metrics/metrics.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

namespace tierfs::metrics {
namespace {

TEST(Metrics, CountersHistogramsAndCollectorsRenderInTheTextFormat) {
  Registry r;
  r.SetConstLabels({{"volume", "v\"1"}});
  r.GetCounter("t_ops_total", "Ops", {{"op", "read"}}).Add(3);
  r.GetCounter("t_ops_total", "Ops", {{"op", "read"}}).Add(2);  // the same series
  Histogram& h = r.GetHistogram("t_latency_seconds", "Latency", {{"op", "read"}});
  h.Observe(0.0002);  // <= 0.00025
  h.Observe(0.003);   // <= 0.005
  h.Observe(100);     // only +Inf
  r.AddCollector([](std::vector<CollectedFamily>* out) {
    out->push_back({"t_cache_bytes", "Cached bytes", "gauge", {{"t_cache_bytes", {{"level", "disk"}}, 4096}}});
  });
  std::string text = r.Render();
  EXPECT_NE(text.find("# TYPE t_ops_total counter\n"), std::string::npos) << text;
  EXPECT_NE(text.find("t_ops_total{volume=\"v\\\"1\",op=\"read\"} 5\n"), std::string::npos) << text;
  EXPECT_NE(text.find("t_latency_seconds_bucket{volume=\"v\\\"1\",op=\"read\",le=\"0.0001\"} 0\n"), std::string::npos);
  EXPECT_NE(text.find("t_latency_seconds_bucket{volume=\"v\\\"1\",op=\"read\",le=\"0.00025\"} 1\n"), std::string::npos);
  EXPECT_NE(text.find("t_latency_seconds_bucket{volume=\"v\\\"1\",op=\"read\",le=\"0.005\"} 2\n"), std::string::npos);
  EXPECT_NE(text.find("t_latency_seconds_bucket{volume=\"v\\\"1\",op=\"read\",le=\"10\"} 2\n"), std::string::npos);
  EXPECT_NE(text.find("t_latency_seconds_bucket{volume=\"v\\\"1\",op=\"read\",le=\"+Inf\"} 3\n"), std::string::npos);
  EXPECT_NE(text.find("t_latency_seconds_count{volume=\"v\\\"1\",op=\"read\"} 3\n"), std::string::npos);
  EXPECT_NE(text.find("t_cache_bytes{volume=\"v\\\"1\",level=\"disk\"} 4096\n"), std::string::npos) << text;
  auto j = nlohmann::json::parse(r.SnapshotJson());
  EXPECT_EQ(j["t_ops_total{op=\"read\"}"], 5);
  EXPECT_EQ(j["t_latency_seconds_count{op=\"read\"}"], 3);
  EXPECT_NEAR(j["t_latency_seconds_sum{op=\"read\"}"].get<double>(), 100.0032, 1e-6);
  EXPECT_EQ(j["t_cache_bytes{level=\"disk\"}"], 4096);
}

TEST(Metrics, TheProcessCollectorReportsCpuAndMemory) {
  std::vector<CollectedFamily> out;
  ProcessCollector()(&out);
  std::map<std::string, double> v;
  for (auto& f : out) v[f.name] = f.samples.at(0).value;
  EXPECT_GT(v["process_resident_memory_bytes"], 1 << 20);
  EXPECT_GE(v["process_cpu_seconds_total"], 0);
  EXPECT_GE(v["process_threads"], 1);
}

}  // namespace
}  // namespace tierfs::metrics
