// A named, bounded pool of worker threads.
//
// Submit() blocks while the queue holds max_queue tasks, which is how callers get
// backpressure instead of unbounded memory. Any thread may call Submit(); the destructor
// drains the queue and joins the workers.
#pragma once

#include <condition_variable>
#include <deque>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace tierfs {

class ThreadPool {
 public:
  ThreadPool(std::string name, int threads, size_t max_queue);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  void Submit(std::function<void()> task);
  // Runs the task on the pool unless the queue is full, in which case it returns false.
  bool TrySubmit(std::function<void()> task);

 private:
  void Work();
  std::string name_;
  size_t max_queue_;
  std::mutex mu_;
  std::condition_variable not_empty_, not_full_;
  std::deque<std::function<void()>> queue_;
  bool stopping_ = false;
  std::vector<std::thread> workers_;
};

}  // namespace tierfs
