// octop_chaos_action: the command octopd runs for the chaos test's global tasks and jobs. It appends a
// 'start' row and an 'end' row to the append-only table chaos_run_log around a bounded piece of work (a
// sleep); the rows' times come from the database's clock (clock_timestamp()), so a node under faketime cannot
// misplace them. One process and one connection per run: a shell with psql costs seconds per run on a loaded
// 2-core machine.
//
//   octop_chaos_action task MIN_MS MAX_MS [OVERRUN_PERCENT OVERRUN_MS]     OCTOP_TASK_ID names the task
//   octop_chaos_action job      payload {"ms": N, "fail": PERCENT, "slow": PERCENT, "slowMs": N} on stdin
// Environment (set by the chaos driver on each octopd and inherited): CHAOS_DB_URL, CHAOS_NODE (the octopd
// incarnation, e.g. n2.3), CHAOS_WORK (this process registers itself in CHAOS_WORK/procs while it runs, so
// scripts/run-chaos.sh can end what a SIGKILLed octopd left behind; octopd makes each command a process group
// leader, so the pid names the group).
//
// SIGTERM (the run's timeout, a cancel or octopd's shutdown) ends the work early: the run logs 'end' with
// detail 'killed' and exits 143. Exit 1 is a planned failure (detail 'fail'), 0 success ('ok').
#include <atomic>
#include <chrono>
#include <csignal>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <iterator>
#include <random>
#include <string>
#include <thread>

#include <libpq-fe.h>
#include <nlohmann/json.hpp>
#include <unistd.h>

namespace {

using namespace std::chrono_literals;

std::atomic<bool> g_terminated{false};

std::string Env(const char* name) {
  const char* v = std::getenv(name);
  if (v == nullptr) {
    std::cerr << "octop_chaos_action: " << name << " is not set\n";
    std::exit(2);
  }
  return v;
}

// Inserts one row, reconnecting for up to ~20 s so that a PostgreSQL restart does not lose it. The row
// carries its lag: how long after the event the successful insert was sent (monotonic clock, which faketime
// leaves alone), so the event's database time is `at - lag_s`; the network time is not subtracted, so events
// still look a little later than they were, never earlier.
class RunLog {
 public:
  RunLog(std::string url, std::string kind, std::string key, std::string node, int attempt, std::string run)
      : url_(std::move(url)),
        kind_(std::move(kind)),
        key_(std::move(key)),
        node_(std::move(node)),
        attempt_(std::to_string(attempt)),
        run_(std::move(run)) {}
  RunLog(const RunLog&) = delete;
  RunLog& operator=(const RunLog&) = delete;
  ~RunLog() {
    if (conn_ != nullptr) PQfinish(conn_);
  }

  bool Append(const std::string& event, const std::string& detail) {
    const char* values[] = {kind_.c_str(), key_.c_str(), node_.c_str(), attempt_.c_str(),
                            event.c_str(), run_.c_str(), detail.c_str()};
    const auto deadline = std::chrono::steady_clock::now() + 20s;
    while (std::chrono::steady_clock::now() < deadline) {
      if (conn_ == nullptr || PQstatus(conn_) != CONNECTION_OK) {
        if (conn_ != nullptr) PQfinish(conn_);
        conn_ = PQconnectdb((url_ + "?connect_timeout=3&application_name=chaos-action").c_str());
      }
      if (PQstatus(conn_) == CONNECTION_OK) {
        PGresult* r =
            PQexecParams(conn_,
                         "INSERT INTO public.chaos_run_log (kind, key, node, attempt, event, run, detail) "
                         "VALUES ($1, $2, $3, $4::int, $5, $6, $7)",
                         7, nullptr, values, nullptr, nullptr, 0);
        const bool ok = PQresultStatus(r) == PGRES_COMMAND_OK;
        PQclear(r);
        if (ok) return true;
      }
      std::this_thread::sleep_for(200ms);  // re-dial cadence while the server restarts
    }
    std::cerr << "octop_chaos_action: could not log " << event << " of " << kind_ << " " << key_ << ": "
              << PQerrorMessage(conn_) << "\n";
    return false;
  }

 private:
  std::string url_, kind_, key_, node_, attempt_, run_;
  PGconn* conn_ = nullptr;
};

std::string NewRunId(std::mt19937_64& rng) {
  static const char* kHex = "0123456789abcdef";
  std::string id;
  for (int i = 0; i < 32; ++i) id += kHex[rng() % 16];
  return id;
}

}  // namespace

int main(int argc, char** argv) {
  std::signal(SIGTERM, [](int) { g_terminated = true; });
  if (argc < 2) {
    std::cerr << "usage: octop_chaos_action task MIN_MS MAX_MS [OVERRUN_PERCENT OVERRUN_MS] | job\n";
    return 2;
  }
  std::mt19937_64 rng(std::random_device{}());
  auto percent = [&rng](long p) { return static_cast<long>(rng() % 100) < p; };
  const std::string mode = argv[1];
  std::string key;
  int attempt = 0;
  long ms = 0;
  long fail_percent = 0;
  if (mode == "task" && argc >= 4) {
    key = Env("OCTOP_TASK_ID");
    const long min_ms = std::atol(argv[2]);
    const long max_ms = std::atol(argv[3]);
    ms = min_ms + static_cast<long>(rng() % static_cast<std::uint64_t>(max_ms - min_ms + 1));
    if (argc >= 6 && percent(std::atol(argv[4]))) ms = std::atol(argv[5]);
  } else if (mode == "job") {
    key = Env("OCTOP_JOB_ID");
    attempt = std::atoi(Env("OCTOP_JOB_ATTEMPT").c_str());
    const std::string text{std::istreambuf_iterator<char>(std::cin), std::istreambuf_iterator<char>()};
    const nlohmann::json payload = nlohmann::json::parse(text, nullptr, false);
    auto field = [&payload](const char* name, long fallback) {
      return payload.is_object() && payload.contains(name) && payload[name].is_number_integer()
                 ? payload[name].get<long>()
                 : fallback;
    };
    ms = field("ms", 100);
    fail_percent = field("fail", 0);
    if (percent(field("slow", 0))) ms = field("slowMs", 10000);
  } else {
    std::cerr << "octop_chaos_action: bad arguments\n";
    return 2;
  }

  const std::filesystem::path proc =
      std::filesystem::path(Env("CHAOS_WORK")) / "procs" / std::to_string(::getpid());
  std::ofstream(proc) << ::getpid() << "\n";
  int code = 0;
  {
    RunLog log(Env("CHAOS_DB_URL"), mode, key, Env("CHAOS_NODE"), attempt, NewRunId(rng));
    log.Append("start", "");
    const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(ms);
    while (!g_terminated && std::chrono::steady_clock::now() < until) {
      std::this_thread::sleep_for(std::min<std::chrono::steady_clock::duration>(
          20ms, until - std::chrono::steady_clock::now()));  // the work; a SIGTERM ends it within 20 ms
    }
    if (g_terminated) {
      log.Append("end", "killed");
      code = 143;
    } else if (percent(fail_percent)) {
      log.Append("end", "fail");
      std::cerr << "chaos: planned failure of " << mode << " " << key << " attempt " << attempt << "\n";
      code = 1;
    } else {
      log.Append("end", "ok");
    }
  }
  std::error_code ec;
  std::filesystem::remove(proc, ec);
  return code;
}
