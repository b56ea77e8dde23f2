// Bad input at the CLI edge (docs/reliability.md): bad flags, bad URLs, bad JSON payloads. Each must exit
// with 2 and one line on stderr that starts with "octop:", before anything is sent or written: the --url
// points at a listening socket that must see no connection, and the --database directory must not be created.
#include <algorithm>
#include <chrono>
#include <filesystem>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include <fcntl.h>
#include <gtest/gtest.h>
#include <httplib.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

namespace {

struct Outcome {
  int exit_code = -1;
  std::string err;
  std::string out;
};

// Runs the octop binary with `args` (no shell), stdin empty; bounded by a real-time deadline.
Outcome RunOctop(const std::vector<std::string>& args) {
  int err_pipe[2];
  int out_pipe[2];
  EXPECT_EQ(::pipe2(err_pipe, O_CLOEXEC), 0);
  EXPECT_EQ(::pipe2(out_pipe, O_CLOEXEC), 0);
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::dup2(err_pipe[1], 2);
    ::dup2(out_pipe[1], 1);
    const int devnull = ::open("/dev/null", O_RDWR);
    ::dup2(devnull, 0);
    std::vector<char*> argv;
    std::string binary = OCTOP_CLI_BINARY;
    argv.push_back(binary.data());
    std::vector<std::string> copy = args;
    for (auto& a : copy) argv.push_back(a.data());
    argv.push_back(nullptr);
    ::execv(argv[0], argv.data());
    ::_exit(127);
  }
  ::close(err_pipe[1]);
  ::close(out_pipe[1]);
  Outcome out;
  char buf[4096];
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  pollfd p[2] = {{err_pipe[0], POLLIN, 0}, {out_pipe[0], POLLIN, 0}};
  int open_pipes = 2;
  while (open_pipes > 0 && std::chrono::steady_clock::now() < deadline) {
    if (::poll(p, 2, 100) <= 0) continue;
    for (int i = 0; i < 2; ++i) {
      if (p[i].fd < 0 || p[i].revents == 0) continue;
      const ssize_t n = ::read(p[i].fd, buf, sizeof buf);
      if (n <= 0) {
        p[i].fd = -1;
        --open_pipes;
        continue;
      }
      (i == 0 ? out.err : out.out).append(buf, static_cast<std::size_t>(n));
    }
  }
  ::close(err_pipe[0]);
  ::close(out_pipe[0]);
  int status = 0;
  ::waitpid(pid, &status, 0);
  out.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return out;
}

