// octop_chaos: the chaos test (docs/reliability.md). N octopd processes share one PostgreSQL; they run a few
// global tasks with short cadences and timeouts and a job handler fed by a stream of jobs posted over REST. A
// seeded driver SIGKILLs and restarts nodes, freezes them (SIGSTOP longer than the timeouts, then SIGCONT),
// restarts PostgreSQL, restarts nodes under faketime with a skewed wall clock and steps a running node's wall
// clock by two hours and back. Then the stream stops, the cluster settles, the nodes stop gracefully, and the
// invariants are checked from what the database recorded (run_log_checks.h). Figures are printed as
// "chaos: key=value" lines; the exit status is 0 only when every invariant held.
//
//   octop_chaos --pg-dir DIR --octopd PATH [--seconds S] [--nodes N] [--seed X] [--work DIR] [--jobs-per-s R]
//               [--prefetch P]
// --prefetch sets every node's jobs.prefetch (default 0), so held jobs are handed back under the chaos too.
// The PostgreSQL server in DIR (scripts/pg-test-server.sh start DIR) is restarted with
// `pg-test-server.sh restart DIR`; OCTOP_CHAOS_PG_DIR and OCTOP_CHAOS_SEED stand in for --pg-dir and --seed.
//
// Threads: the main thread drives the chaos and owns the nodes; one producer thread posts jobs (it reads the
// nodes' ports under a mutex).
#include <algorithm>
#include <atomic>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <random>
#include <regex>
#include <sstream>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include <fcntl.h>
#include <httplib.h>
#include <libpq-fe.h>
#include <nlohmann/json.hpp>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include "run_log_checks.h"

extern char** environ;  // NOLINT: POSIX

namespace octop::chaos {
namespace {

using namespace std::chrono_literals;
namespace fs = std::filesystem;
using SteadyTime = std::chrono::steady_clock::time_point;
using Json = nlohmann::json;

std::atomic<bool> g_interrupted{false};

double SecondsSince(SteadyTime t) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
}

void Say(const std::string& line) { std::cout << "chaos: " << line << std::endl; }

// One libpq connection of the driver; every query is retried across a PostgreSQL restart.
class Db {
 public:
  explicit Db(std::string url) : url_(std::move(url)) {}
  Db(const Db&) = delete;
  Db& operator=(const Db&) = delete;
  ~Db() {
    if (conn_ != nullptr) PQfinish(conn_);
  }

  using Row = std::vector<std::optional<std::string>>;
  std::vector<Row> Query(const std::string& sql) {
    const auto deadline = std::chrono::steady_clock::now() + 60s;
    std::string error;
    while (std::chrono::steady_clock::now() < deadline) {
      if (conn_ == nullptr || PQstatus(conn_) != CONNECTION_OK) {
        if (conn_ != nullptr) PQfinish(conn_);
        conn_ = PQconnectdb(url_.c_str());
        if (PQstatus(conn_) != CONNECTION_OK) {
          error = PQerrorMessage(conn_);
          std::this_thread::sleep_for(200ms);  // the server is restarting: re-dial cadence
          continue;
        }
      }
      PGresult* res = PQexec(conn_, sql.c_str());
      const ExecStatusType st = PQresultStatus(res);
      if (st == PGRES_TUPLES_OK || st == PGRES_COMMAND_OK) {
        std::vector<Row> rows;
        for (int r = 0; r < PQntuples(res); ++r) {
          Row row;
          for (int c = 0; c < PQnfields(res); ++c) {
            if (PQgetisnull(res, r, c)) {
              row.emplace_back(std::nullopt);
            } else {
              row.emplace_back(PQgetvalue(res, r, c));
            }
          }
          rows.push_back(std::move(row));
        }
        PQclear(res);
        return rows;
      }
      error = PQresultErrorMessage(res);
      PQclear(res);
      if (PQstatus(conn_) == CONNECTION_OK) throw std::runtime_error("SQL failed: " + error + "\n" + sql);
      std::this_thread::sleep_for(200ms);
    }
    throw std::runtime_error("PostgreSQL unreachable for 60 s: " + error);
  }
  std::string Scalar(const std::string& sql) {
    auto rows = Query(sql);
    if (rows.empty() || rows[0].empty() || !rows[0][0]) return "";
    return *rows[0][0];
  }

