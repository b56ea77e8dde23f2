#include "http/monitoring_cache.h"

#include <algorithm>

namespace octop::http {

namespace {
// Distinct answers kept at once (a summary, stats and job lists per set of parameters asked for), and the
// largest answer kept: a job list may carry megabytes of payloads, so at most 64 MiB stay in memory.
constexpr std::size_t kMaxKept = 64;
constexpr std::size_t kMaxKeptBytes = 1 << 20;
}  // namespace

MonitoringCache::MonitoringCache(MonitoringCachePolicy policy)
    : policy_(policy), clock_(policy.clock != nullptr ? *policy.clock : Clock::Real()) {}

Result<ApiResponse> MonitoringCache::Get(const std::string& key,
                                         const std::function<Result<ApiResponse>()>& compute) {
  const std::int64_t jobs = jobs_.load(std::memory_order_relaxed);
  if (jobs >= 0 && jobs < policy_.min_jobs) {
    // A small table's reads are cheap: computed side by side. The summary that finds the table large is kept.
    // Until a summary has counted, the table may be large: one answer at a time, as below.
    const SteadyTime start = clock_.SteadyNow();
    const std::uint64_t cleared = clears_.load();
    Result<ApiResponse> answer = compute();
    if (answer.ok() && jobs_.load(std::memory_order_relaxed) >= policy_.min_jobs) {
      std::lock_guard lock(mu_);
      // Not an answer read before an operator's action that ended meanwhile: Clear() must drop every such
      // one.
      if (clears_.load() == cleared) KeepLocked(key, *answer, start);
    }
    return answer;
  }
  std::lock_guard lock(mu_);
  const SteadyTime start = clock_.SteadyNow();
  // Aged answers go, whatever their key: parameters nobody asks for again must not stay in memory.
  std::erase_if(kept_, [&](const auto& entry) { return entry.second.until <= start; });
  if (auto it = kept_.find(key); it != kept_.end()) return it->second.response;
  Result<ApiResponse> answer = compute();
  if (answer.ok() && jobs_.load(std::memory_order_relaxed) >= policy_.min_jobs)
    KeepLocked(key, *answer, start);
  return answer;
}

void MonitoringCache::KeepLocked(const std::string& key, const ApiResponse& answer, SteadyTime start) {
  if (answer.body.size() > kMaxKeptBytes) return;
  const auto took = clock_.SteadyNow() - start;
  const auto reuse = std::max<SteadyTime::duration>(
      std::chrono::duration_cast<SteadyTime::duration>(took * policy_.reuse_factor), policy_.min_reuse);
  if (kept_.size() >= kMaxKept) kept_.clear();  // many distinct parameters at once: keep none of them long
  kept_.insert_or_assign(key, Kept{answer, start + took + reuse});
}

void MonitoringCache::Clear() {
  std::lock_guard lock(mu_);
  ++clears_;
  kept_.clear();
}

}  // namespace octop::http
