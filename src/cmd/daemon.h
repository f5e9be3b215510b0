// Running a long-lived command (mount, later the gateway) in the background: the caller
// returns only once the service is ready, or with the reason it is not.
#pragma once

#include <functional>
#include <string>

#include "common/status.h"

namespace tierfs::cmd {

// Reports, exactly once, whether the service started (OK) or why not.
using ReadyFn = std::function<void(const Status&)>;

// Forks. The child starts a session of its own, logs to log_file (standard error too, so a
// crash report is kept), works from "/" and runs serve(ready), then exits with its result.
// The parent waits for ready through a pipe: 0 once it reported OK (warning_when_ready is
// then printed, if any), 1 with the error it reported, or a Fail naming log_file when the
// child died before it said anything. `what` names the command in messages.
int RunDetached(const std::string& what, const std::string& log_file, const std::string& warning_when_ready,
                const std::function<int(const ReadyFn& ready)>& serve);

}  // namespace tierfs::cmd
