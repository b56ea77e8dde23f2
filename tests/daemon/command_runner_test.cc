#include "daemon/command_runner.h"

#include <chrono>
#include <condition_variable>
#include <filesystem>
#include <fstream>
#include <future>
#include <mutex>

#include <gtest/gtest.h>
#include <signal.h>

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

}  // namespace
}  // namespace octop::daemon
