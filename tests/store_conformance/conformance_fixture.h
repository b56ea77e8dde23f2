// The fixtures of the store conformance suite: every TEST_P runs once per backend of AllBackends(), on a
// namespace no other test uses, with a FakeClock driving the database's "now" (StoreOptions::clock) so times
// are exact.
//
// Tests use only the store interfaces and the test-support NamespaceAdmin: anything backend-specific (such as
// the catalog's spelling of a column type) is looked up by Store::backend() in a table here, never through
// SQL.
#ifndef OCTOP_TESTS_STORE_CONFORMANCE_CONFORMANCE_FIXTURE_H_
#define OCTOP_TESTS_STORE_CONFORMANCE_CONFORMANCE_FIXTURE_H_

#include <chrono>
#include <memory>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include <octop/testing/fake_clock.h>

#include "store/job_store.h"
#include "store/namespace_admin.h"
#include "store/task_store.h"
#include "store_test_env.h"

namespace octop::store::testing {

inline Status StatusOf(const Status& s) { return s; }
template <typename T>
Status StatusOf(const Result<T>& r) {
  return r.status();
}

#define OCTOP_ASSERT_OK(expr)                                                 \
  do {                                                                        \
    const ::octop::Status octop_s_ = ::octop::store::testing::StatusOf(expr); \
    ASSERT_TRUE(octop_s_.ok()) << #expr << " -> " << octop_s_.ToString();     \
  } while (false)
#define OCTOP_EXPECT_OK(expr)                                                 \
  do {                                                                        \
    const ::octop::Status octop_s_ = ::octop::store::testing::StatusOf(expr); \
    EXPECT_TRUE(octop_s_.ok()) << #expr << " -> " << octop_s_.ToString();     \
  } while (false)

// A time, or "NULL", as ISO text with microseconds: compared as strings so failures print readably.
std::string Show(std::optional<WallTime> t);

inline constexpr std::string_view kDurationSettings =
    R"({"version":2,"cadence":"PT2H","timeoutAfterDuration":"PT1M"})";
inline constexpr std::string_view kManualSettings =
    R"({"version":2,"cadence":"manual","timeoutAfterDuration":"PT1M"})";
inline constexpr std::string_view kCronSettings =
    R"({"version":2,"cadence":"*/15 * * * *","timeoutAfterDuration":"PT1M"})";
inline constexpr std::string_view kCancelledError = R"({"name":"Error","message":"Task was cancelled"})";

// Store tests with both migration lines applied to the test's namespace (a task store and a job store on it).
class StoreConformance : public ::testing::TestWithParam<Backend> {
 protected:
  void SetUp() override;

  // Another task store ("node") on this test's namespace, sharing the fake clock unless options say
  // otherwise.
  std::unique_ptr<TaskStore> OpenNode();
  std::unique_ptr<TaskStore> OpenNode(const StoreOptions& options, const std::string& ns_key);
  // Another job store on this test's namespace, likewise.
  std::unique_ptr<JobStore> OpenJobNode();
  std::unique_ptr<JobStore> OpenJobNode(const StoreOptions& options, const std::string& ns_key);
  // The test-support admin of this test's namespace.
  NamespaceAdmin& admin();

  // Inserts (or upserts) a task due at `start`.
  void AddTask(const std::string& id, TimeSpec start, std::string_view settings = kDurationSettings);
  // The task's row; fails the test when it is missing.
  TaskRow Row(const std::string& id);
  std::optional<ClaimedRun> Claim(const std::string& id, const std::string& ticket,
                                  std::optional<std::chrono::microseconds> timeout = std::chrono::minutes(1));

  WallTime t0() const { return t0_; }

  ::octop::testing::FakeClock clock_;  // declared first: outlives every store
  WallTime t0_ = clock_.WallNow();
  std::string ns_;
  std::unique_ptr<TaskStore> store_;
  std::unique_ptr<JobStore> jobs_;
  std::unique_ptr<NamespaceAdmin> admin_;
  bool migrate_in_setup_ = true;
};

// Migration tests start from an empty namespace.
class StoreMigrations : public StoreConformance {
 protected:
  StoreMigrations() { migrate_in_setup_ = false; }
};

}  // namespace octop::store::testing

#endif  // OCTOP_TESTS_STORE_CONFORMANCE_CONFORMANCE_FIXTURE_H_
