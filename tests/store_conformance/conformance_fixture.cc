#include "conformance_fixture.h"

#include <cstdio>
#include <cstdlib>

namespace octop::store::testing {

namespace {

std::vector<Backend> BackendsNamed(const std::string& name) {
  std::vector<Backend> out;
  for (Backend& b : AllBackends()) {
    if (b.name == name) out.push_back(std::move(b));
  }
  return out;
}

std::string BackendName(const ::testing::TestParamInfo<Backend>& info) { return info.param.name; }

}  // namespace

std::string Show(std::optional<WallTime> t) {
  if (!t) return "NULL";
  using namespace std::chrono;
  const auto us = floor<microseconds>(*t);
  const auto day = floor<days>(us);
  const year_month_day ymd{day};
  const hh_mm_ss<microseconds> hms{us - day};
  char buf[48];
  std::snprintf(buf, sizeof buf, "%04d-%02u-%02uT%02d:%02d:%02d.%06lldZ", static_cast<int>(ymd.year()),
                static_cast<unsigned>(ymd.month()), static_cast<unsigned>(ymd.day()),
                static_cast<int>(hms.hours().count()), static_cast<int>(hms.minutes().count()),
                static_cast<int>(hms.seconds().count()), static_cast<long long>(hms.subseconds().count()));
  return buf;
}

void StoreConformance::SetUp() {
  ns_ = FreshNamespace();
  store_ = OpenNode();
  ASSERT_NE(store_, nullptr);
  jobs_ = OpenJobNode();
  ASSERT_NE(jobs_, nullptr);
  if (migrate_in_setup_) {
    OCTOP_ASSERT_OK(store_->Migrate());
    OCTOP_ASSERT_OK(jobs_->Migrate());
  }
}

std::unique_ptr<TaskStore> StoreConformance::OpenNode() {
  StoreOptions options;
  options.clock = &clock_;
  return OpenNode(options, ns_);
}

std::unique_ptr<TaskStore> StoreConformance::OpenNode(const StoreOptions& options,
                                                      const std::string& ns_key) {
  auto store = GetParam().open(ns_key, options);
  EXPECT_TRUE(store.ok()) << store.status().ToString();
  if (!store.ok()) return nullptr;
  return std::move(store).value();
}

std::unique_ptr<JobStore> StoreConformance::OpenJobNode() {
  StoreOptions options;
  options.clock = &clock_;
  return OpenJobNode(options, ns_);
}

std::unique_ptr<JobStore> StoreConformance::OpenJobNode(const StoreOptions& options,
                                                        const std::string& ns_key) {
  auto store = GetParam().open_jobs(ns_key, options);
  EXPECT_TRUE(store.ok()) << store.status().ToString();
  if (!store.ok()) return nullptr;
  return std::move(store).value();
}

NamespaceAdmin& StoreConformance::admin() {
  if (!admin_) {
    StoreOptions options;
    options.clock = &clock_;
    auto opened = GetParam().open_admin(ns_, options);
    if (!opened.ok()) {
      ADD_FAILURE() << opened.status().ToString();
      std::abort();
    }
    admin_ = std::move(opened).value();
  }
  return *admin_;
}

void StoreConformance::AddTask(const std::string& id, TimeSpec start, std::string_view settings) {
  const Status s = store_->UpsertTask(
      {.id = id, .settings_json = std::string(settings), .start_at = start, .next_start_at = start});
  ASSERT_TRUE(s.ok()) << s.ToString();
}

TaskRow StoreConformance::Row(const std::string& id) {
  auto rows = store_->ListTasks({.ids = std::vector<std::string>{id}});
  EXPECT_TRUE(rows.ok()) << rows.status().ToString();
  if (!rows.ok() || rows->size() != 1) {
    ADD_FAILURE() << "no row for task " << id;
    return {};
  }
  return rows->front();
}

std::optional<ClaimedRun> StoreConformance::Claim(const std::string& id, const std::string& ticket,
                                                  std::optional<std::chrono::microseconds> timeout) {
  auto claimed = store_->TryClaimTask({.id = id, .ticket = ticket, .timeout = timeout});
  EXPECT_TRUE(claimed.ok()) << claimed.status().ToString();
  return claimed.ok() ? *claimed : std::nullopt;
}

// Test names read Sqlite/StoreConformance.ClaimIsExclusive/sqlite and Postgres/StoreConformance.X/postgres.
INSTANTIATE_TEST_SUITE_P(Sqlite, StoreConformance, ::testing::ValuesIn(BackendsNamed("sqlite")), BackendName);
INSTANTIATE_TEST_SUITE_P(Postgres, StoreConformance, ::testing::ValuesIn(BackendsNamed("postgres")),
                         BackendName);
INSTANTIATE_TEST_SUITE_P(Pgbouncer, StoreConformance, ::testing::ValuesIn(BackendsNamed("pgbouncer")),
                         BackendName);
INSTANTIATE_TEST_SUITE_P(Sqlite, StoreMigrations, ::testing::ValuesIn(BackendsNamed("sqlite")), BackendName);
INSTANTIATE_TEST_SUITE_P(Postgres, StoreMigrations, ::testing::ValuesIn(BackendsNamed("postgres")),
                         BackendName);
INSTANTIATE_TEST_SUITE_P(Pgbouncer, StoreMigrations, ::testing::ValuesIn(BackendsNamed("pgbouncer")),
                         BackendName);
GTEST_ALLOW_UNINSTANTIATED_PARAMETERIZED_TEST(StoreConformance);
GTEST_ALLOW_UNINSTANTIATED_PARAMETERIZED_TEST(StoreMigrations);

}  // namespace octop::store::testing
