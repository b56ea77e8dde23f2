// SQLite-only checks, outside the backend-neutral suite: the on-disk text formats, reading a database a
// Backstage (knex) backend created, WAL mode, ":memory:", and migrations racing from separate processes.
#include "store/sqlite/sqlite_store.h"

#include <filesystem>
#include <fstream>
#include <random>

#include <gtest/gtest.h>
#include <sqlite3.h>
#include <sys/wait.h>
#include <unistd.h>

#include <octop/testing/fake_clock.h>

#include "store/job_store.h"
#include "store/sqlite/sqlite_time.h"
#include "store/task_store.h"

namespace octop::store {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;
using namespace std::chrono_literals;

class TempDir {
 public:
  TempDir() {
    std::random_device rd;
    path_ = std::filesystem::temp_directory_path() / ("octop-sqlite-test-" + std::to_string(rd()));
    std::filesystem::create_directories(path_);
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  std::string str() const { return path_.string(); }
  std::string File(const std::string& ns) const { return (path_ / (ns + ".sqlite")).string(); }

 private:
  std::filesystem::path path_;
};

// A raw connection for setting up and inspecting files behind the store's back.
class Raw {
 public:
  explicit Raw(const std::string& file) { EXPECT_EQ(sqlite3_open(file.c_str(), &db_), SQLITE_OK); }
  ~Raw() { sqlite3_close(db_); }
  void Exec(const std::string& sql) {
    char* err = nullptr;
    EXPECT_EQ(sqlite3_exec(db_, sql.c_str(), nullptr, nullptr, &err), SQLITE_OK) << (err ? err : "") << "\n"
                                                                                 << sql;
    sqlite3_free(err);
  }
  std::string Scalar(const std::string& sql) {
    sqlite3_stmt* stmt = nullptr;
    EXPECT_EQ(sqlite3_prepare_v2(db_, sql.c_str(), -1, &stmt, nullptr), SQLITE_OK) << sql;
    std::string out = "<no row>";
    if (stmt != nullptr && sqlite3_step(stmt) == SQLITE_ROW) {
      const auto* text = sqlite3_column_text(stmt, 0);
      out = text ? reinterpret_cast<const char*>(text) : "NULL";
    }
    sqlite3_finalize(stmt);
    return out;
  }

