// SqliteTaskStore: the TaskStore of the embedded backend (store/task_store.h for the contract, tasks.sql and
// docs/store.md for the SQL). Every operation is one statement on a leased connection (plus a lookup that
// tells a missing row from a busy one); SQLite's single writer makes each claim and release atomic.
#include <algorithm>
#include <string>
#include <utility>
#include <variant>

#include "sqlite_queries.h"
#include "store/sqlite/sqlite_namespace.h"
#include "store/sqlite/sqlite_store.h"
#include "store/sqlite/sqlite_time.h"
#include "store/task_store.h"

namespace octop::store::sqlite {

namespace {

// A row of ListTasks's statements; an unreadable time fails `row`.
TaskRow ReadTaskRow(Stmt& row) {
  TaskRow task;
  task.id = row.Text(0);
  task.settings_json = row.Text(1);
  task.next_run_start_at = row.Time(2);
  task.current_run_ticket = row.OptText(3);
  task.current_run_started_at = row.Time(4);
  task.current_run_expires_at = row.Time(5);
  task.last_run_error_json = row.OptText(6);
  task.last_run_ended_at = row.Time(7);
  return task;
}

// A TimeSpec other than FixedRateAfter as the text to store (nullopt = NULL).
Result<std::optional<std::string>> Resolve(Connection& conn, const TimeSpec& spec, const std::string& now) {
  if (const auto* plus = std::get_if<DbNowPlus>(&spec)) {
    if (plus->offset.count() == 0) return std::optional<std::string>(now);
    Stmt row(conn, sql::kNowPlus);
    row.BindNull(":at").Bind(":now", now).Bind(":offset", OffsetModifier(plus->offset));
    if (!row.Step()) {
      OCTOP_RETURN_IF_ERROR(row.status());
      return InternalError("NowPlus returned no row");
    }
    return row.OptText(0);
  }
  if (const auto* at = std::get_if<AbsoluteTime>(&spec))
    return std::optional<std::string>(FormatTime(at->at));
  if (std::holds_alternative<FixedRateAfter>(spec)) {
    return InvalidArgumentError("FixedRateAfter is only meaningful when releasing a task");
  }
  return std::optional<std::string>();
}

// The :period / :next_at pair of ReleaseTask and CancelTask: a fixed rate is computed in SQL from the row's
// previous value; anything else is resolved here.
Status BindNextRun(Connection& conn, Stmt& row, const TimeSpec& next_run, const std::string& now) {
  if (const auto* rate = std::get_if<FixedRateAfter>(&next_run)) {
    row.Bind(":period", OffsetModifier(rate->period)).BindNull(":next_at");
    return Status::Ok();
  }
  OCTOP_ASSIGN_OR_RETURN(std::optional<std::string> next_at, Resolve(conn, next_run, now));
  row.BindNull(":period").BindOpt(":next_at", next_at);
  return Status::Ok();
}

// After an UPDATE that changed nothing: NotFound when the row is gone, else `conflict`.
Status MissingOr(Connection& conn, const std::string& id, Status conflict) {
  Stmt row(conn, sql::kTaskExists);
  row.Bind(":id", id);
  const bool exists = row.Step();
  OCTOP_RETURN_IF_ERROR(row.status());
  return exists ? conflict : NoSuchTask(id);
}

// The rows of `row` until it is done, or its failure.
Result<std::vector<TaskRow>> ReadTaskRows(Stmt& row) {
  std::vector<TaskRow> tasks;
  while (row.Step()) tasks.push_back(ReadTaskRow(row));
  OCTOP_RETURN_IF_ERROR(row.status());
  return tasks;
}

class SqliteTaskStore final : public SqliteStoreBase<TaskStore> {
 public:
  using NamespaceStore::NamespaceStore;

  // SQLite keeps no session list: a Backstage backend on the same file cannot be seen.
  Result<int> CountBackstageSessions() override { return 0; }

