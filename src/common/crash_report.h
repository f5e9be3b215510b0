// A process that dies of a fatal signal (a crash, an abort, an uncaught exception) says so
// on its standard error before it goes: which signal, which thread, the exception's message
// and a backtrace. A background mount sends its standard error to its log file, so a client
// that died leaves the reason next to its last log lines instead of a bare
// "Transport endpoint is not connected" for its users.
//
// Install once, early in main(). The handler then restores the default action and raises
// the signal again, so the exit status and a core dump (where enabled) are unchanged.
#pragma once

namespace tierfs {

void InstallCrashReport();

}  // namespace tierfs
