// RunCommand: runs one program to completion for a task run or a job, the way octopd's command actions need
// it.
//
// The program gets its own process group, the daemon's environment plus the configured variables, optional
// data on stdin (a job's payload), and its stdout/stderr are handed to a sink line by line (octopd logs
// them). When `stop` is requested (timeout, cancel, shutdown) the whole process group gets SIGTERM, then
// SIGKILL after the grace period, so a shell's children die with it. The call returns only after the process
// has been reaped: no zombies, no orphans left running. Output is read until the program has exited and then
// for at most half a second more, so a descendant that escaped the group and holds the pipes cannot keep the
// run going.
//
// Thread-safety: RunCommand may be called from many threads at once (posix_spawn, no global state). The sink
// is called on the calling thread.
#ifndef OCTOP_DAEMON_COMMAND_RUNNER_H_
#define OCTOP_DAEMON_COMMAND_RUNNER_H_

#include <chrono>
#include <functional>
#include <map>
#include <optional>
#include <stop_token>
#include <string>
#include <string_view>
#include <vector>

#include <octop/status.h>

namespace octop::daemon {

struct CommandSpec {
  std::vector<std::string> argv;           // argv[0] is looked up in PATH
  std::map<std::string, std::string> env;  // added to (or replacing in) the daemon's environment
  std::optional<std::string> working_dir;
  std::optional<std::string> stdin_data;  // written to stdin, which is then closed; /dev/null when absent
  std::chrono::milliseconds kill_grace{5000};
  // The octop-exec binary, put in front of the program when set: it ends every process of the run when the
  // program ends or this process dies, even by SIGKILL (apps/octop-exec/main.cc).
  std::optional<std::string> exec_shim;
};

struct CommandOutcome {
  int exit_code = -1;       // the exit status, or -1 when the process died of a signal
  int term_signal = 0;      // the signal that ended it, 0 if it exited
  bool stopped = false;     // it was ended because `stop` was requested
  std::string stderr_tail;  // the last few KiB of stderr, for the run's error message

  bool succeeded() const { return exit_code == 0 && !stopped; }
  // "exited with status 3: <stderr tail>" / "killed by signal 9 (Killed)" / "stopped (SIGTERM)".
  std::string Describe() const;
};

enum class Stream { kStdout, kStderr };
using LineSink = std::function<void(Stream stream, std::string_view line)>;

// InvalidArgument for an empty argv; NotFound when the program cannot be started (with the reason); otherwise
// the outcome, whatever the exit status.
Result<CommandOutcome> RunCommand(const CommandSpec& spec, std::stop_token stop, const LineSink& sink);

}  // namespace octop::daemon

#endif  // OCTOP_DAEMON_COMMAND_RUNNER_H_