 private:
  std::string url_;
  PGconn* conn_ = nullptr;
};

// Runs a program to completion; its exit status (128 + signal when killed).
int RunProgram(const std::vector<std::string>& argv) {
  std::vector<char*> args;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  pid_t pid = 0;
  if (::posix_spawnp(&pid, args[0], nullptr, nullptr, args.data(), environ) != 0) return 127;
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

struct Options {
  std::string pg_dir;
  std::string octopd;
  std::string action;
  std::string pg_script;
  std::string work;
  double seconds = 75;
  int nodes = 4;
  double jobs_per_s = 3;
  int prefetch = 0;  // jobs.prefetch of every node
  std::uint64_t seed = 0;
  bool short_form = false;
};

enum class NodeState { kRunning, kStopped, kDead };

// One octopd slot; every (re)start is a new incarnation with its own name, log file and database session
// name.
struct Node {
  int index = 0;
  int incarnation = 0;
  pid_t pid = -1;
  int port = 0;
  int skew_s = 0;  // the wall clock's offset this incarnation starts with
  int step_s = 0;  // a step made while it runs (the clock-step chaos), on top of the skew
  NodeState state = NodeState::kDead;
  std::string name;
  fs::path log;
  std::optional<SteadyTime> frozen_since;
};

class Cluster {
 public:
  Cluster(const Options& options, std::string base_url) : options_(options), base_url_(std::move(base_url)) {}
  Cluster(const Cluster&) = delete;
  Cluster& operator=(const Cluster&) = delete;
  ~Cluster() {
    for (Node& n : nodes_) {
      if (n.pid > 0 && n.state != NodeState::kDead) {
        ::kill(n.pid, SIGCONT);
        ::kill(n.pid, SIGKILL);
        int status = 0;
        ::waitpid(n.pid, &status, 0);
      }
    }
  }

  void WriteConfig() {
    const std::string a = options_.action;
    auto task = [&a](const std::string& id, const std::string& every, const std::string& timeout,
                     const std::string& args) {
      return "      - id: " + id + "\n        schedule: { frequency: " + every + ", timeout: " + timeout +
             ", initialDelay: 2s }\n        command: { argv: [" + a + ", task, " + args +
             "], killGrace: 10s }\n";
    };
    std::ofstream(config_path()) << "# generated by octop_chaos\n"
                                    // A schema per plugin: the audit triggers below sit on the
                                    // plugin's table in the run log's own database.
                                    "database:\n  connection: ${CHAOS_OCTOP_DB_URL}\n"
                                    "  pluginDivisionMode: schema\n"
                                    "nodeId: ${CHAOS_NODE}\n"
                                    "logLevel: info\n"
                                    "http:\n  listen: 127.0.0.1:0\n"
                                    "scheduler:\n  workCheckFrequency: 1s\n  janitorInterval: 1s\n"
                                    "plugins:\n  chaos:\n    tasks:\n"
                                 << task("fast", "1s", "6s", "'100', '400'")
                                 << task("mid", "2s", "6s", "'500', '1500'")
                                 << task("overrun", "3s", "3s", "'200', '800', '25', '5000'")
                                 << "jobs:\n  prefetch: " << options_.prefetch
                                 << "\n  handlers:\n    - kind: work\n      concurrency: 4\n"
                                    "      timeout: 8s\n      command: { argv: ["
                                 << a << ", job], killGrace: 10s }\n";
  }

  fs::path ClockFile(const Node& n) const {
    return fs::path(options_.work) / ("n" + std::to_string(n.index) + ".faketime");
  }
  void WriteClockOffset(const Node& n) const {
    const int offset = n.skew_s + n.step_s;
    const fs::path file = ClockFile(n);
    std::ofstream(file.string() + ".tmp") << (offset >= 0 ? "+" : "") << offset << "\n";
    fs::rename(file.string() + ".tmp", file);
  }

  // Steps a running node's wall clock to skew + step (libfaketime reads the file within a second).
  void StepClock(Node& n, int step_s) {
    n.step_s = step_s;
    WriteClockOffset(n);
  }

  void Add(int skew_s) {
    Node n;
    n.index = static_cast<int>(nodes_.size());
    n.skew_s = skew_s;
    nodes_.push_back(n);
    Start(nodes_.back());
  }

  // Starts a new incarnation of the slot and waits until it serves.
  void Start(Node& n) {
    ++n.incarnation;
    n.name = "n" + std::to_string(n.index) + "." + std::to_string(n.incarnation);
    n.log = fs::path(options_.work) / (n.name + ".log");
    std::vector<std::string> env;
    for (char** e = environ; *e != nullptr; ++e) {
      std::string entry(*e);
      if (entry.starts_with("ASAN_OPTIONS=")) continue;
      env.push_back(entry);
    }
    env.push_back("CHAOS_OCTOP_DB_URL=" + base_url_ + "?application_name=" + n.name);
    env.push_back("CHAOS_DB_URL=" + base_url_);
    env.push_back("CHAOS_NODE=" + n.name);
    env.push_back("CHAOS_WORK=" + options_.work);
    {
      // Only the wall clock moves, as on a host whose NTP is off or steps; the monotonic clock stays true.
      // The offset is read from a file (re-read every second), so a running node's clock can step.
      n.step_s = 0;
      WriteClockOffset(n);
      env.push_back("LD_PRELOAD=/usr/lib/x86_64-linux-gnu/faketime/libfaketimeMT.so.1");
      env.push_back("FAKETIME_TIMESTAMP_FILE=" + ClockFile(n).string());
      env.push_back("FAKETIME_CACHE_DURATION=1");
      env.push_back("FAKETIME_DONT_FAKE_MONOTONIC=1");
      // ASan insists on coming first in the library list; faketime's preload comes before it.
      const char* asan = std::getenv("ASAN_OPTIONS");
      env.push_back(std::string("ASAN_OPTIONS=") + (asan != nullptr ? std::string(asan) + ":" : "") +
                    "verify_asan_link_order=0");
    }
    std::vector<char*> envp;
    for (auto& e : env) envp.push_back(e.data());
    envp.push_back(nullptr);
    std::vector<std::string> argv{options_.octopd, "--config", config_path().string()};
    std::vector<char*> args;
    for (auto& s : argv) args.push_back(s.data());
    args.push_back(nullptr);

    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0);
    posix_spawn_file_actions_addopen(&actions, 1, n.log.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
    posix_spawn_file_actions_adddup2(&actions, 1, 2);
    pid_t pid = 0;
    const int rc = ::posix_spawn(&pid, args[0], &actions, nullptr, args.data(), envp.data());
    posix_spawn_file_actions_destroy(&actions);
    if (rc != 0) throw std::runtime_error("cannot start " + options_.octopd + ": " + std::strerror(rc));
    {
      std::lock_guard lock(mu_);
      n.pid = pid;
      n.state = NodeState::kDead;  // not serving yet
    }
    std::ofstream(fs::path(options_.work) / "pids", std::ios::app) << pid << "\n";

    const std::regex ready("ready on port ([0-9]+)");
    const auto deadline = std::chrono::steady_clock::now() + 60s;
    while (std::chrono::steady_clock::now() < deadline) {
      std::ifstream in(n.log);
      std::stringstream text;
      text << in.rdbuf();
      std::smatch m;
      const std::string s = text.str();
      if (std::regex_search(s, m, ready)) {
        std::lock_guard lock(mu_);
        n.port = std::stoi(m[1].str());
        n.state = NodeState::kRunning;
        return;
      }
      int status = 0;
      if (::waitpid(pid, &status, WNOHANG) == pid) {
        n.pid = -1;
        throw std::runtime_error(n.name + " exited at start:\n" + s);
      }
      std::this_thread::sleep_for(50ms);  // re-read cadence of the node's log while it starts
    }
    throw std::runtime_error(n.name + " did not report ready within 60 s (" + n.log.string() + ")");
  }

  // SIGKILL; the node's running commands live on in their own process groups, as after a real crash.
  void Kill(Node& n) {
    ::kill(n.pid, SIGKILL);
    Reap(n);
  }

  // SIGTERM and a graceful exit; the exit status (-1 when it did not exit within the deadline).
  int Terminate(Node& n, std::chrono::seconds deadline = 60s) {
    ::kill(n.pid, SIGTERM);
    const auto until = std::chrono::steady_clock::now() + deadline;
    while (std::chrono::steady_clock::now() < until) {
      int status = 0;
      if (::waitpid(n.pid, &status, WNOHANG) == n.pid) {
        std::lock_guard lock(mu_);
        n.state = NodeState::kDead;
        n.pid = -1;
        return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
      }
      std::this_thread::sleep_for(20ms);  // exit-poll cadence
    }
    Kill(n);
    return -1;
  }

  void Freeze(Node& n) {
    ::kill(n.pid, SIGSTOP);
    std::lock_guard lock(mu_);
    n.state = NodeState::kStopped;
    n.frozen_since = std::chrono::steady_clock::now();
  }
  void Thaw(Node& n) {
    ::kill(n.pid, SIGCONT);
    std::lock_guard lock(mu_);
    n.state = NodeState::kRunning;
    n.frozen_since.reset();
  }

  // A node that exited on its own (a crash) since the last look; reaps it.
  std::optional<std::string> FindCrashed() {
    for (Node& n : nodes_) {
      if (n.pid <= 0 || n.state == NodeState::kDead) continue;
      int status = 0;
      if (::waitpid(n.pid, &status, WNOHANG) == n.pid) {
        {
          std::lock_guard lock(mu_);
          n.state = NodeState::kDead;
          n.pid = -1;
        }
        const int code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
        return n.name + " exited by itself with status " + std::to_string(code) + " (log " + n.log.string() +
               ")";
      }
    }
    return std::nullopt;
  }

  std::vector<int> HealthyPorts() {
    std::lock_guard lock(mu_);
    std::vector<int> ports;
    for (const Node& n : nodes_) {
      if (n.state == NodeState::kRunning) ports.push_back(n.port);
    }
    return ports;
  }
  std::vector<Node*> Healthy() {
    std::vector<Node*> out;
    for (Node& n : nodes_) {
      if (n.state == NodeState::kRunning) out.push_back(&n);
    }
    return out;
  }
  std::vector<Node>& nodes() { return nodes_; }
  fs::path config_path() const { return fs::path(options_.work) / "octop.yaml"; }

 private:
  void Reap(Node& n) {
    int status = 0;
    ::waitpid(n.pid, &status, 0);
    std::lock_guard lock(mu_);
    n.state = NodeState::kDead;
    n.pid = -1;
  }

  const Options& options_;
  std::string base_url_;
  std::mutex mu_;  // guards state/port/pid for the producer's reads
  std::vector<Node> nodes_;
};

// Posts jobs to healthy nodes at a steady rate; remembers the id of every job whose creation was
// acknowledged.
class Producer {
 public:
  Producer(Cluster& cluster, double per_second, std::uint64_t seed)
      : cluster_(cluster), per_second_(per_second), rng_(seed) {}
  Producer(const Producer&) = delete;
  Producer& operator=(const Producer&) = delete;
  ~Producer() { Stop(); }

  void Start() {
    thread_ = std::jthread([this](std::stop_token stop) { Run(stop); });
  }
  void Stop() {
    if (thread_.joinable()) {
      thread_.request_stop();
      thread_.join();
    }
  }
  const std::vector<std::string>& ids() const { return ids_; }
  int failed_posts() const { return failed_posts_; }

 private:
  void Run(std::stop_token stop) {
    const auto period = std::chrono::duration_cast<std::chrono::steady_clock::duration>(
        std::chrono::duration<double>(1.0 / per_second_));
    auto next = std::chrono::steady_clock::now();
    while (!stop.stop_requested()) {
      Json body{{"kind", "work"},
                {"maxRetries", std::uniform_int_distribution<int>(0, 3)(rng_)},
                {"payload",
                 {{"ms", std::uniform_int_distribution<int>(50, 600)(rng_)},
                  {"fail", 25},
                  {"slow", 4},
                  {"slowMs", 10000}}}};
      PostOne(body.dump(), stop);
      next += period;
      std::this_thread::sleep_until(next);  // the stream's pace
    }
  }

  void PostOne(const std::string& body, std::stop_token stop) {
    for (int attempt = 0; attempt < 50 && !stop.stop_requested(); ++attempt) {
      std::vector<int> ports = cluster_.HealthyPorts();
      if (!ports.empty()) {
        const int port = ports[std::uniform_int_distribution<std::size_t>(0, ports.size() - 1)(rng_)];
        httplib::Client client("127.0.0.1", port);
        client.set_connection_timeout(1, 0);
        client.set_read_timeout(5, 0);
        auto r = client.Post("/api/octop/v1/jobs", body, "application/json");
        if (r && r->status == 201) {
          ids_.push_back(Json::parse(r->body).at("id").get<std::string>());
          return;
        }
      }
      ++failed_posts_;
      std::this_thread::sleep_for(100ms);  // another node, or the same after a PostgreSQL restart
    }
  }

  Cluster& cluster_;
  double per_second_;
  std::mt19937_64 rng_;
  std::vector<std::string> ids_;  // read after Stop()
  int failed_posts_ = 0;
  std::jthread thread_;
};

void CreateLogTables(Db& db) {
  db.Query(R"SQL(
CREATE TABLE public.chaos_run_log (
  id bigserial PRIMARY KEY, kind text NOT NULL, key text NOT NULL, node text NOT NULL, attempt int NOT NULL,
  event text NOT NULL CHECK (event IN ('start', 'end')), run text NOT NULL, detail text NOT NULL DEFAULT '',
  lag_s float8 NOT NULL DEFAULT 0 CHECK (lag_s >= 0),
  at timestamptz NOT NULL DEFAULT clock_timestamp());
CREATE FUNCTION public.chaos_append_only() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN RAISE EXCEPTION 'chaos_run_log is append-only'; END $$;
CREATE TRIGGER chaos_append_only BEFORE UPDATE OR DELETE ON public.chaos_run_log
  FOR EACH STATEMENT EXECUTE FUNCTION public.chaos_append_only();
CREATE TABLE public.chaos_task_audit (
  id bigserial PRIMARY KEY, at timestamptz NOT NULL DEFAULT clock_timestamp(),
  app text NOT NULL DEFAULT current_setting('application_name'), task text NOT NULL, old_ticket text,
  new_ticket text, new_expires timestamptz, ended_changed boolean NOT NULL);
CREATE TABLE public.chaos_job_audit (
  id bigserial PRIMARY KEY, at timestamptz NOT NULL DEFAULT clock_timestamp(),
  app text NOT NULL DEFAULT current_setting('application_name'), job text NOT NULL, old_status text,
  new_status text NOT NULL, old_token text, new_token text, old_expires timestamptz, new_expires timestamptz,
  new_error text, new_attempt int);
)SQL");
}

// Triggers on octop's own tables, once octopd has created them: every change of a task's run ticket and of a
// job's status or attempt token is appended, with the writing session's application_name (the node).
void CreateAuditTriggers(Db& db) {
  db.Query(R"SQL(
CREATE FUNCTION public.chaos_task_audit_fn() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF OLD.current_run_ticket IS DISTINCT FROM NEW.current_run_ticket THEN
    INSERT INTO public.chaos_task_audit (task, old_ticket, new_ticket, new_expires, ended_changed)
    VALUES (NEW.id, OLD.current_run_ticket, NEW.current_run_ticket, NEW.current_run_expires_at,
            -- a release writes the end; so does the janitor, with its own error, and that is a sweep
            OLD.last_run_ended_at IS DISTINCT FROM NEW.last_run_ended_at AND
            NEW.last_run_error_json IS DISTINCT FROM '{"name":"Error","message":"Task timed out"}');
  END IF;
  RETURN NEW;
END $$;
CREATE TRIGGER chaos_task_audit AFTER UPDATE ON chaos.backstage_backend_tasks__tasks
  FOR EACH ROW EXECUTE FUNCTION public.chaos_task_audit_fn();
CREATE FUNCTION public.chaos_job_audit_fn() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF TG_OP = 'INSERT' OR OLD.status IS DISTINCT FROM NEW.status
     OR OLD.attempt_token IS DISTINCT FROM NEW.attempt_token THEN
    INSERT INTO public.chaos_job_audit (job, old_status, new_status, old_token, new_token, old_expires,
                                        new_expires, new_error, new_attempt)
    VALUES (NEW.id::text, CASE WHEN TG_OP = 'UPDATE' THEN OLD.status END, NEW.status,
            CASE WHEN TG_OP = 'UPDATE' THEN OLD.attempt_token END, NEW.attempt_token,
            CASE WHEN TG_OP = 'UPDATE' THEN OLD.expires_at END, NEW.expires_at, NEW.last_error,
            NEW.attempt);
  END IF;
  RETURN NEW;
END $$;
CREATE TRIGGER chaos_job_audit AFTER INSERT OR UPDATE ON octop.octop_jobs
  FOR EACH ROW EXECUTE FUNCTION public.chaos_job_audit_fn();
)SQL");
}

double ToDouble(const std::optional<std::string>& v) { return v ? std::strtod(v->c_str(), nullptr) : 0; }
std::optional<double> ToOptDouble(const std::optional<std::string>& v) {
  if (!v) return std::nullopt;
  return std::strtod(v->c_str(), nullptr);
}
std::string Str(const std::optional<std::string>& v) { return v.value_or(""); }

// Lines containing `needle` in the node logs of `dir` (only the log of incarnation `node` unless it is
// empty).
int CountInFiles(const fs::path& dir, const std::string& node, const std::string& needle) {
  int count = 0;
  for (const auto& entry : fs::directory_iterator(dir)) {
    if (entry.path().extension() != ".log") continue;
    if (!node.empty() && entry.path().stem() != node) continue;
    std::ifstream in(entry.path());
    std::string line;
    while (std::getline(in, line)) {
      if (line.find(needle) != std::string::npos) ++count;
    }
  }
  return count;
}

// Sum of octop_jobs_completed_total{result="fenced"} over a node's /metrics.
double FencedCompletions(int port) {
  httplib::Client client("127.0.0.1", port);
  client.set_read_timeout(5, 0);
  auto r = client.Get("/metrics");
  if (!r || r->status != 200) return 0;
  double sum = 0;
  std::istringstream in(r->body);
  std::string line;
  while (std::getline(in, line)) {
    if (line.starts_with("octop_jobs_completed_total") &&
        line.find("result=\"fenced\"") != std::string::npos) {
      sum += std::strtod(line.substr(line.rfind(' ') + 1).c_str(), nullptr);
    }
  }
  return sum;
}

enum class Chaos { kKill, kFreeze, kPgRestart, kPgCrash, kSkew, kStep };
const char* Name(Chaos c) {
  switch (c) {
    case Chaos::kKill:
      return "kill";
    case Chaos::kFreeze:
      return "freeze";
    case Chaos::kPgRestart:
      return "pg-restart";
    case Chaos::kPgCrash:
      return "pg-crash";
    case Chaos::kSkew:
      return "skew";
    case Chaos::kStep:
      return "clock-step";
  }
  return "?";
}

struct Planned {
  double at_s;
  Chaos what;
  double freeze_s = 0;
};

// The schedule: the short form places each kind at least once (one freeze long enough for a job's expiry plus
// the rescuer's period) at random moments in slots; the long form draws events every 4..12 s.
std::vector<Planned> Plan(const Options& o, std::mt19937_64& rng) {
  std::vector<Planned> plan;
  auto uniform = [&rng](double a, double b) { return std::uniform_real_distribution<double>(a, b)(rng); };
  if (o.short_form) {
    // The long freeze comes early, so its victim's stale runs are swept, re-run and fenced while chaos goes
    // on.
    plan.push_back({uniform(5, 12), Chaos::kFreeze, 30});
    std::vector<Planned> kinds{{0, Chaos::kKill},   {0, Chaos::kPgRestart},
                               {0, Chaos::kSkew},   {0, Chaos::kStep},
                               {0, Chaos::kKill},   {0, Chaos::kFreeze, uniform(7, 10)},
                               {0, Chaos::kPgCrash}};
    std::shuffle(kinds.begin(), kinds.end(), rng);
    const double usable = o.seconds - 15;  // the last freeze ends before the stream stops
    const double slot = usable / static_cast<double>(kinds.size());
    for (std::size_t i = 0; i < kinds.size(); ++i) {
      kinds[i].at_s = 3 + slot * static_cast<double>(i) + uniform(0, slot * 0.8);
      plan.push_back(kinds[i]);
    }
    std::sort(plan.begin(), plan.end(), [](const Planned& a, const Planned& b) { return a.at_s < b.at_s; });
    return plan;
  }
  double t = 5;
  while (t < o.seconds - 35) {
    const double r = uniform(0, 1);
    Chaos what = r < 0.3     ? Chaos::kKill
                 : r < 0.55  ? Chaos::kFreeze
                 : r < 0.625 ? Chaos::kPgRestart
                 : r < 0.7   ? Chaos::kPgCrash
                 : r < 0.85  ? Chaos::kSkew
                             : Chaos::kStep;
    plan.push_back({t, what, what == Chaos::kFreeze ? uniform(3, 30) : 0});
    t += uniform(4, 12);
  }
  return plan;
}

struct PgRestart {
  double postmaster_start = 0;  // database clock, epoch seconds
};

int Main(const Options& o) {
  const auto t0 = std::chrono::steady_clock::now();
  std::ifstream port_file(fs::path(o.pg_dir) / "port");
  int pg_port = 0;
  if (!(port_file >> pg_port)) throw std::runtime_error("no PostgreSQL port in " + o.pg_dir + "/port");
  const std::string url = "postgresql://octop@127.0.0.1:" + std::to_string(pg_port) + "/octop_test";
  fs::create_directories(fs::path(o.work) / "procs");
  Say("seed=" + std::to_string(o.seed) + " (OCTOP_CHAOS_SEED=" + std::to_string(o.seed) +
      " reruns the schedule)");
  Say("nodes=" + std::to_string(o.nodes) + " chaos_seconds=" + std::to_string(static_cast<int>(o.seconds)) +
      " jobs_per_s=" + std::to_string(o.jobs_per_s) + " prefetch=" + std::to_string(o.prefetch) +
      " work=" + o.work + " database=" + url);

  Db db(url);
  CreateLogTables(db);
  std::mt19937_64 rng(o.seed);
  std::vector<std::string> violations;
  Cluster cluster(o, url);
  cluster.WriteConfig();
  cluster.Add(0);
  CreateAuditTriggers(db);  // before any task's initial delay (2 s) has passed
  for (int i = 1; i < o.nodes; ++i) cluster.Add(i == o.nodes - 1 ? 30 : 0);
  Say("cluster up in " + std::to_string(SecondsSince(t0)) + " s; node n" + std::to_string(o.nodes - 1) +
      " runs with its wall clock +30 s (faketime)");

  Producer producer(cluster, o.jobs_per_s, o.seed + 1);
  producer.Start();

  std::vector<Planned> plan = Plan(o, rng);
  std::ostringstream planned;
  planned.precision(1);
  for (const Planned& p : plan) planned << std::fixed << " " << Name(p.what) << "@" << p.at_s << "s";
  Say("plan:" + planned.str());
  std::size_t next_event = 0;
  enum class Then { kThaw, kRestart, kStepBack };
  struct Pending {
    SteadyTime at;
    Node* node;
    Then then;
  };
  std::vector<Pending> pending;
  std::map<Chaos, int> done;
  std::vector<PgRestart> pg_restarts;
  int stale_ticket_windows = 0;
  std::vector<std::string> frozen_names;
  const auto chaos_start = std::chrono::steady_clock::now();
  auto elapsed = [&] { return SecondsSince(chaos_start); };
  auto pick = [&rng](std::vector<Node*> v) {
    return v[std::uniform_int_distribution<std::size_t>(0, v.size() - 1)(rng)];
  };

  while (elapsed() < o.seconds && !g_interrupted) {
    if (auto crashed = cluster.FindCrashed()) {
      violations.push_back(*crashed);
      Say("VIOLATION " + *crashed);
      for (Node& n : cluster.nodes()) {
        if (n.state == NodeState::kDead)
          pending.push_back({std::chrono::steady_clock::now(), &n, Then::kRestart});
      }
    }
    const auto now = std::chrono::steady_clock::now();
    for (auto it = pending.begin(); it != pending.end();) {
      if (it->at > now) {
        ++it;
        continue;
      }
      Node& n = *it->node;
      if (it->then == Then::kThaw) {
        cluster.Thaw(n);
        Say("t=" + std::to_string(elapsed()) + " SIGCONT " + n.name);
      } else if (it->then == Then::kStepBack) {
        if (n.step_s != 0 && n.state != NodeState::kDead) {
          Say("t=" + std::to_string(elapsed()) + " clock-step: " + n.name + "'s wall clock steps back by " +
              std::to_string(-n.step_s) + " s");
          cluster.StepClock(n, 0);
        }
      } else if (n.state == NodeState::kDead) {
        cluster.Start(n);
        Say("t=" + std::to_string(elapsed()) + " restarted as " + n.name +
            (n.skew_s != 0 ? " (wall clock " + std::to_string(n.skew_s) + " s)" : ""));
      }
      it = pending.erase(it);
    }
    if (next_event < plan.size() && elapsed() >= plan[next_event].at_s) {
      const Planned& p = plan[next_event];
      std::vector<Node*> healthy = cluster.Healthy();
      const std::string t = "t=" + std::to_string(elapsed()) + " ";
      if (p.what == Chaos::kPgRestart || p.what == Chaos::kPgCrash) {
        // A crash (immediate stop, then recovery from the WAL) must lose nothing that was acknowledged: the
        // server is durable (run-chaos.sh), and every commit octop acts on waits for its flush.
        const bool crash = p.what == Chaos::kPgCrash;
        const auto before = std::chrono::steady_clock::now();
        const int rc = RunProgram({o.pg_script, crash ? "crash-restart" : "restart", o.pg_dir});
        if (rc != 0) throw std::runtime_error("pg-test-server.sh restart failed: " + std::to_string(rc));
        pg_restarts.push_back({ToDouble(
            db.Query("SELECT extract(epoch FROM pg_postmaster_start_time())::float8").at(0).at(0))});
        Say(t + (crash ? "PostgreSQL crashed and recovered (" : "PostgreSQL restarted (") +
            std::to_string(SecondsSince(before)) + " s)");
      } else if (healthy.size() < 2) {
        plan[next_event].at_s += 1;  // keep one node serving: postpone
        continue;
      } else if (p.what == Chaos::kKill) {
        Node* n = pick(healthy);
        Say(t + "SIGKILL " + n->name);
        cluster.Kill(*n);
        pending.push_back({std::chrono::steady_clock::now() +
                               std::chrono::milliseconds(std::uniform_int_distribution<int>(500, 3000)(rng)),
                           n, Then::kRestart});
      } else if (p.what == Chaos::kFreeze) {
        Node* n = pick(healthy);
        Say(t + "SIGSTOP " + n->name + " for " + std::to_string(p.freeze_s) + " s");
        cluster.Freeze(*n);
        if (p.freeze_s > 4) ++stale_ticket_windows;
        frozen_names.push_back(n->name);
        pending.push_back({std::chrono::steady_clock::now() +
                               std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                                   std::chrono::duration<double>(p.freeze_s)),
                           n, Then::kThaw});
      } else if (p.what == Chaos::kStep) {
        // A running node's wall clock jumps two hours either way (an NTP step, a VM resume) and back after a
        // while; its monotonic clock and the database's clock do not move (docs/reliability.md, "Clock
        // steps").
        Node* n = pick(healthy);
        const int step = std::uniform_int_distribution<int>(0, 1)(rng) == 0 ? -7200 : 7200;
        Say(t + "clock-step: " + n->name + "'s wall clock steps " + (step > 0 ? "+" : "") +
            std::to_string(step) + " s");
        cluster.StepClock(*n, step);
        pending.push_back(
            {std::chrono::steady_clock::now() +
                 std::chrono::milliseconds(std::uniform_int_distribution<int>(5000, 15000)(rng)),
             n, Then::kStepBack});
      } else {
        Node* n = pick(healthy);
        const int old_skew = n->skew_s;
        const int skews[] = {-30, 30, 0};
        do {
          n->skew_s = skews[std::uniform_int_distribution<int>(0, 2)(rng)];
        } while (n->skew_s == old_skew);
        const std::string old_name = n->name;
        const int code = cluster.Terminate(*n);
        if (code != 0) {
          violations.push_back(old_name + " exited with status " + std::to_string(code) + " after SIGTERM");
        }
        cluster.Start(*n);
        Say(t + "skew: " + old_name + " stopped gracefully (status " + std::to_string(code) + "), " +
            n->name + " runs with its wall clock " + std::to_string(n->skew_s) + " s");
      }
      ++done[p.what];
      ++next_event;
      continue;
    }
    std::this_thread::sleep_for(100ms);  // the driver's tick: the schedule's resolution
  }
  for (Pending& p : pending) {
    if (p.then == Then::kThaw) {
      cluster.Thaw(*p.node);
    } else if (p.then == Then::kStepBack) {
      if (p.node->state != NodeState::kDead) cluster.StepClock(*p.node, 0);
    } else if (p.node->state == NodeState::kDead) {
      cluster.Start(*p.node);
    }
  }
  pending.clear();
  producer.Stop();
  const double chaos_s = elapsed();
  Say("stream stopped after " + std::to_string(chaos_s) + " s: " + std::to_string(producer.ids().size()) +
      " jobs acknowledged, " + std::to_string(producer.failed_posts()) + " posts retried");

  // Settle: every job final. Deadline: a job lost in the last moments waits for its expiry (8 s + 5 s grace),
  // the rescuer's period (15 s) and its backoff; its retries may be lost again only if chaos went on.
  const auto settle_start = std::chrono::steady_clock::now();
  std::string left;
  while (SecondsSince(settle_start) < 120 && !g_interrupted) {
    left = db.Scalar("SELECT count(*) FROM octop.octop_jobs WHERE status NOT IN ('success', 'frozen')");
    if (left == "0") break;
    if (auto crashed = cluster.FindCrashed()) violations.push_back(*crashed);
    std::this_thread::sleep_for(250ms);  // re-check cadence of the settle query
  }
  Say("settled in " + std::to_string(SecondsSince(settle_start)) + " s (" + left + " jobs not final)");

  double fenced_jobs = 0;
  for (int port : cluster.HealthyPorts()) fenced_jobs += FencedCompletions(port);
  for (Node& n : cluster.nodes()) {
    if (n.state == NodeState::kDead) continue;
    const std::string name = n.name;
    const int code = cluster.Terminate(n);
    if (code != 0)
      violations.push_back(name + " exited with status " + std::to_string(code) + " after SIGTERM");
  }
  // Orphaned commands of SIGKILLed nodes finish by themselves (their work is bounded); their rows count.
  const auto orphans_deadline = std::chrono::steady_clock::now() + 40s;
  while (!fs::is_empty(fs::path(o.work) / "procs") && std::chrono::steady_clock::now() < orphans_deadline) {
    std::this_thread::sleep_for(100ms);  // re-check cadence
  }

  std::vector<RunLogRow> rows;
  for (auto& r :
       db.Query("SELECT kind, key, node, run, event, detail, attempt, extract(epoch FROM at)::float8 - lag_s "
                "FROM public.chaos_run_log ORDER BY id")) {
    rows.push_back({Str(r[0]), Str(r[1]), Str(r[2]), Str(r[3]), Str(r[4]), Str(r[5]), std::stoi(Str(r[6])),
                    ToDouble(r[7])});
  }
  std::vector<TaskAudit> task_audit;
  for (auto& r :
       db.Query("SELECT extract(epoch FROM at)::float8, app, task, old_ticket, new_ticket, "
                "extract(epoch FROM new_expires)::float8, ended_changed FROM public.chaos_task_audit "
                "ORDER BY id")) {
    task_audit.push_back(
        {ToDouble(r[0]), Str(r[1]), Str(r[2]), r[3], r[4], ToOptDouble(r[5]), Str(r[6]) == "t"});
  }
  std::vector<JobAudit> job_audit;
  for (auto& r : db.Query(
           "SELECT extract(epoch FROM at)::float8, app, job, old_status, new_status, old_token, new_token, "
           "extract(epoch FROM old_expires)::float8, extract(epoch FROM new_expires)::float8, new_error, "
           "new_attempt "
           "FROM public.chaos_job_audit ORDER BY id")) {
    job_audit.push_back({ToDouble(r[0]), Str(r[1]), Str(r[2]), Str(r[3]), Str(r[4]), r[5], r[6],
                         ToOptDouble(r[7]), ToOptDouble(r[8]), Str(r[9]), std::stoi(Str(r[10]))});
  }
  std::vector<JobInfo> jobs;
  for (auto& r : db.Query("SELECT id::text, status, attempt, max_retries FROM octop.octop_jobs")) {
    jobs.push_back({Str(r[0]), Str(r[1]), std::stoi(Str(r[2])), std::stoi(Str(r[3]))});
  }

  CheckReport report;
  const std::vector<Run> runs = PairRuns(rows);
  CheckTasks(runs, task_audit, report);
  CheckJobs(runs, job_audit, jobs, producer.ids(), report);
  violations.insert(violations.end(), report.violations.begin(), report.violations.end());

  // Recovery after each PostgreSQL restart: the first task claim and the first job success after the server's
  // start, on the database's clock.
  double worst_task_recovery = 0;
  double worst_job_recovery = 0;
  for (const PgRestart& r : pg_restarts) {
    const std::string since = "to_timestamp(" + std::to_string(r.postmaster_start) + ")";
    worst_task_recovery = std::max(
        worst_task_recovery,
        ToDouble(
            db.Query("SELECT extract(epoch FROM min(at))::float8 - " + std::to_string(r.postmaster_start) +
                     " FROM public.chaos_task_audit WHERE new_ticket IS NOT NULL AND at > " + since)[0][0]));
    worst_job_recovery = std::max(
        worst_job_recovery,
        ToDouble(
            db.Query("SELECT extract(epoch FROM min(at))::float8 - " + std::to_string(r.postmaster_start) +
                     " FROM public.chaos_job_audit WHERE old_status = 'running' AND new_status = 'success' "
                     "AND at > " +
                     since)[0][0]));
  }
  const int fenced_releases = CountInFiles(o.work, "", "was no longer owned by this node");
  int fenced_after_wake = 0;
  for (const std::string& name : frozen_names)
    fenced_after_wake += CountInFiles(o.work, name, "was no longer owned by this node");

  std::ostringstream figures;
  figures.precision(2);
  figures << std::fixed << "figures: seed=" << o.seed << " nodes=" << o.nodes
          << " duration_s=" << SecondsSince(t0) << " chaos_s=" << chaos_s << " kills=" << done[Chaos::kKill]
          << " freezes=" << done[Chaos::kFreeze] << " pg_restarts=" << done[Chaos::kPgRestart]
          << " pg_crashes=" << done[Chaos::kPgCrash] << " skew_restarts=" << done[Chaos::kSkew]
          << " clock_steps=" << done[Chaos::kStep] << " task_runs=" << report.task_runs
          << " task_claims=" << report.task_claims << " tickets_swept=" << report.tickets_swept
          << " fenced_task_releases=" << fenced_releases << " of_which_by_frozen_nodes=" << fenced_after_wake
          << " allowed_overlaps=" << report.allowed_overlaps << " max_overlap_s=" << report.max_overlap_s
          << " jobs=" << report.jobs << " jobs_acknowledged=" << producer.ids().size()
          << " job_runs=" << report.job_runs << " success=" << report.jobs_success
          << " frozen=" << report.jobs_frozen << " retries=" << report.retries
          << " rescued=" << report.jobs_rescued << " fenced_job_completions=" << fenced_jobs
          << " pg_recovery_task_s=" << worst_task_recovery << " pg_recovery_job_s=" << worst_job_recovery;
  Say(figures.str());
  if (stale_ticket_windows > 0 && report.tickets_swept == 0) {
    Say("note: no ticket was swept during a freeze (fencing not exercised this run)");
  }
  for (const std::string& v : violations) Say("VIOLATION " + v);
  if (g_interrupted) {
    Say("FAIL (interrupted)");
    return 1;
  }
  Say(violations.empty()
          ? "PASS"
          : "FAIL (" + std::to_string(violations.size()) + " violations; logs in " + o.work + ")");
  return violations.empty() ? 0 : 1;
}

}  // namespace
}  // namespace octop::chaos

