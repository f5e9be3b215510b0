// Durations written by users (META-URL options such as ?timeout=30s).
#pragma once

#include <chrono>
#include <string>

namespace tierfs {

// "30s", "500ms", "2m", "1h" or plain seconds; false for anything else, a negative value,
// or one under 1 ms or over a year.
bool ParseDuration(const std::string& text, std::chrono::milliseconds* out);

}  // namespace tierfs
