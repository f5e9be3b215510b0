#include "common/thread_pool.h"

#include <pthread.h>

namespace tierfs {

ThreadPool::ThreadPool(std::string name, int threads, size_t max_queue)
    : name_(std::move(name)), max_queue_(max_queue) {
  for (int i = 0; i < threads; ++i) {
    workers_.emplace_back([this] {
      pthread_setname_np(pthread_self(), name_.substr(0, 15).c_str());
      Work();
    });
  }
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard<std::mutex> l(mu_);
    stopping_ = true;
  }
  not_empty_.notify_all();
  not_full_.notify_all();
  for (auto& t : workers_) t.join();
}

void ThreadPool::Submit(std::function<void()> task) {
  std::unique_lock<std::mutex> l(mu_);
  not_full_.wait(l, [&] { return queue_.size() < max_queue_ || stopping_; });
  queue_.push_back(std::move(task));
  l.unlock();
  not_empty_.notify_one();
}

bool ThreadPool::TrySubmit(std::function<void()> task) {
  std::unique_lock<std::mutex> l(mu_);
  if (queue_.size() >= max_queue_) return false;
  queue_.push_back(std::move(task));
  l.unlock();
  not_empty_.notify_one();
  return true;
}

void ThreadPool::Work() {
  for (;;) {
    std::function<void()> task;
    {
      std::unique_lock<std::mutex> l(mu_);
      not_empty_.wait(l, [&] { return !queue_.empty() || stopping_; });
      if (queue_.empty()) return;  // stopping and drained
      task = std::move(queue_.front());
      queue_.pop_front();
    }
    not_full_.notify_one();
    task();
  }
}

}  // namespace tierfs
