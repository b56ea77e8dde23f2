// octopd: the octop daemon. Reads a YAML config, runs its tasks, serves the REST API, /metrics and the
// dashboard. Exit codes: 0 after a graceful stop (SIGTERM/SIGINT), 2 for an invalid config or command line, 1
// when it cannot start (database or address unavailable).
#include <filesystem>
#include <iostream>

#include <CLI/CLI.hpp>
#include <signal.h>
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

#include "daemon/daemon.h"
#include "daemon/daemon_config.h"

// Set by the build to its copy of src/web (apps/octopd/CMakeLists.txt).
#ifndef OCTOP_DEFAULT_WEB_ROOT
#define OCTOP_DEFAULT_WEB_ROOT ""
#endif
// Set by the build to its octop-exec; an octop-exec beside the octopd binary (an installed layout) wins.
#ifndef OCTOP_DEFAULT_EXEC_SHIM
#define OCTOP_DEFAULT_EXEC_SHIM ""
#endif

namespace {

// The octop-exec to run commands under (apps/octop-exec), or "" when there is none.
std::string FindExecShim() {
  std::error_code ec;
  const std::filesystem::path self = std::filesystem::read_symlink("/proc/self/exe", ec);
  if (!ec) {
    const std::filesystem::path sibling = self.parent_path() / "octop-exec";
    if (std::filesystem::is_regular_file(sibling, ec)) return sibling.string();
  }
  const std::string built = OCTOP_DEFAULT_EXEC_SHIM;
  if (!built.empty() && std::filesystem::is_regular_file(built, ec)) return built;
  return "";
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"octopd: distributed task scheduler and job queue daemon"};
  std::string config_path = "octop.yaml";
  std::optional<std::string> listen;
  app.add_option("-c,--config", config_path, "YAML configuration file")->capture_default_str();
  app.add_option("--listen", listen, "override http.listen (host:port; port 0 picks a free one)");
  // Default: the build tree's copy of src/web. An explicit --web-root must exist; "" serves no dashboard.
  std::string web_root = OCTOP_DEFAULT_WEB_ROOT;
  auto* web_root_option =
      app.add_option("--web-root", web_root, "directory of the dashboard's static files, served at /")
          ->capture_default_str();
  bool check_only = false;
  app.add_flag("--check", check_only, "validate the configuration and exit");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? 0 : 2;
  }

  std::error_code fs_error;
  if (!web_root.empty() && !std::filesystem::is_directory(web_root, fs_error)) {
    if (web_root_option->count() > 0) {
      std::cerr << "octopd: --web-root: '" << web_root << "' is not a directory\n";
      return 2;
    }
    std::cerr << "octopd: warning: the dashboard directory " << web_root
              << " is missing; serving the API without the dashboard (pass --web-root)\n";
    web_root.clear();
  }

  auto config = octop::daemon::LoadDaemonConfig(config_path);
  if (!config.ok()) {
    std::cerr << "octopd: invalid configuration: " << config.status().message() << "\n";
    return config.status().code() == octop::StatusCode::kNotFound ? 1 : 2;
  }
  if (listen) {
    auto overridden = octop::daemon::ParseDaemonConfig("http: {listen: '" + *listen + "'}", "--listen");
    if (!overridden.ok()) {
      std::cerr << "octopd: " << overridden.status().message() << "\n";
      return 2;
    }
    config->http.host = overridden->http.host;
    config->http.port = overridden->http.port;
  }
  if (check_only) {
    std::cout << "octopd: " << config_path << " is valid\n";
    return 0;
  }

  spdlog::set_default_logger(spdlog::stderr_color_mt("octopd"));
  spdlog::set_pattern("%Y-%m-%dT%H:%M:%S.%e%z %^%l%$ %v");
  spdlog::set_level(spdlog::level::from_str(config->log_level));

  // Signals are taken synchronously by the main thread: every other thread starts with them blocked.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGINT);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  ::signal(SIGPIPE, SIG_IGN);

  const std::string exec_shim = FindExecShim();
  if (exec_shim.empty()) {
    spdlog::warn(
        "octopd: octop-exec not found beside octopd: a command's children may outlive a killed octopd");
  }
  octop::daemon::Daemon daemon(std::move(*config), web_root, exec_shim);
  if (octop::Status s = daemon.Start(); !s.ok()) {
    spdlog::error("octopd: cannot start: {}", s.message());
    return s.code() == octop::StatusCode::kInvalidArgument ? 2 : 1;
  }
  // A line a supervisor (or a test) can wait for; it carries the actual port when port 0 was asked for.
  std::cout << "octopd: ready on port " << daemon.http_port() << std::endl;

  int received = 0;
  sigwait(&signals, &received);
  spdlog::info("octopd: {} received, draining", received == SIGTERM ? "SIGTERM" : "SIGINT");
  daemon.Stop();
  spdlog::info("octopd: stopped");
  return 0;
}