int main(int argc, char** argv) {
  using octop::chaos::Options;
  Options o;
  o.octopd = OCTOP_CHAOS_OCTOPD;
  o.action = OCTOP_CHAOS_ACTION;
  o.pg_script = OCTOP_CHAOS_PG_SCRIPT;
  if (const char* d = std::getenv("OCTOP_CHAOS_PG_DIR")) o.pg_dir = d;
  if (const char* s = std::getenv("OCTOP_CHAOS_SEED"); s != nullptr && *s != '\0') {
    o.seed = std::strtoull(s, nullptr, 10);
  } else {
    o.seed = std::random_device()();
  }
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) throw std::invalid_argument(a + " needs a value");
      return argv[++i];
    };
    try {
      if (a == "--pg-dir") {
        o.pg_dir = value();
      } else if (a == "--octopd") {
        o.octopd = value();
      } else if (a == "--seconds") {
        o.seconds = std::stod(value());
      } else if (a == "--nodes") {
        o.nodes = std::stoi(value());
      } else if (a == "--seed") {
        o.seed = std::stoull(value());
      } else if (a == "--work") {
        o.work = value();
      } else if (a == "--jobs-per-s") {
        o.jobs_per_s = std::stod(value());
      } else if (a == "--prefetch") {
        o.prefetch = std::stoi(value());
      } else if (a == "--short") {
        o.short_form = true;
      } else {
        throw std::invalid_argument("unknown argument " + a);
      }
    } catch (const std::exception& e) {
      std::cerr << "octop_chaos: " << e.what() << "\n";
      return 2;
    }
  }
  if (o.pg_dir.empty() || o.nodes < 2 || o.seconds < 40 || o.prefetch < 0 || o.prefetch > 1000) {
    std::cerr
        << "usage: octop_chaos --pg-dir DIR [--octopd PATH] [--seconds S>=40] [--nodes N>=2] [--seed X] "
           "[--work DIR] [--jobs-per-s R] [--prefetch 0..1000] [--short]\n";
    return 2;
  }
  if (o.work.empty()) {
    std::string tmpl = "/tmp/octop-chaos.XXXXXX";
    if (::mkdtemp(tmpl.data()) == nullptr) return 2;
    o.work = tmpl;
  }
  std::signal(SIGINT, [](int) { octop::chaos::g_interrupted = true; });
  std::signal(SIGTERM, [](int) { octop::chaos::g_interrupted = true; });
  try {
    return octop::chaos::Main(o);
  } catch (const std::exception& e) {
    std::cout << "chaos: FAIL: " << e.what() << std::endl;
    return 1;
  }
}
