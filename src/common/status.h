// Status and Result<T>: the error currency of every module.
//
// A Status carries an errno value (0 = OK) and a human message that says what went wrong
// and, where the user can act, what to do. Errors cross module boundaries only as Status;
// the FUSE adapter is the one place that turns them into a reply errno.
#pragma once

#include <cassert>
#include <optional>
#include <string>
#include <utility>

namespace tierfs {

class [[nodiscard]] Status {
 public:
  Status() = default;
  static Status OK() { return Status(); }
  // err is an errno value (ENOENT, EIO, ...); err must not be 0.
  static Status Err(int err, std::string message) { return Status(err, std::move(message)); }

  bool ok() const { return code_ == 0; }
  int code() const { return code_; }
  const std::string& message() const { return message_; }
  // "message (strerror)" or "OK".
  std::string ToString() const;
  // Prefixes the message with context, keeping the code: "while X: message".
  Status With(const std::string& context) const;

 private:
  Status(int code, std::string message) : code_(code), message_(std::move(message)) {}
  int code_ = 0;
  std::string message_;
};

template <typename T>
class [[nodiscard]] Result {
 public:
  Result(T value) : value_(std::move(value)) {}  // NOLINT: implicit by design
  Result(Status status) : status_(std::move(status)) { assert(!status_.ok()); }  // NOLINT

  bool ok() const { return status_.ok(); }
  const Status& status() const { return status_; }
  T& value() & { return *value_; }
  const T& value() const& { return *value_; }
  T&& value() && { return std::move(*value_); }
  T* operator->() { return &*value_; }
  const T* operator->() const { return &*value_; }
  T& operator*() & { return *value_; }
  const T& operator*() const& { return *value_; }

 private:
  Status status_;
  std::optional<T> value_;
};

}  // namespace tierfs

#define TIERFS_CONCAT_INNER(a, b) a##b
#define TIERFS_CONCAT(a, b) TIERFS_CONCAT_INNER(a, b)

// Returns the Status from the enclosing function when expr is not OK.
#define RETURN_IF_ERROR(expr)                      \
  do {                                             \
    ::tierfs::Status _st = (expr);                 \
    if (!_st.ok()) return _st;                     \
  } while (0)

// ASSIGN_OR_RETURN(auto x, FunctionReturningResult());
#define ASSIGN_OR_RETURN(lhs, expr) \
  ASSIGN_OR_RETURN_IMPL(TIERFS_CONCAT(_res_, __LINE__), lhs, expr)
#define ASSIGN_OR_RETURN_IMPL(tmp, lhs, expr) \
  auto tmp = (expr);                          \
  if (!tmp.ok()) return tmp.status();         \
  lhs = std::move(tmp).value()
