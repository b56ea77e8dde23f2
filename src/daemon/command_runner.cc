#include "daemon/command_runner.h"

#include <array>
#include <cerrno>
#include <cstdlib>
#include <cstring>

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

extern char** environ;  // NOLINT: POSIX

namespace octop::daemon {

namespace {

constexpr std::size_t kTailBytes = 4096;
// How long output is still read after the program itself has exited: a process it left behind (one that
// called setsid, beyond the group's reach) may hold the pipes open forever.
constexpr std::chrono::milliseconds kDrainAfterExit{500};

// Whether posix_spawnp would find `program` (PATH lookup as execvp does), for the same NotFound error with a
// shim in front, which itself always starts.
bool ProgramExists(const std::string& program) {
  auto executable = [](const std::string& path) {
    struct stat st {};
    return ::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode) && ::access(path.c_str(), X_OK) == 0;
  };
  if (program.find('/') != std::string::npos) return executable(program);
  const char* path = std::getenv("PATH");
  std::string_view dirs = path != nullptr ? path : "/usr/local/bin:/usr/bin:/bin";
  while (true) {
    const auto colon = dirs.find(':');
    std::string dir(dirs.substr(0, colon));
    if (executable((dir.empty() ? "." : dir) + "/" + program)) return true;
    if (colon == std::string_view::npos) return false;
    dirs.remove_prefix(colon + 1);
  }
}
constexpr std::size_t kMaxLine = 64 * 1024;

class Fd {
 public:
  Fd() = default;
  explicit Fd(int fd) : fd_(fd) {}
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  Fd(Fd&& o) noexcept : fd_(std::exchange(o.fd_, -1)) {}
  Fd& operator=(Fd&& o) noexcept {
    Reset();
    fd_ = std::exchange(o.fd_, -1);
    return *this;
  }
  ~Fd() { Reset(); }
  int get() const { return fd_; }
  void Reset() {
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
  }

 private:
  int fd_ = -1;
};

bool MakePipe(Fd& read_end, Fd& write_end) {
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) return false;
  read_end = Fd(fds[0]);
  write_end = Fd(fds[1]);
  return true;
}

// Splits a stream into lines for the sink and keeps the tail of stderr.
class LineSplitter {
 public:
  LineSplitter(Stream stream, const LineSink& sink, std::string* tail)
      : stream_(stream), sink_(sink), tail_(tail) {}

  void Feed(std::string_view data) {
    if (tail_ != nullptr) {
      tail_->append(data);
      if (tail_->size() > 2 * kTailBytes) tail_->erase(0, tail_->size() - kTailBytes);
    }
    for (char c : data) {
      if (c == '\n' || partial_.size() >= kMaxLine) {
        Emit();
        if (c == '\n') continue;
      }
      partial_ += c;
    }
  }
  void Finish() {
    if (!partial_.empty()) Emit();
    if (tail_ != nullptr && tail_->size() > kTailBytes) tail_->erase(0, tail_->size() - kTailBytes);
  }

 private:
  void Emit() {
    if (sink_) sink_(stream_, partial_);
    partial_.clear();
  }
  Stream stream_;
  const LineSink& sink_;
  std::string* tail_;
  std::string partial_;
};

std::vector<std::string> BuildEnvironment(const std::map<std::string, std::string>& overrides) {
  std::vector<std::string> env;
  for (char** e = environ; e != nullptr && *e != nullptr; ++e) {
    std::string_view entry(*e);
    auto eq = entry.find('=');
    if (eq != std::string_view::npos && overrides.contains(std::string(entry.substr(0, eq)))) continue;
    env.emplace_back(entry);
  }
  for (const auto& [k, v] : overrides) env.push_back(k + "=" + v);
  return env;
}

}  // namespace

std::string CommandOutcome::Describe() const {
  std::string out;
  if (stopped) {
    out = "stopped";
    if (term_signal != 0) out += std::string(" (") + ::strsignal(term_signal) + ")";
  } else if (term_signal != 0) {
    out = "killed by signal " + std::to_string(term_signal) + " (" + ::strsignal(term_signal) + ")";
  } else {
    out = "exited with status " + std::to_string(exit_code);
  }
  std::string_view tail = stderr_tail;
  while (!tail.empty() && (tail.back() == '\n' || tail.back() == ' ')) tail.remove_suffix(1);
  if (!tail.empty()) out += ": " + std::string(tail);
  return out;
}

