#include "common/buffer_pool.h"

namespace tierfs {

namespace {
constexpr size_t kMinClass = 4096;
thread_local BufferPool* t_receive_pool = nullptr;
size_t ClassSize(int c) { return kMinClass << c; }
}  // namespace

std::shared_ptr<BufferPool> BufferPool::Create(size_t max_idle_bytes) {
  return std::shared_ptr<BufferPool>(new BufferPool(max_idle_bytes));
}

int BufferPool::ClassOf(size_t capacity) {
  int c = 0;
  while (c < kClasses - 1 && ClassSize(c) < capacity) ++c;
  return c;
}

bool BufferPool::PopIdle(size_t capacity, std::string* out) {
  int c = ClassOf(capacity);
  if (ClassSize(c) < capacity) return false;
  std::lock_guard<std::mutex> l(mu_);
  if (free_[c].empty()) return false;
  *out = std::move(free_[c].back());
  free_[c].pop_back();
  idle_ -= out->capacity();
  return true;
}

std::string BufferPool::TakeSized(size_t size) {
  int c = ClassOf(size);
  std::string buf;
  if (PopIdle(size, &buf)) {
    buf.resize(size);  // shrinking, or filling only what it did not hold
    return buf;
  }
  buf.reserve(std::max(size, ClassSize(c)));
  buf.resize(size);
  return buf;
}

std::string BufferPool::Take(size_t capacity) {
  std::string buf;
  if (PopIdle(capacity, &buf)) {
    buf.clear();
    return buf;
  }
  // Reserved, not filled: the caller's own writes touch its pages once.
  buf.reserve(std::max(capacity, ClassSize(ClassOf(capacity))));
  return buf;
}

void BufferPool::Give(std::string&& buf) {
  size_t cap = buf.capacity();
  if (cap < kMinClass) return;
  // The largest class whose size the buffer can hold.
  int c = ClassOf(cap);
  if (ClassSize(c) > cap) --c;
  if (c < 0) return;
  // Kept at its size (Take clears it; TakeSized reuses the bytes without zeroing them).
  std::lock_guard<std::mutex> l(mu_);
  if (idle_ + cap > max_idle_) return;  // freed when buf goes out of scope
  idle_ += cap;
  free_[c].push_back(std::move(buf));
}

std::shared_ptr<const std::string> BufferPool::Share(std::string&& buf) {
  std::shared_ptr<BufferPool> self = shared_from_this();
  return std::shared_ptr<const std::string>(new std::string(std::move(buf)), [self](const std::string* p) {
    self->Give(std::move(*const_cast<std::string*>(p)));
    delete p;
  });
}

ReceiveInto::ReceiveInto(BufferPool* pool) : prev_(t_receive_pool) { t_receive_pool = pool; }
ReceiveInto::~ReceiveInto() { t_receive_pool = prev_; }

std::string ReceiveInto::Buffer(size_t n) {
  if (t_receive_pool != nullptr) return t_receive_pool->Take(n);
  std::string buf;
  buf.reserve(n);
  return buf;
}

size_t BufferPool::idle_bytes() const {
  std::lock_guard<std::mutex> l(mu_);
  return idle_;
}

}  // namespace tierfs