class CliBadInputTest : public ::testing::Test {
 protected:
  void SetUp() override {
    listener_ = ::socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
    ASSERT_GE(listener_, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    ASSERT_EQ(::bind(listener_, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
    ASSERT_EQ(::listen(listener_, 16), 0);
    socklen_t len = sizeof addr;
    ASSERT_EQ(::getsockname(listener_, reinterpret_cast<sockaddr*>(&addr), &len), 0);
    url_ = "http://127.0.0.1:" + std::to_string(ntohs(addr.sin_port));
    std::random_device rd;
    db_dir_ = std::filesystem::temp_directory_path() / ("octop-cli-bad-input-" + std::to_string(rd()));
  }
  void TearDown() override {
    ::close(listener_);
    std::error_code ec;
    std::filesystem::remove_all(db_dir_, ec);
  }

  bool AnyConnection() {
    const int fd = ::accept(listener_, nullptr, nullptr);
    if (fd >= 0) ::close(fd);
    return fd >= 0;
  }

  void ExpectUsageError(const std::vector<std::string>& args, const std::string& fragment = "") {
    std::string shown;
    for (const auto& a : args) shown += a + " ";
    Outcome r = RunOctop(args);
    EXPECT_EQ(r.exit_code, 2) << shown << "\n" << r.err;
    EXPECT_TRUE(r.err.starts_with("octop:")) << shown << "\n" << r.err;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << shown << ": one line\n" << r.err;
    if (!fragment.empty()) {
      EXPECT_NE(r.err.find(fragment), std::string::npos) << shown << "\n" << r.err;
    }
    EXPECT_FALSE(AnyConnection()) << shown << ": nothing may be sent";
    EXPECT_FALSE(std::filesystem::exists(db_dir_)) << shown << ": nothing may be written";
  }

  int listener_ = -1;
  std::string url_;
  std::filesystem::path db_dir_;
};

TEST_F(CliBadInputTest, BadFlagsAreAOneLineUsageError) {
  ExpectUsageError({"--url", url_, "--bogus", "tasks"}, "bogus");
  ExpectUsageError({"--url", url_, "trigger"});
  ExpectUsageError({"--url", url_, "trigger", "demo"});
  ExpectUsageError({"--url", url_, "no-such-command"});
  ExpectUsageError({"--url", url_, "jobs"});
  ExpectUsageError({"--url", url_, "jobs", "enqueue", "k", "--priority", "abc"});
  ExpectUsageError({"--url", url_, "jobs", "enqueue", "k", "--max-retries", "1e99"});
  ExpectUsageError({"--url", url_, "jobs", "list", "--limit", "ten"});
  ExpectUsageError({"--database", "sqlite:" + db_dir_.string(), "migrate", "--bogus"});
  ExpectUsageError({"-c", (db_dir_ / "missing.yaml").string(), "tasks"});
}

TEST_F(CliBadInputTest, BadUrlsAreUsageErrorsNotUnreachable) {
  ExpectUsageError({"--url", "not-a-url", "tasks"}, "--url");
  ExpectUsageError({"--url", "ftp://127.0.0.1:21", "jobs", "summary"}, "--url");
  ExpectUsageError({"--url", "http://", "trigger", "demo", "t"}, "--url");
  ExpectUsageError({"--url", "http://127.0.0.1:1 /x", "tasks"}, "--url");
  ExpectUsageError({"--database", "mysql://db/x", "migrate"});
  ExpectUsageError({"--database", "nowhere", "doctor"});
}

TEST_F(CliBadInputTest, ABadPluginAmongGoodOnesMigratesNothing) {
  ExpectUsageError(
      {"--database", "sqlite:" + db_dir_.string(), "migrate", "--plugin", "catalog", "--plugin", "bad/name"},
      "bad/name");
  ExpectUsageError({"--database", "sqlite:" + db_dir_.string(), "migrate", "--plugin", "../escape"});
}

TEST_F(CliBadInputTest, CronNextPreviewsFireTimesWithTheirOffsets) {
  // Across New York's spring-forward gap: 02:30 does not exist on 8 March, and the run falls at 03:00 EDT.
  Outcome r = RunOctop({"cron", "next", "0 30 2 * * *", "--tz", "America/New_York", "-n", "3", "--after",
                        "2026-03-07T00:00:00Z"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "2026-03-07T02:30:00-05:00\n2026-03-08T03:00:00-04:00\n2026-03-09T02:30:00-04:00\n");
  Outcome json = RunOctop({"cron", "next", "0 2 * * *", "--tz", "Europe/Paris", "-n", "2", "--after",
                           "2026-03-28T00:00:00Z", "--json"});
  EXPECT_EQ(json.exit_code, 0) << json.err;
  EXPECT_EQ(json.out, "[\"2026-03-28T02:00:00+01:00\",\"2026-03-29T03:00:00+02:00\"]\n");
  // A zone name in other letter case is the same zone, for the offsets too (cron accepts it, as Intl does).
  Outcome lower = RunOctop({"cron", "next", "0 30 2 * * *", "--tz", "america/new_york", "-n", "3", "--after",
                            "2026-03-07T00:00:00Z"});
  EXPECT_EQ(lower.out, r.out) << lower.err;
  // A wall-clock DST policy: the skipped 02:30 does not run; the repeated 01:30 of 1 November runs twice.
  Outcome skip = RunOctop({"cron", "next", "0 30 2 * * *", "--tz", "America/New_York", "-n", "2", "--after",
                           "2026-03-07T12:00:00Z", "--dst-policy", "skip,once"});
  EXPECT_EQ(skip.exit_code, 0) << skip.err;
  EXPECT_EQ(skip.out, "2026-03-09T02:30:00-04:00\n2026-03-10T02:30:00-04:00\n");
  Outcome twice = RunOctop({"cron", "next", "30 1 * * *", "--tz", "America/New_York", "-n", "3", "--after",
                            "2026-10-31T12:00:00Z", "--dst-policy", "shift,twice"});
  EXPECT_EQ(twice.out, "2026-11-01T01:30:00-04:00\n2026-11-01T01:30:00-05:00\n2026-11-02T01:30:00-05:00\n")
      << twice.err;
  ExpectUsageError({"cron", "next", "* * * * *", "--dst-policy", "wall"}, "Invalid DST policy");
  ExpectUsageError({"cron", "next", "61 * * * *"}, "out of range");
  ExpectUsageError({"cron", "next", "* * * * *", "--tz", "Mars/Olympus"}, "unknown time zone");
  ExpectUsageError({"cron", "next", "* * * * *", "--after", "yesterday"}, "--after");
  ExpectUsageError({"cron", "next", "* * * * *", "-n", "0"});
}

TEST_F(CliBadInputTest, BadJsonPayloadsAreUsageErrors) {
  for (const std::string& payload : std::vector<std::string>{"{bad", "", "{\"a\":1}}", "\xff\xfe", "[1,2",
                                                             "nul", std::string(5000, '[')}) {
    ExpectUsageError({"--url", url_, "jobs", "enqueue", "k", "--payload", payload}, "JSON");
  }
}

// A server that is not octopd, or a hostile one: whatever it answers, the CLI exits 3 with one line and never
// lets the answer drive the terminal.
TEST(CliHostileAnswerTest, AnswersThatAreNotOctopdsAreOneLineErrors) {
  httplib::Server server;
  std::string body;
  server.Get(".*", [&](const httplib::Request&, httplib::Response& res) {
    res.set_content(body, "application/json");
  });
  const int port = server.bind_to_any_port("127.0.0.1");
  ASSERT_GT(port, 0);
  std::thread thread([&] { server.listen_after_bind(); });
  const std::string url = "http://127.0.0.1:" + std::to_string(port);
  const std::vector<std::string> answers = {"<html>not octopd</html>",
                                            std::string(300000, '[') + std::string(300000, ']'),
                                            "[1,2]",
                                            R"({"jobs":{"a":1}})",
                                            R"({"jobs":[{"maxRetries":"x"}]})",
                                            ""};
  for (const std::string& answer : answers) {
    body = answer;
    Outcome r = RunOctop({"--url", url, "jobs", "list"});
    EXPECT_EQ(r.exit_code, 3) << answer.substr(0, 40) << "\n" << r.err;
    EXPECT_TRUE(r.err.starts_with("octop:")) << r.err;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
  }
  // Terminal escapes in a value (a job kind chosen by whoever enqueued it) are shown, not obeyed.
  body =
      "{\"jobs\":[{\"id\":\"j\",\"kind\":\"\\u001b]0;pwned\\u0007\\u001b[2J\\u009b31m\",\"queue\":\"q\","
      "\"status\":\"pending\",\"attempt\":0,\"maxRetries\":1}]}";
  Outcome r = RunOctop({"--url", url, "jobs", "list"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out.find('\x1b'), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find('\x07'), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("\xc2\x9b"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("\\x1b]0;pwned\\x07\\x1b[2J\\x9b31m"), std::string::npos) << r.out;
  server.stop();
  thread.join();
}

}  // namespace
