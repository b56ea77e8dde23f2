// The run metrics (docs/scheduler.md, "Metrics"), read back through the Prometheus text format the HTTP layer
// serves.
#include <map>
#include <memory>
#include <stdexcept>

#include <gtest/gtest.h>
#include <prometheus/text_serializer.h>

#include <octop/scheduler.h>
#include <octop/testing/fake_clock.h>

#include "../integration/runtime_test_support.h"
#include "runtime/job_metrics.h"
#include "runtime/scheduler_metrics.h"

namespace octop {
namespace {

using runtime_testing::Iso;

std::string Scrape(const std::shared_ptr<prometheus::Registry>& registry) {
  return prometheus::TextSerializer().Serialize(registry->Collect());
}

TEST(SchedulerMetricsTest, RecordsStartsEndsAndDurations) {
  testing::FakeClock clock;
  runtime::SchedulerMetrics metrics(nullptr);
  runtime::RunOutcome ok = metrics.Run([&](std::stop_token) { clock.Advance(std::chrono::seconds(2)); },
                                       std::stop_token(), clock, "plug", "t1", TaskScope::kGlobal);
  EXPECT_FALSE(ok.error.has_value());
  EXPECT_DOUBLE_EQ(ok.seconds, 2.0);
  runtime::RunOutcome failed = metrics.Run([](std::stop_token) { throw std::runtime_error("bad"); },
                                           std::stop_token(), clock, "plug", "t1", TaskScope::kGlobal);
  EXPECT_EQ(failed.error, "bad");

  const std::string text = Scrape(metrics.registry());
  EXPECT_NE(
      text.find(
          R"(backend_tasks_task_runs_count{plugin="plug",result="started",scope="global",taskId="t1"} 2)"),
      std::string::npos)
      << text;
  EXPECT_NE(
      text.find(
          R"(backend_tasks_task_runs_count{plugin="plug",result="completed",scope="global",taskId="t1"} 1)"),
      std::string::npos);
  EXPECT_NE(
      text.find(
          R"(backend_tasks_task_runs_count{plugin="plug",result="failed",scope="global",taskId="t1"} 1)"),
      std::string::npos);
  EXPECT_NE(
      text.find(
          R"(backend_tasks_task_runs_duration_bucket{plugin="plug",result="completed",scope="global",taskId="t1",le="5"} 1)"),
      std::string::npos);
  EXPECT_NE(
      text.find(
          R"(backend_tasks_task_runs_duration_bucket{plugin="plug",result="completed",scope="global",taskId="t1",le="1"} 0)"),
      std::string::npos);
  EXPECT_NE(
      text.find(R"(backend_tasks_task_runs_duration_bucket{plugin="plug",result="completed",scope="global",)"
                R"(taskId="t1",le="3600"} 1)"),
      std::string::npos);
  // 2026-01-01T00:00:00Z is 1767225600 s after the epoch; the first run started there.
  EXPECT_NE(
      text.find("backend_tasks_task_runs_started{plugin=\"plug\",scope=\"global\",taskId=\"t1\"} 176722560"),
      std::string::npos);
  EXPECT_NE(text.find("backend_tasks_task_runs_completed{plugin=\"plug\",result=\"failed\",scope=\"global\","
                      "taskId=\"t1\"} 176722560"),
            std::string::npos);
}

TEST(SchedulerMetricsTest, TheSchedulerExposesItsRegistryAndCountsLocalRuns) {
  testing::FakeClock clock;
  SchedulerOptions options;
  options.clock = &clock;
  options.logger = [](LogLevel, std::string_view) {};
  runtime_testing::CallCounter calls;  // outlives the scheduler's run threads
  Scheduler scheduler(options);
  TaskDefinition task;
  task.id = "loc";
  task.frequency = Iso("PT1H");
  task.timeout = Iso("PT1M");
  task.scope = TaskScope::kLocal;
  task.fn = [&](std::stop_token) { calls.Hit(); };
  ASSERT_TRUE(scheduler.ForPlugin("p").ScheduleTask(task).ok());
  ASSERT_TRUE(calls.WaitForCalls(1));
  ASSERT_TRUE(runtime_testing::Eventually([&] {
    return Scrape(scheduler.metrics_registry())
               .find(
                   R"(backend_tasks_task_runs_count{plugin="p",result="completed",scope="local",taskId="loc"} 1)") !=
           std::string::npos;
  }));
}

// Job kinds and queues are chosen by whoever enqueues: 3,000 invented kinds once made 3,001 series.
TEST(JobMetricsTest, InventedKindsAndQueuesFoldIntoOtherPastTheBound) {
  auto registry = std::make_shared<prometheus::Registry>();
  runtime::JobMetrics metrics(registry);
  metrics.AddKnownQueue("mail");
  metrics.AddKnownKind("email");
  for (int i = 0; i < 3000; ++i) {
    metrics.Enqueued("q" + std::to_string(i), "k" + std::to_string(i));
    metrics.Completed("mail", "k" + std::to_string(i), "failed");
    metrics.SeriesFor("q" + std::to_string(i), "email").running->Increment();
  }
  metrics.Enqueued("mail", "email");  // a worked queue and kind keep their own series, whatever came before
  const runtime::JobMetrics::Series mail = metrics.SeriesFor("mail", "email");
  mail.duration->Observe(0.5);
  EXPECT_EQ(metrics.SeriesFor("mail", "email").duration, mail.duration);  // resolved once, the same series
  std::size_t enqueued_series = 0, completed_series = 0, running_series = 0;
  double other_enqueued = 0;
  bool email_seen = false;
  for (const prometheus::MetricFamily& family : registry->Collect()) {
    for (const prometheus::ClientMetric& m : family.metric) {
      std::map<std::string, std::string> labels;
      for (const auto& l : m.label) labels[l.name] = l.value;
      if (family.name == "octop_jobs_enqueued_total") {
        ++enqueued_series;
        if (labels["kind"] == "other" && labels["queue"] == "other") other_enqueued = m.counter.value;
        email_seen = email_seen || (labels["kind"] == "email" && labels["queue"] == "mail");
      }
      if (family.name == "octop_jobs_completed_total") ++completed_series;
      if (family.name == "octop_jobs_running") ++running_series;
    }
  }
  const std::size_t bound = runtime::JobMetrics::kMaxOtherLabelValues;
  EXPECT_EQ(enqueued_series, bound + 2);  // 64 named, "other", and mail/email
  EXPECT_EQ(other_enqueued, 3000.0 - static_cast<double>(bound));
  EXPECT_TRUE(email_seen);
  EXPECT_EQ(completed_series, bound + 1);  // the kinds share the one bound
  EXPECT_EQ(running_series, bound + 2);    // the worker's series fold the same way: 64 named, "other", mail
}

}  // namespace
}  // namespace octop
