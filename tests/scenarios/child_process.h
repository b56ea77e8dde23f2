// Child: a real process started by a scenario test, with its stdout and stderr read into one buffer and
// optional data written to its stdin. Waits are on the child's output or exit, with deadlines. One test
// thread uses it.
#ifndef OCTOP_TESTS_SCENARIOS_CHILD_PROCESS_H_
#define OCTOP_TESTS_SCENARIOS_CHILD_PROCESS_H_

#include <algorithm>
#include <chrono>
#include <fstream>
#include <memory>
#include <optional>
#include <regex>
#include <string>
#include <vector>

#include <fcntl.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

extern char** environ;  // NOLINT: POSIX

namespace octop::scenario {

using namespace std::chrono_literals;

// A child process whose stdout and stderr are read into one buffer; `input` is written to its stdin. `env`
// ("NAME=value") is added to this process's environment, replacing a variable of the same name.
class Child {
 public:
  explicit Child(std::vector<std::string> argv, const std::string& input = "",
                 const std::vector<std::string>& env = {}) {
    std::vector<std::string> entries;
    for (char** e = environ; *e != nullptr; ++e) {
      const std::string entry(*e);
      const std::string name = entry.substr(0, entry.find('=') + 1);
      if (std::none_of(env.begin(), env.end(), [&](const std::string& x) { return x.starts_with(name); })) {
        entries.push_back(entry);
      }
    }
    entries.insert(entries.end(), env.begin(), env.end());
    std::vector<char*> envp;
    for (auto& e : entries) envp.push_back(e.data());
    envp.push_back(nullptr);
    int out[2];
    int in[2];
    EXPECT_EQ(::pipe2(out, O_CLOEXEC), 0);
    EXPECT_EQ(::pipe2(in, O_CLOEXEC), 0);
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_adddup2(&actions, in[0], 0);
    posix_spawn_file_actions_adddup2(&actions, out[1], 1);
    posix_spawn_file_actions_adddup2(&actions, out[1], 2);
    std::vector<char*> args;
    for (auto& a : argv) args.push_back(a.data());
    args.push_back(nullptr);
    EXPECT_EQ(::posix_spawn(&pid_, args[0], &actions, nullptr, args.data(), envp.data()), 0) << argv[0];
    posix_spawn_file_actions_destroy(&actions);
    ::close(out[1]);
    ::close(in[0]);
    if (!input.empty()) {
      EXPECT_EQ(::write(in[1], input.data(), input.size()), static_cast<ssize_t>(input.size()));
    }
    ::close(in[1]);
    fd_ = out[0];
  }
  ~Child() {
    if (pid_ > 0 && !exited_) {
      ::kill(pid_, SIGKILL);
      Wait(10s);
    }
    if (fd_ >= 0) ::close(fd_);
  }

  std::optional<std::string> WaitForOutput(const std::string& pattern,
                                           std::chrono::milliseconds timeout = 30s) {
    const std::regex re(pattern);
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    while (true) {
      std::smatch m;
      if (std::regex_search(output_, m, re)) return m.size() > 1 ? m[1].str() : std::string();
      auto left =
          std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
      if (left.count() <= 0 || !ReadSome(left)) return std::nullopt;
    }
  }

  std::optional<int> Wait(std::chrono::milliseconds timeout) {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    while (std::chrono::steady_clock::now() < deadline) {
      int status = 0;
      if (::waitpid(pid_, &status, WNOHANG) == pid_) {
        exited_ = true;
        while (ReadSome(0ms)) {
        }
        return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
      }
      ReadSome(20ms);  // drains output while waiting, so the child never blocks on a full pipe
    }
    return std::nullopt;
  }

  void Signal(int sig) { ::kill(pid_, sig); }
  // Reads what the child has written so far, without waiting.
  void Drain() {
    while (ReadSome(0ms)) {
    }
  }
  const std::string& output() const { return output_; }

 private:
  bool ReadSome(std::chrono::milliseconds timeout) {
    pollfd p{fd_, POLLIN, 0};
    if (::poll(&p, 1, static_cast<int>(timeout.count())) <= 0) return false;
    char buf[4096];
    ssize_t n = ::read(fd_, buf, sizeof buf);
    if (n <= 0) return false;
    output_.append(buf, static_cast<std::size_t>(n));
    return true;
  }

  pid_t pid_ = -1;
  int fd_ = -1;
  bool exited_ = false;
  std::string output_;
};

// Starts `octopd --config config` (`env` as Child takes it) into *daemon and waits for its "ready on port N"
// line: the port, or nullopt when it did not get there (daemon's output says why).
inline std::optional<int> StartOctopd(const std::string& octopd, const std::string& config,
                                      std::unique_ptr<Child>& daemon,
                                      const std::vector<std::string>& env = {}) {
  daemon = std::make_unique<Child>(std::vector<std::string>{octopd, "--config", config}, "", env);
  const std::optional<std::string> port = daemon->WaitForOutput("ready on port ([0-9]+)");
  if (!port) return std::nullopt;
  return std::stoi(*port);
}

// The non-empty lines of `file` (what a test's commands appended to it); none when it does not exist yet.
inline std::vector<std::string> NonEmptyLines(const std::string& file) {
  std::ifstream in(file);
  std::vector<std::string> lines;
  for (std::string line; std::getline(in, line);) {
    if (!line.empty()) lines.push_back(line);
  }
  return lines;
}

// Whether process `pid` is alive and not a zombie (a killed process not yet reaped counts as gone).
inline bool ProcessRunning(pid_t pid) {
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string line;
  if (!std::getline(stat, line)) return false;
  const auto close = line.rfind(')');
  return close != std::string::npos && close + 2 < line.size() && line[close + 2] != 'Z';
}

// What Prometheus's own checker says of a /metrics body: `promtool check metrics` (Debian's prometheus
// package, which scripts/install-deps.sh installs) reads the exposition from stdin and exits 0 when clean, 3
// when it only found lint problems, 1 when Prometheus could not parse it; it prints one problem per line.
struct PromtoolVerdict {
  int exit_code = -1;
  std::vector<std::string> problems;
  std::string output;
};
inline PromtoolVerdict CheckWithPromtool(const std::string& exposition) {
  constexpr char kPromtool[] = "/usr/bin/promtool";
  PromtoolVerdict verdict;
  if (::access(kPromtool, X_OK) != 0) {
    ADD_FAILURE() << kPromtool << " is missing: scripts/install-deps.sh installs Debian's prometheus package";
    return verdict;
  }
  Child promtool({kPromtool, "check", "metrics"}, exposition);
  verdict.exit_code = promtool.Wait(30s).value_or(-1);
  verdict.output = promtool.output();
  std::size_t start = 0;
  while (start < verdict.output.size()) {
    const std::size_t end = std::min(verdict.output.find('\n', start), verdict.output.size());
    if (end > start) verdict.problems.push_back(verdict.output.substr(start, end - start));
    start = end + 1;
  }
  return verdict;
}

}  // namespace octop::scenario

#endif  // OCTOP_TESTS_SCENARIOS_CHILD_PROCESS_H_
