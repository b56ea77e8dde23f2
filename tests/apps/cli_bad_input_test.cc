// Bad input at the CLI edge (issue 9): bad flags, bad URLs, bad JSON payloads. Each must exit with 2 and one
// line on stderr that starts with "octop:", before anything is sent or written: the --url points at a
// listening socket that must see no connection, and the --database directory must not be created.
#include <algorithm>
#include <chrono>
#include <filesystem>
#include <random>
#include <string>
#include <vector>

#include <fcntl.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

namespace {

struct Outcome {
  int exit_code = -1;
  std::string err;
};

// Runs the octop binary with `args` (no shell), stdin empty; bounded by a real-time deadline.
Outcome RunOctop(const std::vector<std::string>& args) {
  int err_pipe[2];
  EXPECT_EQ(::pipe2(err_pipe, O_CLOEXEC), 0);
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::dup2(err_pipe[1], 2);
    const int devnull = ::open("/dev/null", O_RDWR);
    ::dup2(devnull, 0);
    ::dup2(devnull, 1);
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
  Outcome out;
  char buf[4096];
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (std::chrono::steady_clock::now() < deadline) {
    pollfd p{err_pipe[0], POLLIN, 0};
    if (::poll(&p, 1, 100) <= 0) continue;
    const ssize_t n = ::read(err_pipe[0], buf, sizeof buf);
    if (n <= 0) break;
    out.err.append(buf, static_cast<std::size_t>(n));
  }
  ::close(err_pipe[0]);
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

TEST_F(CliBadInputTest, BadJsonPayloadsAreUsageErrors) {
  for (const std::string& payload : std::vector<std::string>{"{bad", "", "{\"a\":1}}", "\xff\xfe", "[1,2",
                                                             "nul", std::string(5000, '[')}) {
    ExpectUsageError({"--url", url_, "jobs", "enqueue", "k", "--payload", payload}, "JSON");
  }
}

}  // namespace
