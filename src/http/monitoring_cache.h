// MonitoringCache: the answers of the job API's monitoring reads (GET /jobs/summary, /jobs/stats and the job
// lists, GET /jobs?...), reused for a while once the job table is large (docs/api.md, "Monitoring reads on a
// large history").
//
// These reads go through the whole history of finished jobs: no index serves them, since an index on a status
// or a completion time would cost every claim and completion its HOT update (docs/store.md §8.5). With a
// million rows one summary takes a few hundred milliseconds of the database's CPU, a list of failed jobs
// about a hundred, and every open dashboard asks for a summary and two lists every two seconds. So an answer
// computed while the last summary counted at least `min_jobs` jobs is kept for `reuse_factor` times what it
// took (at least `min_reuse`), and every request in that time gets it: the database then spends at most about
// 1 / (1 + reuse_factor) of a core on each kind of answer per node, however many viewers poll. Below
// `min_jobs` nothing is kept, so a small queue's summary is always current. An operator's action through the
// API (retry, cancel, pause, resume) drops every kept answer, so its effect shows at once.
//
// Ages are measured on the policy's clock (the real one in octopd: this is about the database's load, not the
// schedule). On a large table, and until a summary has counted the jobs, one answer is computed at a time:
// requests that arrive meanwhile wait for it, and those asking for the same one then get it (so ten
// dashboards opened on a node that just started compute one summary, not ten). On a small table every request
// computes its own, side by side.
//
// Thread-safety: all methods may be called from any thread.
#ifndef OCTOP_HTTP_MONITORING_CACHE_H_
#define OCTOP_HTTP_MONITORING_CACHE_H_

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <string>

#include <octop/clock.h>
#include <octop/status.h>

#include "http/api_server.h"

namespace octop::http {

struct MonitoringCachePolicy {
  std::int64_t min_jobs = 100'000;  // answers are kept only while the last summary counted this many jobs
  double reuse_factor = 20;         // ...for this many times what they took to compute
  std::chrono::milliseconds min_reuse{2000};  // ...and at least this long (the dashboard's poll interval)
  const Clock* clock = nullptr;               // nullptr: Clock::Real()
};

class MonitoringCache {
 public:
  explicit MonitoringCache(MonitoringCachePolicy policy);
  MonitoringCache(const MonitoringCache&) = delete;
  MonitoringCache& operator=(const MonitoringCache&) = delete;

  // The kept answer for `key` if it is young enough, else compute()'s (kept if the job table is large, it
  // succeeded and its body is at most 1 MiB). An error is returned, never kept.
  Result<ApiResponse> Get(const std::string& key, const std::function<Result<ApiResponse>()>& compute);
  // What the summary counted: decides whether answers are kept. Called by a summary's compute().
  void NoteJobCount(std::int64_t jobs) { jobs_.store(jobs, std::memory_order_relaxed); }
  // Drops every kept answer.
  void Clear();

 private:
  struct Kept {
    ApiResponse response;
    SteadyTime until;
  };
  // Keeps `answer`, computed from `start`, for its reuse time (unless it is too large). mu_ must be held.
  void KeepLocked(const std::string& key, const ApiResponse& answer, SteadyTime start);

  const MonitoringCachePolicy policy_;
  const Clock& clock_;
  std::mutex mu_;                         // held while an answer is computed: one at a time
  std::map<std::string, Kept> kept_;      // guarded by mu_
  std::atomic<std::int64_t> jobs_{-1};    // -1: no summary has counted yet
  std::atomic<std::uint64_t> clears_{0};  // Clear() calls so far (written under mu_)
};

}  // namespace octop::http

#endif  // OCTOP_HTTP_MONITORING_CACHE_H_