 private:
  sqlite3* db_ = nullptr;
};

std::unique_ptr<TaskStore> Open(const TempDir& dir, const std::string& ns,
                                const Clock* clock = &Clock::Real()) {
  StoreOptions options;
  options.ns = ns;
  options.clock = clock;
  auto store = OpenSqliteTaskStore(dir.str(), options);
  EXPECT_TRUE(store.ok()) << store.status().ToString();
  return store.ok() ? std::move(store).value() : nullptr;
}

WallTime At(int y, unsigned mo, unsigned d, int h, int mi, int s, int ms = 0) {
  using namespace std::chrono;
  return sys_days{year{y} / month{mo} / day{d}} + hours{h} + minutes{mi} + seconds{s} + milliseconds{ms};
}

TEST(SqliteTime, FormatsUtcMilliseconds) {
  EXPECT_EQ(sqlite::FormatTime(At(2026, 1, 2, 3, 4, 5, 678) + 999us), "2026-01-02 03:04:05.678");
  EXPECT_EQ(sqlite::FormatTime(At(1969, 12, 31, 23, 59, 59, 999)), "1969-12-31 23:59:59.999");
}

TEST(SqliteTime, ParsesEveryFormatWrittenToTheTable) {
  const WallTime t = At(2026, 1, 2, 3, 4, 5);
  EXPECT_EQ(sqlite::ParseTime("2026-01-02 03:04:05"), t);      // knex / CURRENT_TIMESTAMP
  EXPECT_EQ(sqlite::ParseTime("2026-01-02 03:04:05.000"), t);  // octop
  EXPECT_EQ(sqlite::ParseTime("2026-01-02T03:04:05Z"), t);     // ISO
  EXPECT_EQ(sqlite::ParseTime("2026-01-02T03:04:05.250Z"), t + 250ms);
  EXPECT_EQ(sqlite::ParseTime("2026-01-02T05:04:05+02:00"), t);  // luxon with offset
  EXPECT_EQ(sqlite::ParseTime("2026-01-01T22:04:05.123456789-0500"), t + 123456us);
  EXPECT_EQ(sqlite::ParseTime("2026-01-02 03:04"), t - 5s);
  EXPECT_EQ(sqlite::ParseTime("2026-01-02"), At(2026, 1, 2, 0, 0, 0));
  for (const char* bad : {"", "2026", "2026-13-01 00:00:00", "2026-02-30", "2026-01-02 25:00:00",
                          "2026-01-02x", "2026-01-02 03:04:05.", "2026-01-02 03:04:05+2", "yesterday"}) {
    EXPECT_EQ(sqlite::ParseTime(bad), std::nullopt) << bad;
  }
}

TEST(SqliteTime, OffsetModifiers) {
  EXPECT_EQ(sqlite::OffsetModifier(90s), "+90.000000 seconds");
  EXPECT_EQ(sqlite::OffsetModifier(-500ms), "-0.500000 seconds");
  EXPECT_EQ(sqlite::OffsetModifier(1us), "+0.000001 seconds");
}

TEST(SqliteStore, StoresMillisecondTextThatSortsAndDatetimeUnderstands) {
  TempDir dir;
  testing::FakeClock clock;
  auto store = Open(dir, "fmt", &clock);
  ASSERT_NE(store, nullptr);
  ASSERT_TRUE(store->Migrate().ok());
  ASSERT_TRUE(
      store
          ->UpsertTask({.id = "a",
                        .settings_json = R"({"version":2,"cadence":"PT1M","timeoutAfterDuration":"PT1M"})",
                        .start_at = DbNowPlus{1234ms},
                        .next_start_at = DbNowPlus{1234ms}})
          .ok());
  Raw raw(dir.File("fmt"));
  EXPECT_EQ(raw.Scalar("SELECT next_run_start_at FROM backstage_backend_tasks__tasks"),
            "2026-01-01 00:00:01.234");
  EXPECT_EQ(raw.Scalar("SELECT datetime(next_run_start_at) FROM backstage_backend_tasks__tasks"),
            "2026-01-01 00:00:01");
  EXPECT_EQ(raw.Scalar("PRAGMA journal_mode"), "wal");
}

// A file exactly as Backstage's knex migrations leave it, with rows in Backstage's formats: octop recognises
// the applied migrations, adds only its own, and reads and compares every row correctly.
TEST(SqliteStore, AdoptsADatabaseABackstageBackendCreated) {
  TempDir dir;
  {
    Raw raw(dir.File("catalog"));
    raw.Exec(R"(
      create table `backstage_backend_tasks__knex_migrations` (`id` integer not null primary key autoincrement,
        `name` varchar(255), `batch` integer, `migration_time` datetime);
      create table `backstage_backend_tasks__knex_migrations_lock` (`index` integer not null primary key
        autoincrement, `is_locked` integer);
      insert into `backstage_backend_tasks__knex_migrations_lock` (`is_locked`) values (0);
      create table `backstage_backend_tasks__tasks` (`id` varchar(255) not null, `settings_json` text not null,
        `next_run_start_at` datetime null, `current_run_ticket` text, `current_run_started_at` datetime,
        `current_run_expires_at` datetime, `last_run_error_json` text, `last_run_ended_at` datetime,
        primary key (`id`));
      insert into backstage_backend_tasks__knex_migrations (name, batch, migration_time) values
        ('20210928160613_init.js', 1, 1700000000000), ('20240712211735_nullable_next_run.js', 2, 1720000000000),
        ('20250411000000_last_run.js', 3, 1744000000000);
      insert into backstage_backend_tasks__tasks (id, settings_json, next_run_start_at) values
        ('plain', '{"version":2,"cadence":"PT1M","timeoutAfterDuration":"PT1M"}', '2026-01-01 00:00:00'),
        ('iso', '{"version":2,"cadence":"PT1M","timeoutAfterDuration":"PT1M"}', '2026-01-01T00:00:04Z'),
        ('later', '{"version":2,"cadence":"PT1M","timeoutAfterDuration":"PT1M"}', '2026-01-01T00:00:06.500Z'),
        ('manual', '{"version":2,"cadence":"manual","timeoutAfterDuration":"PT1M"}', NULL);
      insert into backstage_backend_tasks__tasks values
        ('running', '{"version":2,"cadence":"PT1M","timeoutAfterDuration":"PT1M"}', '2025-12-31 23:59:00',
         'abc', '2025-12-31 23:59:00', '2026-01-01 00:00:03', '{"name":"Error","message":"x"}',
         '2025-12-31 23:58:00');
    )");
  }
  testing::FakeClock clock(At(2026, 1, 1, 0, 0, 5));
  auto store = Open(dir, "catalog", &clock);
  ASSERT_NE(store, nullptr);
  auto version = store->SchemaVersion();
  ASSERT_TRUE(version.ok());
  EXPECT_EQ(*version, 3) << "Backstage's three migrations are recognised";
  ASSERT_TRUE(store->Migrate().ok());
  version = store->SchemaVersion();
  ASSERT_TRUE(version.ok());
  EXPECT_EQ(*version, kLatestTaskSchemaVersion);
  {
    Raw raw(dir.File("catalog"));
    EXPECT_EQ(raw.Scalar("SELECT count(*) FROM backstage_backend_tasks__knex_migrations"), "3");
  }

  auto rows = store->ListTasks({});
  ASSERT_TRUE(rows.ok()) << rows.status().ToString();
  ASSERT_EQ(rows->size(), 5u);
  std::map<std::string, TaskRow> by_id;
  for (const TaskRow& r : *rows) by_id[r.id] = r;
  EXPECT_EQ(by_id["plain"].next_run_start_at, At(2026, 1, 1, 0, 0, 0));
  EXPECT_EQ(by_id["iso"].next_run_start_at, At(2026, 1, 1, 0, 0, 4));
  EXPECT_EQ(by_id["later"].next_run_start_at, At(2026, 1, 1, 0, 0, 6, 500));
  EXPECT_EQ(by_id["manual"].next_run_start_at, std::nullopt);
  EXPECT_EQ(by_id["running"].current_run_expires_at, At(2026, 1, 1, 0, 0, 3));
  EXPECT_EQ(by_id["running"].last_run_ended_at, At(2025, 12, 31, 23, 58, 0));

  // Comparisons are by instant whatever the format ('T' sorts after ' ' as text).
  auto polled = store->PollTasks({.ids = {"plain", "iso", "later", "manual", "running"}});
  ASSERT_TRUE(polled.ok());
  std::map<std::string, bool> ready;
  for (const PolledTask& t : polled->tasks) ready[t.id] = t.ready;
  EXPECT_TRUE(ready["plain"]);
  EXPECT_TRUE(ready["iso"]);
  EXPECT_FALSE(ready["later"]);
  EXPECT_FALSE(ready["manual"]);
  EXPECT_FALSE(ready["running"]);
  auto swept = store->SweepExpiredTaskRuns({});
  ASSERT_TRUE(swept.ok());
  EXPECT_EQ(*swept, std::vector<std::string>{"running"});
  // A Backstage-format time is the anchor of a fixed-rate release.
  auto claimed = store->TryClaimTask({.id = "iso", .ticket = "t", .timeout = seconds(60)});
  ASSERT_TRUE(claimed.ok());
  ASSERT_TRUE(claimed->has_value());
  auto released =
      store->TryReleaseTask({.id = "iso", .ticket = "t", .next_run = FixedRateAfter{seconds(60)}});
  ASSERT_TRUE(released.ok() && *released);
  auto after = store->ListTasks({.ids = std::vector<std::string>{"iso"}});
  ASSERT_TRUE(after.ok());
  ASSERT_EQ(after->size(), 1u);
  EXPECT_EQ(after->front().next_run_start_at, At(2026, 1, 1, 0, 1, 4));
}

TEST(SqliteStore, AnIntegerTimeOutOfRangeIsAClearErrorNotACrash) {
  // A Backstage node on SQLite may write epoch milliseconds; a row holding a number far beyond any date
  // (written by hand, or by a broken writer) overflowed the conversion (UBSan aborted the process).
  TempDir dir;
  testing::FakeClock clock(At(2026, 1, 1, 0, 0, 5));
  {
    auto store = Open(dir, "odd", &clock);
    ASSERT_NE(store, nullptr);
    ASSERT_TRUE(store->Migrate().ok());
  }
  {
    Raw raw(dir.File("odd"));
    raw.Exec(R"(
      insert into backstage_backend_tasks__tasks (id, settings_json, next_run_start_at) values
        ('epoch', '{"version":2,"cadence":"PT1M","timeoutAfterDuration":"PT1M"}', 1767225600000);
    )");
  }
  auto store = Open(dir, "odd", &clock);
  ASSERT_NE(store, nullptr);
  auto rows = store->ListTasks({});
  ASSERT_TRUE(rows.ok()) << rows.status().ToString();
  ASSERT_EQ(rows->size(), 1u);
  EXPECT_EQ(rows->front().next_run_start_at, At(2026, 1, 1, 0, 0, 0)) << "epoch milliseconds are read";
  for (const char* huge : {"9223372036854775807", "-9223372036854775807", "1e300"}) {
    {
      Raw raw(dir.File("odd"));
      raw.Exec(std::string("update backstage_backend_tasks__tasks set next_run_start_at = ") + huge);
    }
    rows = store->ListTasks({});
    ASSERT_FALSE(rows.ok()) << huge;
    EXPECT_EQ(rows.status().code(), StatusCode::kInternal) << huge;
    EXPECT_NE(rows.status().message().find("out of range"), std::string::npos) << rows.status().ToString();
  }
}

// An unreadable value fails the statement that read it (connection.h keeps a statement's first failure):
// every operation that reads the row answers Internal, naming the column; nothing is half-read.
TEST(SqliteStore, AnUnreadableTextTimeFailsEveryReadOfItsRow) {
  TempDir dir;
  testing::FakeClock clock(At(2026, 1, 1, 0, 0, 5));
  auto store = Open(dir, "odd", &clock);
  ASSERT_NE(store, nullptr);
  ASSERT_TRUE(store->Migrate().ok());
  ASSERT_TRUE(store
                  ->UpsertTask({"t", R"({"version":2,"cadence":"PT1M","timeoutAfterDuration":"PT1M"})",
                                DbNowPlus{}, DbNowPlus{}})
                  .ok());
  {
    Raw raw(dir.File("odd"));
    raw.Exec("update backstage_backend_tasks__tasks set next_run_start_at = 'half past nine'");
  }
  auto rows = store->ListTasks({});
  ASSERT_FALSE(rows.ok());
  EXPECT_EQ(rows.status().code(), StatusCode::kInternal);
  EXPECT_NE(rows.status().message().find("next_run_start_at"), std::string::npos) << rows.status().ToString();
  auto polled = store->PollTasks({.ids = {"t"}});
  ASSERT_FALSE(polled.ok());
  EXPECT_EQ(polled.status().code(), StatusCode::kInternal);
  // The store goes on working once the row is readable again.
  {
    Raw raw(dir.File("odd"));
    raw.Exec("update backstage_backend_tasks__tasks set next_run_start_at = '2026-01-01 00:00:00.000'");
  }
  rows = store->ListTasks({});
  ASSERT_TRUE(rows.ok()) << rows.status().ToString();
  EXPECT_EQ(rows->front().next_run_start_at, At(2026, 1, 1, 0, 0, 0));
}

TEST(SqliteStore, CheckWritableSaysWhenWritesFail) {
  TempDir dir;
  testing::FakeClock clock;
  auto store = Open(dir, "octop", &clock);
  ASSERT_NE(store, nullptr);
  ASSERT_TRUE(store->Migrate().ok());
  EXPECT_TRUE(store->CheckWritable().ok());
  EXPECT_TRUE(store->CheckWritable().ok()) << "again: the probe leaves the file as it was";
  // The files turn immutable (as a file system remounted read-only after errors): reads go on, writes fail.
  const std::string file = dir.File("octop");
  const std::string files = file + " " + file + "-wal";
  if (std::system(("chattr +i " + files + " 2>/dev/null").c_str()) != 0) {
    GTEST_SKIP() << "chattr +i is not available here";
  }
  const Status status = store->CheckWritable();
  const bool listed = store->ListTasks({}).ok();
  EXPECT_EQ(std::system(("chattr -i " + files).c_str()), 0);
  EXPECT_EQ(status.code(), StatusCode::kUnavailable) << status.ToString();
  EXPECT_TRUE(listed) << "reads still work";
  EXPECT_TRUE(store->CheckWritable().ok());
}

TEST(SqliteStore, MemoryStoresArePrivate) {
  auto a = OpenTaskStore("sqlite::memory:");
  auto b = OpenTaskStore("sqlite::memory:");
  ASSERT_TRUE(a.ok() && b.ok());
  ASSERT_TRUE((*a)->Migrate().ok());
  ASSERT_TRUE((*b)->Migrate().ok());
  ASSERT_TRUE(
      (*a)->UpsertTask({.id = "x",
                        .settings_json = R"({"version":2,"cadence":"PT1M","timeoutAfterDuration":"PT1M"})",
                        .start_at = DbNowPlus{},
                        .next_start_at = DbNowPlus{}})
          .ok());
  auto rows_a = (*a)->ListTasks({});
  auto rows_b = (*b)->ListTasks({});
  ASSERT_TRUE(rows_a.ok() && rows_b.ok());
  EXPECT_EQ(rows_a->size(), 1u);
  EXPECT_TRUE(rows_b->empty());
  EXPECT_EQ((*a)->backend(), "sqlite");
}

TEST(SqliteStore, RejectsNamespacesThatAreNotFileNames) {
  TempDir dir;
  for (const char* ns : {"", "../escape", "a/b", ".hidden"}) {
    StoreOptions options;
    options.ns = ns;
    EXPECT_EQ(OpenSqliteTaskStore(dir.str(), options).status().code(), StatusCode::kInvalidArgument) << ns;
  }
}

TEST(SqliteStore, UnopenableLocationIsUnavailable) {
  TempDir dir;
  const std::string file = dir.str() + "/plain-file";
  { Raw raw(file); }
  StoreOptions options;
  auto store = OpenSqliteTaskStore(file + "/sub", options);  // a directory under a regular file
  EXPECT_EQ(store.status().code(), StatusCode::kUnavailable);
}

// Separate processes migrate one file at once; BEGIN IMMEDIATE serialises them.
TEST(SqliteStore, ConcurrentMigrateFromProcesses) {
  TempDir dir;
  constexpr int kProcesses = 6;
  std::vector<pid_t> children;
  for (int i = 0; i < kProcesses; ++i) {
    const pid_t pid = fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      StoreOptions options;
      options.ns = "shared";
      // Both lines in one file, as every namespace had them before the lines were split.
      auto store = OpenSqliteTaskStore(dir.str(), options);
      auto jobs = OpenSqliteJobStore(dir.str(), options);
      const bool ok = store.ok() && jobs.ok() && (*store)->Migrate().ok() && (*jobs)->Migrate().ok();
      _exit(ok ? 0 : 1);
    }
    children.push_back(pid);
  }
  for (pid_t pid : children) {
    int status = 0;
    ASSERT_EQ(waitpid(pid, &status, 0), pid);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  }
  Raw raw(dir.File("shared"));
  EXPECT_EQ(raw.Scalar("SELECT count(*) FROM backstage_backend_tasks__knex_migrations"), "3");
  EXPECT_EQ(raw.Scalar("SELECT count(*) FROM octop_migrations"), std::to_string(kLatestJobSchemaVersion));
  EXPECT_EQ(raw.Scalar("SELECT count(*) FROM backstage_backend_tasks__knex_migrations_lock"), "1");
}

// A 0-byte file that was not just created (a truncated database) is refused; a fresh 0-byte file (a node
// creating it this instant) and a 0-byte file whose data sits in the write-ahead log are opened.
TEST(SqliteStoreFiles, AnOldEmptyFileIsRefusedAFreshOneOpened) {
  TempDir dir;
  const std::filesystem::path file = dir.File("jobs");
  { std::ofstream touch(file); }
  StoreOptions options;
  options.ns = "jobs";
  EXPECT_TRUE(OpenSqliteTaskStore(dir.str(), options).ok()) << "a file created a moment ago";

  std::filesystem::resize_file(file, 0);
  std::filesystem::remove(file.string() + "-wal");
  std::filesystem::remove(file.string() + "-shm");
  std::filesystem::last_write_time(file,
                                   std::filesystem::file_time_type::clock::now() - std::chrono::minutes(5));
  auto refused = OpenSqliteTaskStore(dir.str(), options);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(refused.status().message().find("truncated"), std::string::npos) << refused.status().message();

  {
    std::ofstream wal(file.string() + "-wal");
    wal << "not empty";
  }
  std::filesystem::last_write_time(file,
                                   std::filesystem::file_time_type::clock::now() - std::chrono::minutes(5));
  auto with_wal = OpenSqliteTaskStore(dir.str(), options);
  EXPECT_NE(with_wal.status().code(), StatusCode::kFailedPrecondition)
      << "not refused: its data may be in the WAL";
}

}  // namespace
}  // namespace octop::store
