#include "daemon/command_runner.h"

#include <chrono>
#include <condition_variable>
#include <filesystem>
#include <fstream>
#include <future>
#include <mutex>
#include <thread>

#include <gtest/gtest.h>
#include <signal.h>

#include "../scenarios/child_process.h"

namespace octop::daemon {
namespace {

using namespace std::chrono_literals;

struct Captured {
  std::mutex mu;
  std::condition_variable changed;
  std::vector<std::string> out, err;
  LineSink Sink() {
    return [this](Stream s, std::string_view line) {
      {
        std::lock_guard lock(mu);
        (s == Stream::kStdout ? out : err).emplace_back(line);
      }
      changed.notify_all();
    };
  }
  bool WaitForStdout(std::chrono::seconds timeout = 10s) {
    std::unique_lock lock(mu);
    return changed.wait_for(lock, timeout, [&] { return !out.empty(); });
  }
};

TEST(RunCommand, CapturesLinesAndExitStatus) {
  Captured c;
  auto r = RunCommand({.argv = {"sh", "-c", "echo one; echo two; echo oops >&2; exit 3"}}, {}, c.Sink());
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->exit_code, 3);
  EXPECT_FALSE(r->succeeded());
  EXPECT_EQ(c.out, (std::vector<std::string>{"one", "two"}));
  EXPECT_EQ(c.err, (std::vector<std::string>{"oops"}));
  EXPECT_EQ(r->Describe(), "exited with status 3: oops");
}

TEST(RunCommand, SuccessAndLastLineWithoutNewline) {
  Captured c;
  auto r = RunCommand({.argv = {"printf", "a\\nb"}}, {}, c.Sink());
  ASSERT_TRUE(r.ok());
  EXPECT_TRUE(r->succeeded());
  EXPECT_EQ(c.out, (std::vector<std::string>{"a", "b"}));
}

TEST(RunCommand, PassesEnvironmentWorkingDirAndStdin) {
  Captured c;
  const auto dir = std::filesystem::temp_directory_path();
  auto r = RunCommand({.argv = {"sh", "-c", "echo \"$GREETING\"; pwd; cat"},
                       .env = {{"GREETING", "hello world"}},
                       .working_dir = dir.string(),
                       .stdin_data = std::string(200000, 'x') + "\n{\"job\":1}"},
                      {}, c.Sink());
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ASSERT_TRUE(r->succeeded()) << r->Describe();
  // Lines longer than 64 KiB are cut into pieces; nothing is lost.
  ASSERT_EQ(c.out.size(), 7u);
  EXPECT_EQ(c.out[0], "hello world");
  EXPECT_EQ(std::filesystem::canonical(c.out[1]), std::filesystem::canonical(dir));
  for (int i = 2; i <= 4; ++i) EXPECT_EQ(c.out[static_cast<std::size_t>(i)], std::string(65536, 'x'));
  EXPECT_EQ(c.out[5], std::string(200000 - 3 * 65536, 'x'));
  EXPECT_EQ(c.out[6], "{\"job\":1}");
}

TEST(RunCommand, MissingProgramIsAClearError) {
  auto r = RunCommand({.argv = {"no-such-program-octop"}}, {}, nullptr);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kNotFound);
  EXPECT_NE(r.status().message().find("cannot run 'no-such-program-octop'"), std::string::npos);
  EXPECT_EQ(RunCommand({.argv = {}}, {}, nullptr).status().code(), StatusCode::kInvalidArgument);
  auto bad_dir = RunCommand({.argv = {"true"}, .working_dir = "/no/such/dir"}, {}, nullptr);
  EXPECT_EQ(bad_dir.status().code(), StatusCode::kNotFound);
}

TEST(RunCommand, StopSendsSigtermToTheWholeGroup) {
  const auto marker = std::filesystem::temp_directory_path() / ("octop-term-" + std::to_string(::getpid()));
  std::filesystem::remove(marker);
  std::stop_source stop;
  Captured c;
  auto future = std::async(std::launch::async, [&] {
    return RunCommand({.argv = {"sh", "-c",
                                "trap 'echo term > " + marker.string() +
                                    "; exit 0' TERM; echo ready; "
                                    "while true; do sleep 0.05; done"}},
                      stop.get_token(), c.Sink());
  });
  ASSERT_TRUE(c.WaitForStdout());  // the shell prints "ready" once its trap is installed
  stop.request_stop();
  ASSERT_EQ(future.wait_for(20s), std::future_status::ready);
  auto r = future.get();
  ASSERT_TRUE(r.ok());
  EXPECT_TRUE(r->stopped);
  EXPECT_FALSE(r->succeeded());
  EXPECT_TRUE(std::filesystem::exists(marker));
  std::filesystem::remove(marker);
}