  Status UpsertTask(const UpsertTaskParams& params) override {
    return ns().Guard([&](Connection& conn) -> Status {
      OCTOP_ASSIGN_OR_RETURN(std::string now, ns().Now(conn));
      OCTOP_ASSIGN_OR_RETURN(std::optional<std::string> start_at, Resolve(conn, params.start_at, now));
      OCTOP_ASSIGN_OR_RETURN(std::optional<std::string> next_start_at,
                             Resolve(conn, params.next_start_at, now));
      return Stmt(conn, sql::kUpsertTask)
          .Bind(":id", params.id)
          .Bind(":settings_json", params.settings_json)
          .BindOpt(":start_at", start_at)
          .BindOpt(":next_start_at", next_start_at)
          .Run();
    });
  }

  Result<PollTasksResult> PollTasks(const PollTasksParams& params) override {
    return ns().Guard([&](Connection& conn) -> Result<PollTasksResult> {
      OCTOP_ASSIGN_OR_RETURN(std::string now, ns().Now(conn));
      PollTasksResult result;
      OCTOP_ASSIGN_OR_RETURN(result.db_now, SqliteNamespace::ParseNow(now));
      if (params.ids.empty()) return result;
      Stmt row(conn, sql::kPollTasks);
      row.Bind(":now", now).Bind(":ids", TextsJson(params.ids));
      while (row.Step()) {
        PolledTask task;
        task.id = row.Text(0);
        task.settings_json = row.Text(1);
        task.next_run_start_at = row.Time(2);
        task.current_run_expires_at = row.Time(3);
        task.running = row.Int(4) != 0;
        task.ready = row.Int(5) != 0;
        result.tasks.push_back(std::move(task));
      }
      OCTOP_RETURN_IF_ERROR(row.status());
      return result;
    });
  }

  Result<std::optional<ClaimedRun>> TryClaimTask(const ClaimTaskParams& params) override {
    return ns().Guard([&](Connection& conn) -> Result<std::optional<ClaimedRun>> {
      OCTOP_ASSIGN_OR_RETURN(std::string now, ns().Now(conn));
      Stmt row(conn, sql::kClaimTask);
      row.Bind(":id", params.id).Bind(":ticket", params.ticket).Bind(":now", now);
      if (params.timeout) {
        row.Bind(":timeout", OffsetModifier(*params.timeout));
      } else {
        row.BindNull(":timeout");
      }
      std::optional<ClaimedRun> claimed;
      while (row.Step()) claimed = ClaimedRun{row.Time(0).value_or(WallTime{}), row.Time(1), row.Time(2)};
      OCTOP_RETURN_IF_ERROR(row.status());
      return claimed;
    });
  }

  Result<bool> CheckTaskTicket(const CheckTaskTicketParams& params) override {
    return ns().Guard([&](Connection& conn) -> Result<bool> {
      if (params.extend_lease) {
        OCTOP_ASSIGN_OR_RETURN(std::string now, ns().Now(conn));
        Stmt row(conn, sql::kExtendTaskLease);
        row.Bind(":id", params.id)
            .Bind(":ticket", params.ticket)
            .Bind(":now", now)
            .Bind(":lease", OffsetModifier(*params.extend_lease));
        const bool held = row.Step();
        OCTOP_RETURN_IF_ERROR(row.status());
        return held;
      }
      Stmt row(conn, sql::kCheckTaskTicket);
      row.Bind(":id", params.id).Bind(":ticket", params.ticket);
      const bool held = row.Step();
      OCTOP_RETURN_IF_ERROR(row.status());
      return held;
    });
  }

  Result<bool> TryReleaseTask(const ReleaseTaskParams& params) override {
    return ns().Guard([&](Connection& conn) -> Result<bool> {
      OCTOP_ASSIGN_OR_RETURN(std::string now, ns().Now(conn));
      Stmt row(conn, sql::kReleaseTask);
      row.Bind(":id", params.id)
          .Bind(":ticket", params.ticket)
          .Bind(":now", now)
          .BindOpt(":error_json", params.error_json);
      OCTOP_RETURN_IF_ERROR(BindNextRun(conn, row, params.next_run, now));
      OCTOP_RETURN_IF_ERROR(row.Run());
      return row.Changes() == 1;
    });
  }

