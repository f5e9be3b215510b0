// Logging of a client that lives inside someone else's process (the Python SDK).
//
// spdlog's default logger is replaced by one that writes to stderr (a library must not
// print on its host's stdout, where the program's own output goes) through a sink whose
// mutex is taken across fork() (pthread_atfork: held by the forking thread while it forks,
// released on both sides). The bug this prevents: a child forked while another thread of
// the parent was in the middle of a log line inherited the sink's mutex locked by a thread
// that does not exist there, and its own first log line waited forever (PyTorch's
// DataLoader forks its workers while the client's threads run).
//
// The level is $TIERFS_LOG_LEVEL (trace, debug, info, warning, error, off; warning by
// default: a client's start-up notes are not its host's business).
#pragma once

namespace tierfs::sdk {

// Installs the logger once per process; later calls do nothing.
void InstallForkSafeLogging();

}  // namespace tierfs::sdk
