// Small helpers shared by subcommands.
#pragma once

#include <signal.h>

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "common/status.h"
#include "client/format_volume.h"
#include "client/open.h"
#include "meta/types.h"

namespace CLI {
class App;
}

namespace tierfs {
class Meta;
class ObjectStore;
struct FormatRecord;
struct SessionInfo;
}

namespace tierfs::cmd {

// The client library's pieces (src/client) are the subcommands' too.
using namespace ::tierfs::client;  // NOLINT

// Opens (creating) a log file for appending, private: a new file is 0600 and an existing
// one readable by other users loses their access (logs name private paths). -1 on errors.
int OpenLogFile(const std::string& file);

// Blocks SIGINT and SIGTERM in this thread, and so in every thread it starts afterwards,
// and returns them as a set for sigwait. Call it before the first thread starts (the log's
// flusher included): a thread that does not block them would take them, and their default
// action ends the process instead of the command's graceful stop.
sigset_t BlockStopSignals();

// Logs to `file` when given (through OpenLogFile), else to stderr when in the foreground
// (a daemon without a file logs nowhere).
void SetupLogging(const std::string& file, bool foreground);
// Prints "tierfs: <message>" to stderr and returns 1.
int Fail(const std::string& what, const Status& st);
// Adds --access-key, --secret-key, --session-token and --ceph-conf to a subcommand.
void AddCredentialOptions(CLI::App* sub, std::string* access_key, std::string* secret_key,
                          std::string* session_token, std::string* ceph_conf);
// Overwrites secrets in the process's own argv (the password of any URL and the values of
// --secret-key / --session-token) so that `ps` and /proc/PID/cmdline never show them.
// Returns the original arguments for parsing.
std::vector<std::string> ScrubSecretsFromArgv(int argc, char** argv);
// The inode of a path inside a volume ("/" or "" is the root), looked up as root.
Result<Ino> ResolveVolumePath(Meta* meta, const std::string& path);
// True when path is the mount point of a mounted file system (per /proc/self/mountinfo).
bool IsMountPoint(const std::string& abs_path);

// The value of a TierFS virtual xattr of path (the mount's controls: tierfs.cache,
// tierfs.warmup, tierfs.compact...), as the mount answered it. Errors name the path; a
// path outside TierFS says so.
Result<std::string> AskMount(const std::string& path, const char* xattr);

}  // namespace tierfs::cmd
