#include "sdk/fork_safe_log.h"

#include <pthread.h>
#include <spdlog/sinks/base_sink.h>
#include <spdlog/spdlog.h>

#include <cstdio>
#include <cstdlib>
#include <memory>
#include <mutex>
#include <string>

namespace tierfs::sdk {
namespace {

class StderrSink final : public spdlog::sinks::base_sink<std::mutex> {
 public:
  void Hold() { mutex_.lock(); }
  void Release() { mutex_.unlock(); }

 protected:
  void sink_it_(const spdlog::details::log_msg& msg) override {
    spdlog::memory_buf_t out;
    formatter_->format(msg, out);
    std::fwrite(out.data(), 1, out.size(), stderr);
  }
  void flush_() override { std::fflush(stderr); }
};

// Never freed: the at-fork handlers may run until the process ends.
StderrSink* g_sink = nullptr;

void HoldForFork() { g_sink->Hold(); }
void ReleaseAfterFork() { g_sink->Release(); }

spdlog::level::level_enum LevelFromEnv() {
  const char* v = std::getenv("TIERFS_LOG_LEVEL");
  if (v == nullptr || *v == '\0') return spdlog::level::warn;
  std::string s = v;
  if (s == "warning") s = "warn";
  auto level = spdlog::level::from_str(s);  // unknown names come back as off
  return level;
}

}  // namespace

void InstallForkSafeLogging() {
  static std::once_flag once;
  std::call_once(once, [] {
    auto sink = std::make_shared<StderrSink>();
    g_sink = sink.get();
    new std::shared_ptr<StderrSink>(sink);  // keeps it alive for the handlers
    auto logger = std::make_shared<spdlog::logger>("tierfs", sink);
    logger->set_level(LevelFromEnv());
    spdlog::set_default_logger(logger);
    pthread_atfork(HoldForFork, ReleaseAfterFork, ReleaseAfterFork);
  });
}

}  // namespace tierfs::sdk