TEST(RunCommand, SigkillAfterTheGraceWhenTermIsIgnored) {
  std::stop_source stop;
  Captured c;
  auto future = std::async(std::launch::async, [&] {
    return RunCommand({.argv = {"sh", "-c", "trap '' TERM; echo ready; while true; do sleep 0.05; done"},
                       .kill_grace = 200ms},
                      stop.get_token(), c.Sink());
  });
  ASSERT_TRUE(c.WaitForStdout());
  const auto stopped_at = std::chrono::steady_clock::now();
  stop.request_stop();
  ASSERT_EQ(future.wait_for(20s), std::future_status::ready);
  auto r = future.get();
  ASSERT_TRUE(r.ok());
  EXPECT_TRUE(r->stopped);
  EXPECT_EQ(r->term_signal, SIGKILL);
  EXPECT_GE(std::chrono::steady_clock::now() - stopped_at, 200ms);
  EXPECT_EQ(r->Describe().rfind("stopped (Killed)", 0), 0u) << r->Describe();
}

TEST(RunCommand, AlreadyStoppedNeverRunsToCompletion) {
  std::stop_source stop;
  stop.request_stop();
  auto r = RunCommand({.argv = {"sleep", "30"}, .kill_grace = 100ms}, stop.get_token(), nullptr);
  ASSERT_TRUE(r.ok());
  EXPECT_TRUE(r->stopped);
}

// ---- What a run leaves behind (docs/reliability.md, "No run outlives its node") ---------------------------

bool GoneWithin(pid_t pid, std::chrono::milliseconds deadline) {
  const auto until = std::chrono::steady_clock::now() + deadline;
  while (scenario::ProcessRunning(pid)) {
    if (std::chrono::steady_clock::now() >= until) return false;
    std::this_thread::sleep_for(10ms);
  }
  return true;
}

// A descendant that leaves the process group (setsid) and keeps stdout open once held the run open forever.
TEST(RunCommand, ADescendantHoldingStdoutDoesNotKeepTheRunGoing) {
  for (const bool shim : {false, true}) {
    Captured c;
    auto future = std::async(std::launch::async, [&] {
      CommandSpec spec{.argv = {"sh", "-c", "setsid sleep 300 & echo $!; exit 3"}};
      if (shim) spec.exec_shim = OCTOP_EXEC_SHIM;
      return RunCommand(spec, std::stop_token(), c.Sink());
    });
    ASSERT_EQ(future.wait_for(20s), std::future_status::ready) << "shim " << shim;
    auto r = future.get();
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    EXPECT_EQ(r->exit_code, 3) << r->Describe();
    ASSERT_EQ(c.out.size(), 1u);
    const pid_t escaped = static_cast<pid_t>(std::stol(c.out[0]));
    if (shim) {
      // The shim is the subreaper of everything the run started: the escaped process ends with the run.
      EXPECT_TRUE(GoneWithin(escaped, 5s)) << "pid " << escaped;
    } else {
      ::kill(escaped, SIGKILL);
    }
  }
}

TEST(RunCommand, TheShimKeepsExitCodesSignalsStopsAndErrors) {
  const auto run = [](std::vector<std::string> argv, std::stop_token stop = {}) {
    Captured c;
    return RunCommand({.argv = std::move(argv), .kill_grace = 200ms, .exec_shim = OCTOP_EXEC_SHIM}, stop,
                      c.Sink());
  };
  auto exited = run({"sh", "-c", "echo out; exit 7"});
  ASSERT_TRUE(exited.ok());
  EXPECT_EQ(exited->exit_code, 7);
  auto signalled = run({"sh", "-c", "kill -TERM $$"});
  ASSERT_TRUE(signalled.ok());
  EXPECT_EQ(signalled->term_signal, SIGTERM) << signalled->Describe();
  auto missing = run({"no-such-program-octop"});
  EXPECT_EQ(missing.status().code(), StatusCode::kNotFound) << missing.status().ToString();

  // A stop reaches the program through the group; a background child of it ends with the run.
  std::stop_source stop;
  Captured c;
  auto future = std::async(std::launch::async, [&] {
    return RunCommand({.argv = {"sh", "-c", "sleep 300 & echo $!; wait"}, .exec_shim = OCTOP_EXEC_SHIM},
                      stop.get_token(), c.Sink());
  });
  ASSERT_TRUE(c.WaitForStdout());
  const pid_t child = static_cast<pid_t>(std::stol(c.out[0]));
  stop.request_stop();
  ASSERT_EQ(future.wait_for(20s), std::future_status::ready);
  auto r = future.get();
  ASSERT_TRUE(r.ok());
  EXPECT_TRUE(r->stopped);
  EXPECT_TRUE(GoneWithin(child, 5s));
}

}  // namespace
}  // namespace octop::daemon