Result<CommandOutcome> RunCommand(const CommandSpec& spec, std::stop_token stop, const LineSink& sink) {
  if (spec.argv.empty() || spec.argv[0].empty()) return InvalidArgumentError("command has no program to run");

  Fd out_r, out_w, err_r, err_w, in_r, in_w, wake_r, wake_w;
  if (!MakePipe(out_r, out_w) || !MakePipe(err_r, err_w) || !MakePipe(wake_r, wake_w) ||
      (spec.stdin_data && !MakePipe(in_r, in_w))) {
    return InternalError(std::string("pipe: ") + std::strerror(errno));
  }
  ::fcntl(wake_r.get(), F_SETFL, O_NONBLOCK);
  ::fcntl(wake_w.get(), F_SETFL, O_NONBLOCK);

  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  if (spec.stdin_data) {
    posix_spawn_file_actions_adddup2(&actions, in_r.get(), STDIN_FILENO);
  } else {
    posix_spawn_file_actions_addopen(&actions, STDIN_FILENO, "/dev/null", O_RDONLY, 0);
  }
  posix_spawn_file_actions_adddup2(&actions, out_w.get(), STDOUT_FILENO);
  posix_spawn_file_actions_adddup2(&actions, err_w.get(), STDERR_FILENO);
  if (spec.working_dir) posix_spawn_file_actions_addchdir_np(&actions, spec.working_dir->c_str());

  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  posix_spawnattr_setpgroup(&attr, 0);  // its own process group, so a stop reaches the whole tree
  sigset_t default_signals;
  sigemptyset(&default_signals);
  sigaddset(&default_signals, SIGTERM);
  sigaddset(&default_signals, SIGINT);
  sigaddset(&default_signals, SIGPIPE);
  sigaddset(&default_signals, SIGHUP);
  posix_spawnattr_setsigdefault(&attr, &default_signals);
  sigset_t no_mask;
  sigemptyset(&no_mask);
  posix_spawnattr_setsigmask(&attr, &no_mask);
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETPGROUP | POSIX_SPAWN_SETSIGDEF | POSIX_SPAWN_SETSIGMASK);

  std::vector<char*> argv;
  for (const std::string& a : spec.argv) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  std::vector<std::string> env_storage = BuildEnvironment(spec.env);
  std::vector<char*> envp;
  for (std::string& e : env_storage) envp.push_back(e.data());
  envp.push_back(nullptr);

  std::string parent_pid;
  if (spec.exec_shim) {
    if (!ProgramExists(spec.argv[0])) {
      posix_spawn_file_actions_destroy(&actions);
      posix_spawnattr_destroy(&attr);
      std::string where = spec.working_dir ? " in '" + *spec.working_dir + "'" : "";
      return NotFoundError("cannot run '" + spec.argv[0] + "'" + where + ": " + std::strerror(ENOENT));
    }
    parent_pid = std::to_string(::getpid());
    argv.insert(argv.begin(),
                {const_cast<char*>(spec.exec_shim->c_str()), parent_pid.data(), const_cast<char*>("--")});
  }
  pid_t pid = 0;
  const int spawn_error = ::posix_spawnp(&pid, argv[0], &actions, &attr, argv.data(), envp.data());
  posix_spawn_file_actions_destroy(&actions);
  posix_spawnattr_destroy(&attr);
  if (spawn_error != 0) {
    std::string where = spec.working_dir ? " in '" + *spec.working_dir + "'" : "";
    return NotFoundError("cannot run '" + spec.argv[0] + "'" + where + ": " + std::strerror(spawn_error));
  }
  out_w.Reset();
  err_w.Reset();
  in_r.Reset();
  // Readable once the program (or the shim) has exited, whatever still holds its pipes.
  Fd exited(static_cast<int>(::syscall(SYS_pidfd_open, pid, 0)));
  std::optional<std::chrono::steady_clock::time_point> drain_until;

  // A stop request writes to the wake pipe, so the poll loop reacts at once.
  std::stop_callback on_stop(stop, [fd = wake_w.get()] {
    const char byte = 1;
    [[maybe_unused]] auto n = ::write(fd, &byte, 1);
  });

  CommandOutcome outcome;
  LineSplitter out_lines(Stream::kStdout, sink, nullptr);
  LineSplitter err_lines(Stream::kStderr, sink, &outcome.stderr_tail);
  std::size_t stdin_written = 0;
  if (in_w.get() >= 0) ::fcntl(in_w.get(), F_SETFL, O_NONBLOCK);
  std::optional<std::chrono::steady_clock::time_point> kill_at;
  bool killed = false;

  auto request_stop = [&] {
    if (outcome.stopped) return;
    outcome.stopped = true;
    ::kill(-pid, SIGTERM);
    kill_at = std::chrono::steady_clock::now() + spec.kill_grace;
  };
  if (stop.stop_requested()) request_stop();

  std::array<char, 8192> buffer{};
  while (out_r.get() >= 0 || err_r.get() >= 0) {
    std::vector<pollfd> fds;
    fds.push_back({wake_r.get(), POLLIN, 0});
    if (out_r.get() >= 0) fds.push_back({out_r.get(), POLLIN, 0});
    if (err_r.get() >= 0) fds.push_back({err_r.get(), POLLIN, 0});
    if (in_w.get() >= 0) fds.push_back({in_w.get(), POLLOUT, 0});
    if (exited.get() >= 0 && !drain_until) fds.push_back({exited.get(), POLLIN, 0});
    int timeout_ms = -1;
    for (const auto& deadline : {kill_at && !killed ? kill_at : std::nullopt, drain_until}) {
      if (!deadline) continue;
      auto left =
          std::chrono::duration_cast<std::chrono::milliseconds>(*deadline - std::chrono::steady_clock::now());
      const int ms = static_cast<int>(std::max<std::int64_t>(0, left.count()));
      timeout_ms = timeout_ms < 0 ? ms : std::min(timeout_ms, ms);
    }
    int n = ::poll(fds.data(), static_cast<nfds_t>(fds.size()), timeout_ms);
    if (n < 0 && errno != EINTR) break;
    if (drain_until && std::chrono::steady_clock::now() >= *drain_until) break;
    if (kill_at && !killed && std::chrono::steady_clock::now() >= *kill_at) {
      ::kill(-pid, SIGKILL);
      killed = true;
    }
    for (const pollfd& p : fds) {
      if (p.revents == 0) continue;
      if (p.fd == exited.get()) {
        drain_until = std::chrono::steady_clock::now() + kDrainAfterExit;
      } else if (p.fd == wake_r.get()) {
        while (::read(wake_r.get(), buffer.data(), buffer.size()) > 0) {
        }
        request_stop();
      } else if (p.fd == in_w.get()) {
        const std::string& data = *spec.stdin_data;
        ssize_t w = ::write(in_w.get(), data.data() + stdin_written, data.size() - stdin_written);
        if (w > 0) stdin_written += static_cast<std::size_t>(w);
        if (w < 0 && errno != EAGAIN)
          stdin_written = data.size();  // the reader went away (EPIPE): stop feeding
        if (stdin_written >= data.size()) in_w.Reset();
      } else {
        Fd& fd = p.fd == out_r.get() ? out_r : err_r;
        LineSplitter& lines = p.fd == out_r.get() ? out_lines : err_lines;
        ssize_t r = ::read(fd.get(), buffer.data(), buffer.size());
        if (r > 0) {
          lines.Feed(std::string_view(buffer.data(), static_cast<std::size_t>(r)));
        } else if (r == 0 || errno != EINTR) {
          fd.Reset();
        }
      }
    }
  }
  in_w.Reset();
  out_r.Reset();
  err_r.Reset();
  out_lines.Finish();
  err_lines.Finish();

  // Output closed: the process is exiting or has handed its pipes away. Wait for it, still honouring stop.
  int status = 0;
  while (true) {
    pid_t r = ::waitpid(pid, &status, WNOHANG);
    if (r == pid) break;
    if (r < 0 && errno != EINTR) return InternalError(std::string("waitpid: ") + std::strerror(errno));
    if (stop.stop_requested() && !outcome.stopped) request_stop();
    if (kill_at && !killed && std::chrono::steady_clock::now() >= *kill_at) {
      ::kill(-pid, SIGKILL);
      killed = true;
    }
    pollfd p{wake_r.get(), POLLIN, 0};
    ::poll(&p, 1, 10);
    if ((p.revents & POLLIN) != 0) {
      while (::read(wake_r.get(), buffer.data(), buffer.size()) > 0) {
      }
    }
  }
  // Children of the program that outlived it would be orphans: the whole group goes with it.
  ::kill(-pid, SIGKILL);
  if (WIFEXITED(status)) {
    outcome.exit_code = WEXITSTATUS(status);
  } else if (WIFSIGNALED(status)) {
    outcome.term_signal = WTERMSIG(status);
  }
  return outcome;
}

}  // namespace octop::daemon
