#include "runtime/job_metrics.h"

namespace octop::runtime {

JobMetrics::JobMetrics(std::shared_ptr<prometheus::Registry> registry)
    : registry_(registry ? std::move(registry) : std::make_shared<prometheus::Registry>()),
      enqueued_(&prometheus::BuildCounter()
                     .Name("octop_jobs_enqueued_total")
                     .Help("Jobs enqueued by this node")
                     .Register(*registry_)),
      completed_(&prometheus::BuildCounter()
                      .Name("octop_jobs_completed_total")
                      .Help("Job attempts finished on this node, by result")
                      .Register(*registry_)),
      duration_(&prometheus::BuildHistogram()
                     .Name("octop_jobs_duration_seconds")
                     .Help("Run time of job handlers")
                     .Register(*registry_)),
      latency_(&prometheus::BuildHistogram()
                    .Name("octop_jobs_start_latency_seconds")
                    .Help("Time from a job being due to its start, on the database's clock")
                    .Register(*registry_)),
      running_(&prometheus::BuildGauge()
                    .Name("octop_jobs_running")
                    .Help("Job handlers running on this node")
                    .Register(*registry_)),
      claim_duration_(&prometheus::BuildHistogram()
                           .Name("octop_jobs_claim_duration_seconds")
                           .Help("Round trip of one claim of jobs by this node, empty claims included")
                           .Register(*registry_)),
      claimed_(&prometheus::BuildCounter()
                    .Name("octop_jobs_claimed_total")
                    .Help("Jobs claimed by this node")
                    .Register(*registry_)),
      rescued_(&prometheus::BuildCounter()
                    .Name("octop_jobs_rescued_total")
                    .Help("Expired job runs put back to pending by this node's rescuer")
                    .Register(*registry_)
                    .Add({})),
      deleted_(&prometheus::BuildCounter()
                    .Name("octop_jobs_deleted_total")
                    .Help("Finished jobs deleted by this node's retention cleanup")
                    .Register(*registry_)
                    .Add({})) {}

const std::vector<double>& JobMetrics::DurationBuckets() {
  static const std::vector<double> buckets = {0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1,
                                              5,     10,    30,   60,   300, 1800};
  return buckets;
}

const std::vector<double>& JobMetrics::LatencyBuckets() {
  static const std::vector<double> buckets = {0.0005, 0.001, 0.002, 0.005, 0.01, 0.025, 0.05, 0.1,
                                              0.25,   0.5,   1,     2.5,   5,    10,    60};
  return buckets;
}

const std::vector<double>& JobMetrics::ClaimBuckets() {
  static const std::vector<double> buckets = {0.0005, 0.001, 0.002, 0.005, 0.01, 0.025, 0.05,
                                              0.1,    0.25,  0.5,   1,     2.5,  5};
  return buckets;
}

const std::string& JobMetrics::LabelLocked(const std::string& name,
                                           const std::set<std::string, std::less<>>& known,
                                           std::set<std::string, std::less<>>& others) {
  static const std::string kOther = "other";
  if (known.contains(name)) return name;
  if (auto it = others.find(name); it != others.end()) return *it;
  if (others.size() >= kMaxOtherLabelValues) return kOther;
  return *others.insert(name).first;
}

void JobMetrics::AddKnownQueue(const std::string& queue) {
  std::lock_guard lock(mu_);
  known_queues_.insert(queue);
}

void JobMetrics::AddKnownKind(const std::string& kind) {
  std::lock_guard lock(mu_);
  known_kinds_.insert(kind);
}

void JobMetrics::Enqueued(const std::string& queue, const std::string& kind) {
  std::lock_guard lock(mu_);
  const Key labels = LabelsLocked(queue, kind);
  auto& c = enqueued_cache_[labels];
  if (c == nullptr) c = &enqueued_->Add({{"queue", labels.first}, {"kind", labels.second}});
  c->Increment();
}

void JobMetrics::Completed(const std::string& queue, const std::string& kind, std::string_view result) {
  std::lock_guard lock(mu_);
  const Key labels = LabelsLocked(queue, kind);
  auto& c = completed_cache_[{labels, std::string(result)}];
  if (c == nullptr) {
    c = &completed_->Add({{"queue", labels.first}, {"kind", labels.second}, {"result", std::string(result)}});
  }
  c->Increment();
}

JobMetrics::Series JobMetrics::SeriesFor(const std::string& queue, const std::string& kind) {
  std::lock_guard lock(mu_);
  const Key labels = LabelsLocked(queue, kind);
  Series series;
  auto& duration = duration_cache_[labels];
  if (duration == nullptr)
    duration = &duration_->Add({{"queue", labels.first}, {"kind", labels.second}}, DurationBuckets());
  series.duration = duration;
  auto latency = latency_cache_.find(labels.first);
  if (latency == latency_cache_.end()) {
    latency =
        latency_cache_.emplace(labels.first, &latency_->Add({{"queue", labels.first}}, LatencyBuckets()))
            .first;
  }
  series.latency = latency->second;
  auto running = running_cache_.find(labels.first);
  if (running == running_cache_.end())
    running = running_cache_.emplace(labels.first, &running_->Add({{"queue", labels.first}})).first;
  series.running = running->second;
  return series;
}

JobMetrics::ClaimSeries JobMetrics::ClaimSeriesFor(const std::string& queue) {
  std::lock_guard lock(mu_);
  const std::string& label = LabelLocked(queue, known_queues_, other_queues_);
  auto it = claim_cache_.find(label);
  if (it == claim_cache_.end()) {
    const prometheus::Labels labels = {{"queue", label}};
    it = claim_cache_
             .emplace(label,
                      ClaimSeries{&claim_duration_->Add(labels, ClaimBuckets()), &claimed_->Add(labels)})
             .first;
  }
  return it->second;
}

void JobMetrics::Rescued(double count) { rescued_->Increment(count); }
void JobMetrics::Deleted(double count) { deleted_->Increment(count); }

}  // namespace octop::runtime
