// JobMetrics: the job queue's instruments in a prometheus-cpp registry.
//
//   octop_jobs_enqueued_total{queue,kind}          counter: jobs written (a unique-key hit is not counted)
//   octop_jobs_completed_total{queue,kind,result}  counter: success|retry|failed|frozen|cancelled|fenced
//   octop_jobs_duration_seconds{queue,kind}        histogram: handler run time
//   octop_jobs_start_latency_seconds{queue}        histogram: start - max(scheduled_at, created_at) on the
//                                                  database's clock (how long a due job waited for a worker)
//   octop_jobs_running{queue}                      gauge: handlers running on this node
//   octop_jobs_claim_duration_seconds{queue}       histogram: round trip of each claim, empty ones included
//   octop_jobs_claimed_total{queue}                counter: jobs claimed by this node
//   octop_jobs_rescued_total                       counter: expired runs put back by this node's rescuer
//   octop_jobs_deleted_total                       counter: finished jobs removed by the retention cleanup
//
// The per-label instruments are looked up once and cached. A queue's workers resolve the instruments of a
// (queue, kind) once (SeriesFor) and then update them without any lock of this class: a job's start and end
// cost a few atomic adds and two histogram observations, not map lookups under one mutex shared by every
// worker thread (docs/performance.md, "Client-side cost per job"). Queue and kind names come from
// whoever enqueues, so the label values are bounded: a queue or kind this node works (AddKnownQueue,
// AddKnownKind) always has its own; of the others, the first kMaxOtherLabelValues names each get one too, and
// any further name is counted as "other" (docs/reliability.md, "Threat model").
//
// Ownership: shares the registry with whoever serializes it (octopd's /metrics). Thread-safety: all methods
// may be called from any thread.
#ifndef OCTOP_RUNTIME_JOB_METRICS_H_
#define OCTOP_RUNTIME_JOB_METRICS_H_

#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <prometheus/counter.h>
#include <prometheus/family.h>
#include <prometheus/gauge.h>
#include <prometheus/histogram.h>
#include <prometheus/registry.h>

namespace octop::runtime {

class JobMetrics {
 public:
  explicit JobMetrics(std::shared_ptr<prometheus::Registry> registry);

  static const std::vector<double>& DurationBuckets();
  static const std::vector<double>& LatencyBuckets();
  static const std::vector<double>& ClaimBuckets();

  // The instruments a worker updates for each job of one queue and kind. The pointers live as long as the
  // registry; prometheus-cpp's counters and gauges are atomics and a histogram locks only itself.
  struct Series {
    prometheus::Gauge* running = nullptr;       // octop_jobs_running{queue}
    prometheus::Histogram* latency = nullptr;   // octop_jobs_start_latency_seconds{queue}
    prometheus::Histogram* duration = nullptr;  // octop_jobs_duration_seconds{queue,kind}
  };
  Series SeriesFor(const std::string& queue, const std::string& kind);

  // The instruments a queue's producer updates for each claim: how long the claim took and what it brought
  // (docs/jobs.md, "Monitoring"). Same lifetime and locking as Series.
  struct ClaimSeries {
    prometheus::Histogram* duration = nullptr;  // octop_jobs_claim_duration_seconds{queue}
    prometheus::Counter* claimed = nullptr;     // octop_jobs_claimed_total{queue}
  };
  ClaimSeries ClaimSeriesFor(const std::string& queue);

  void Enqueued(const std::string& queue, const std::string& kind);
  // `result`: success | retry | failed | cancelled | fenced.
  void Completed(const std::string& queue, const std::string& kind, std::string_view result);
  void Rescued(double count);
  void Deleted(double count);
  void AddKnownQueue(const std::string& queue);
  void AddKnownKind(const std::string& kind);

  static constexpr std::size_t kMaxOtherLabelValues = 64;

  const std::shared_ptr<prometheus::Registry>& registry() const { return registry_; }

 private:
  using Key = std::pair<std::string, std::string>;

  // The label value for `name` (a queue or a kind), under mu_.
  const std::string& LabelLocked(const std::string& name, const std::set<std::string, std::less<>>& known,
                                 std::set<std::string, std::less<>>& others);
  Key LabelsLocked(const std::string& queue, const std::string& kind) {
    return {LabelLocked(queue, known_queues_, other_queues_), LabelLocked(kind, known_kinds_, other_kinds_)};
  }

  std::shared_ptr<prometheus::Registry> registry_;
  prometheus::Family<prometheus::Counter>* enqueued_;
  prometheus::Family<prometheus::Counter>* completed_;
  prometheus::Family<prometheus::Histogram>* duration_;
  prometheus::Family<prometheus::Histogram>* latency_;
  prometheus::Family<prometheus::Gauge>* running_;
  prometheus::Family<prometheus::Histogram>* claim_duration_;
  prometheus::Family<prometheus::Counter>* claimed_;
  prometheus::Counter* rescued_;
  prometheus::Counter* deleted_;

  std::mutex mu_;
  std::map<Key, prometheus::Counter*> enqueued_cache_;                           // guarded by mu_
  std::map<std::pair<Key, std::string>, prometheus::Counter*> completed_cache_;  // guarded by mu_
  std::map<Key, prometheus::Histogram*> duration_cache_;                         // guarded by mu_
  std::map<std::string, prometheus::Histogram*, std::less<>> latency_cache_;     // guarded by mu_
  std::map<std::string, prometheus::Gauge*, std::less<>> running_cache_;         // guarded by mu_
  std::map<std::string, ClaimSeries, std::less<>> claim_cache_;                  // guarded by mu_
  std::set<std::string, std::less<>> known_queues_, known_kinds_;                // guarded by mu_
  std::set<std::string, std::less<>> other_queues_, other_kinds_;                // guarded by mu_
};

}  // namespace octop::runtime

#endif  // OCTOP_RUNTIME_JOB_METRICS_H_
