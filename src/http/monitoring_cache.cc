#include "http/monitoring_cache.h"

#include <algorithm>

namespace octop::http {

namespace {
// Distinct answers kept at once (a summary, and stats per window, bucket, queue and kind asked for).
constexpr std::size_t kMaxKept = 64;
}  // namespace

MonitoringCache::MonitoringCache(MonitoringCachePolicy policy)
    : policy_(policy), clock_(policy.clock != nullptr ? *policy.clock : Clock::Real()) {}

Result<ApiResponse> MonitoringCache::Get(const std::string& key,
                                         const std::function<Result<ApiResponse>()>& compute) {
  std::lock_guard lock(mu_);
  const SteadyTime start = clock_.SteadyNow();
  // Aged answers go, whatever their key: parameters nobody asks for again must not stay in memory.
  std::erase_if(kept_, [&](const auto& entry) { return entry.second.until <= start; });
  if (auto it = kept_.find(key); it != kept_.end()) return it->second.response;
  Result<ApiResponse> answer = compute();
  if (!answer.ok() || jobs_.load(std::memory_order_relaxed) < policy_.min_jobs) return answer;
  const auto took = clock_.SteadyNow() - start;
  const auto reuse = std::max<SteadyTime::duration>(
      std::chrono::duration_cast<SteadyTime::duration>(took * policy_.reuse_factor), policy_.min_reuse);
  if (kept_.size() >= kMaxKept) kept_.clear();  // many distinct parameters at once: keep none of them long
  kept_.insert_or_assign(key, Kept{*answer, start + took + reuse});
  return answer;
}

void MonitoringCache::Clear() {
  std::lock_guard lock(mu_);
  kept_.clear();
}

}  // namespace octop::http
