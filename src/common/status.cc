#include "common/status.h"

#include <cstring>

namespace tierfs {

std::string Status::ToString() const {
  if (ok()) return "OK";
  return message_ + " (" + std::strerror(code_) + ")";
}

Status Status::With(const std::string& context) const {
  if (ok()) return *this;
  return Status(code_, context + ": " + message_);
}

}  // namespace tierfs