  Status TriggerTask(const TriggerTaskParams& params) override {
    Status status = ns().Guard([&](Connection& conn) -> Status {
      OCTOP_ASSIGN_OR_RETURN(std::string now, ns().Now(conn));
      Stmt update(conn, sql::kTriggerTask);
      OCTOP_RETURN_IF_ERROR(update.Bind(":id", params.id).Bind(":now", now).Run());
      if (update.Changes() == 1) return Status::Ok();
      return MissingOr(conn, params.id, ConflictError("Task " + params.id + " is currently running"));
    });
    if (status.ok()) ns().hub().Publish(kTasksChannel, params.id);
    return status;
  }

  Status CancelTask(const CancelTaskParams& params) override {
    return ns().Guard([&](Connection& conn) -> Status {
      OCTOP_ASSIGN_OR_RETURN(std::string now, ns().Now(conn));
      Stmt update(conn, sql::kCancelTask);
      update.Bind(":id", params.id).Bind(":now", now).Bind(":error_json", params.error_json);
      update.Bind(":keep_next", std::int64_t{params.next_run ? 0 : 1});
      OCTOP_RETURN_IF_ERROR(BindNextRun(conn, update, params.next_run.value_or(NullTime{}), now));
      OCTOP_RETURN_IF_ERROR(update.Run());
      if (update.Changes() == 1) return Status::Ok();
      return MissingOr(conn, params.id, ConflictError("Task " + params.id + " is not running"));
    });
  }

  Result<bool> CapTaskNextRun(const CapTaskNextRunParams& params) override {
    return ns().Guard([&](Connection& conn) -> Result<bool> {
      OCTOP_ASSIGN_OR_RETURN(std::string now, ns().Now(conn));
      Stmt row(conn, sql::kCapTaskNextRun);
      row.Bind(":id", params.id).Bind(":now", now).Bind(":within", OffsetModifier(params.within));
      const bool moved = row.Step();
      OCTOP_RETURN_IF_ERROR(row.status());
      return moved;
    });
  }

  Result<std::vector<std::string>> SweepExpiredTaskRuns(const SweepExpiredTaskRunsParams& params) override {
    return ns().Guard([&](Connection& conn) -> Result<std::vector<std::string>> {
      OCTOP_ASSIGN_OR_RETURN(std::string now, ns().Now(conn));
      std::vector<std::string> ids;
      Stmt row(conn, sql::kSweepExpiredTaskRuns);
      row.Bind(":now", now)
          .Bind(":expired_before", SqliteNamespace::Earlier(now, params.expired_before))
          .BindOpt(":error", params.error_json);
      while (row.Step()) ids.push_back(row.Text(0));
      OCTOP_RETURN_IF_ERROR(row.status());
      std::sort(ids.begin(), ids.end());
      return ids;
    });
  }

  Result<std::vector<TaskRow>> ListTasks(const ListTasksParams& params) override {
    return ns().Guard([&](Connection& conn) -> Result<std::vector<TaskRow>> {
      if (params.ids) {
        if (params.ids->empty()) return std::vector<TaskRow>();
        Stmt row(conn, sql::kListTasksByIds);
        row.Bind(":ids", TextsJson(*params.ids));
        return ReadTaskRows(row);
      }
      Stmt row(conn, sql::kListAllTasks);
      return ReadTaskRows(row);
    });
  }
};

}  // namespace

}  // namespace octop::store::sqlite

namespace octop::store {

Result<std::unique_ptr<TaskStore>> OpenSqliteTaskStore(const std::string& location,
                                                       const StoreOptions& options) {
  OCTOP_ASSIGN_OR_RETURN(std::unique_ptr<sqlite::SqliteNamespace> ns,
                         sqlite::SqliteNamespace::Open(location, options));
  return std::unique_ptr<TaskStore>(
      std::make_unique<sqlite::SqliteTaskStore>(std::move(ns), MigrationLine::kTasks));
}

}  // namespace octop::store
