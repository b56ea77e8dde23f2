#include "http/monitoring_cache.h"

namespace octop::http {

MonitoringCache::MonitoringCache(MonitoringCachePolicy policy)
    : policy_(policy), clock_(policy.clock != nullptr ? *policy.clock : Clock::Real()) {}

Result<ApiResponse> MonitoringCache::Get(const std::string& key,
                                         const std::function<Result<ApiResponse>()>& compute) {
  std::lock_guard lock(mu_);
  const SteadyTime start = clock_.SteadyNow();
  if (auto it = kept_.find(key); it != kept_.end()) {
    if (start < it->second.until) return it->second.response;
    kept_.erase(it);
  }
  Result<ApiResponse> answer = compute();
  if (!answer.ok() || jobs_.load(std::memory_order_relaxed) < policy_.min_jobs) return answer;
  const auto took = clock_.SteadyNow() - start;
  const auto reuse = std::max<SteadyTime::duration>(
      std::chrono::duration_cast<SteadyTime::duration>(took * policy_.reuse_factor), policy_.min_reuse);
  kept_.insert_or_assign(key, Kept{*answer, start + took + reuse});
  return answer;
}

void MonitoringCache::Clear() {
  std::lock_guard lock(mu_);
  kept_.clear();
}

}  // namespace octop::http
