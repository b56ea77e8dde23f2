// PostgresTaskStore: the TaskStore of the cluster backend (store/task_store.h for the contract, tasks.sql and
// docs/store.md for the SQL). Every operation is one prepared statement on a pooled connection.
#include <algorithm>
#include <string>
#include <utility>
#include <variant>

#include "postgres_queries.h"
#include "store/postgres/pg_listener.h"
#include "store/postgres/pg_namespace.h"
#include "store/postgres/pg_timestamp.h"
#include "store/postgres/postgres_store.h"
#include "store/task_store.h"

namespace octop::store::postgres {

namespace {

void AppendTimeSpec(PgParams& params, const TimeSpec& spec) {
  struct Visitor {
    PgParams& p;
    void operator()(const NullTime&) const {
      p.emplace_back("0");
      p.emplace_back(std::nullopt);
      p.emplace_back(std::nullopt);
    }
    void operator()(const DbNowPlus& s) const {
      p.emplace_back("1");
      p.emplace_back(std::nullopt);
      p.emplace_back(FormatInterval(s.offset));
    }
    void operator()(const AbsoluteTime& s) const {
      p.emplace_back("2");
      p.emplace_back(FormatTimestamp(s.at));
      p.emplace_back(std::nullopt);
    }
    void operator()(const FixedRateAfter& s) const {
      p.emplace_back("3");
      p.emplace_back(std::nullopt);
      p.emplace_back(FormatInterval(s.period));
    }
  };
  std::visit(Visitor{params}, spec);
}

class PostgresTaskStore final : public PgStoreBase<TaskStore> {
 public:
  PostgresTaskStore(std::unique_ptr<PgNamespace> ns, MigrationLine line)
      : PgStoreBase(std::move(ns), line),
        upsert_(Make("UpsertTask", sql::kUpsertTask)),
        poll_(Make("PollTasks", sql::kPollTasks)),
        claim_(Make("TryClaimTask", sql::kTryClaimTask)),
        check_(Make("CheckTaskTicket", sql::kCheckTaskTicket)),
        extend_lease_(Make("ExtendTaskLease", sql::kExtendTaskLease)),
        release_(Make("TryReleaseTask", sql::kTryReleaseTask)),
        trigger_(Make("TriggerTask", sql::kTriggerTask)),
        cancel_(Make("CancelTask", sql::kCancelTask)),
        cap_next_run_(Make("CapTaskNextRun", sql::kCapTaskNextRun)),
        sweep_(Make("SweepExpiredTaskRuns", sql::kSweepExpiredTaskRuns)),
        list_all_(Make("ListAllTasks", sql::kListAllTasks)),
        list_ids_(Make("ListTasksByIds", sql::kListTasksByIds)) {}

  Result<int> CountBackstageSessions() override { return ns().CountBackstageSessions(); }

  Status UpsertTask(const UpsertTaskParams& params) override {
    PgParams p = {NowParam(), params.id, params.settings_json};
    AppendTimeSpec(p, params.start_at);
    AppendTimeSpec(p, params.next_start_at);
    OCTOP_ASSIGN_OR_RETURN(PgResult r, Run(upsert_, p));
    (void)r;
    return Status::Ok();
  }

  Result<PollTasksResult> PollTasks(const PollTasksParams& params) override {
    OCTOP_ASSIGN_OR_RETURN(PgResult r, Run(poll_, {NowParam(), TextArrayLiteral(params.ids)}));
    PollTasksResult result;
    OCTOP_ASSIGN_OR_RETURN(result.db_now, ParseTimestamp(r.Text(0, 0)));
    for (int i = 0; i < r.rows(); ++i) {
      if (r.IsNull(i, 1)) continue;  // the LEFT JOIN's row when nothing matched
      PolledTask task;
      task.id = r.Text(i, 1);
      task.settings_json = r.Text(i, 2);
      task.ready = r.Bool(i, 3);
      task.running = r.Bool(i, 4);
      OCTOP_ASSIGN_OR_RETURN(task.next_run_start_at, OptTime(r, i, 5));
      OCTOP_ASSIGN_OR_RETURN(task.current_run_expires_at, OptTime(r, i, 6));
      result.tasks.push_back(std::move(task));
    }
    return result;
  }

  Result<std::optional<ClaimedRun>> TryClaimTask(const ClaimTaskParams& params) override {
    std::optional<std::string> timeout;
    if (params.timeout) timeout = FormatInterval(*params.timeout);
    OCTOP_ASSIGN_OR_RETURN(PgResult r, Run(claim_, {NowParam(), params.id, params.ticket, timeout}));
    if (r.rows() != 1) return std::optional<ClaimedRun>();
    ClaimedRun run;
    OCTOP_ASSIGN_OR_RETURN(run.started_at, ParseTimestamp(r.Text(0, 0)));
    OCTOP_ASSIGN_OR_RETURN(run.expires_at, OptTime(r, 0, 1));
    OCTOP_ASSIGN_OR_RETURN(run.due_at, OptTime(r, 0, 2));
    return std::optional<ClaimedRun>(run);
  }

  Result<bool> CheckTaskTicket(const CheckTaskTicketParams& params) override {
    if (params.extend_lease) {
      OCTOP_ASSIGN_OR_RETURN(PgResult r, Run(extend_lease_, {NowParam(), params.id, params.ticket,
                                                             FormatInterval(*params.extend_lease)}));
      return r.rows() == 1;
    }
    OCTOP_ASSIGN_OR_RETURN(PgResult r, Run(check_, {params.id, params.ticket}));
    return r.rows() == 1;
  }

  Result<bool> TryReleaseTask(const ReleaseTaskParams& params) override {
    PgParams p = {NowParam(), params.id, params.ticket};
    AppendTimeSpec(p, params.next_run);
    p.push_back(params.error_json);
    OCTOP_ASSIGN_OR_RETURN(PgResult r, Run(release_, p));
    return r.AffectedRows() == 1;
  }

  Status TriggerTask(const TriggerTaskParams& params) override {
    OCTOP_ASSIGN_OR_RETURN(PgResult r, Run(trigger_, {NowParam(), params.id, PgNotifyPrefix(ns().schema())}));
    if (Count(r, 0, 0) == 0) return NoSuchTask(params.id);
    if (Count(r, 0, 1) == 0) return ConflictError("Task " + params.id + " is currently running");
    return Status::Ok();
  }

  Status CancelTask(const CancelTaskParams& params) override {
    PgParams p = {NowParam(), params.id, params.error_json, params.next_run ? "1" : "0"};
    AppendTimeSpec(p, params.next_run.value_or(NullTime{}));
    OCTOP_ASSIGN_OR_RETURN(PgResult r, Run(cancel_, p));
    if (Count(r, 0, 0) == 0) return NoSuchTask(params.id);
    if (Count(r, 0, 1) == 0) return ConflictError("Task " + params.id + " is not running");
    return Status::Ok();
  }

  Result<bool> CapTaskNextRun(const CapTaskNextRunParams& params) override {
    OCTOP_ASSIGN_OR_RETURN(PgResult r,
                           Run(cap_next_run_, {NowParam(), params.id, FormatInterval(params.within)}));
    return r.rows() == 1;
  }

  Result<std::vector<std::string>> SweepExpiredTaskRuns(const SweepExpiredTaskRunsParams& params) override {
    OCTOP_ASSIGN_OR_RETURN(PgResult r, Run(sweep_, {NowParam(), params.error_json,
                                                    PgNamespace::TimeParam(params.expired_before)}));
    std::vector<std::string> ids;
    for (int i = 0; i < r.rows(); ++i) ids.push_back(r.Text(i, 0));
    std::sort(ids.begin(), ids.end());
    return ids;
  }

  Result<std::vector<TaskRow>> ListTasks(const ListTasksParams& params) override {
    Result<PgResult> result =
        params.ids ? Run(list_ids_, {TextArrayLiteral(*params.ids)}) : Run(list_all_, {});
    if (!result.ok()) return result.status();
    const PgResult& r = *result;
    std::vector<TaskRow> rows;
    rows.reserve(static_cast<std::size_t>(r.rows()));
    for (int i = 0; i < r.rows(); ++i) {
      TaskRow row;
      row.id = r.Text(i, 0);
      row.settings_json = r.Text(i, 1);
      OCTOP_ASSIGN_OR_RETURN(row.next_run_start_at, OptTime(r, i, 2));
      row.current_run_ticket = r.OptText(i, 3);
      OCTOP_ASSIGN_OR_RETURN(row.current_run_started_at, OptTime(r, i, 4));
      OCTOP_ASSIGN_OR_RETURN(row.current_run_expires_at, OptTime(r, i, 5));
      row.last_run_error_json = r.OptText(i, 6);
      OCTOP_ASSIGN_OR_RETURN(row.last_run_ended_at, OptTime(r, i, 7));
      rows.push_back(std::move(row));
    }
    return rows;
  }

 private:
  const Statement upsert_, poll_, claim_, check_, extend_lease_, release_, trigger_, cancel_, cap_next_run_,
      sweep_, list_all_, list_ids_;
};

}  // namespace

}  // namespace octop::store::postgres

namespace octop::store {

Result<std::unique_ptr<TaskStore>> OpenPostgresTaskStore(const std::string& conninfo,
                                                         const StoreOptions& options) {
  OCTOP_ASSIGN_OR_RETURN(std::unique_ptr<postgres::PgNamespace> ns,
                         postgres::PgNamespace::Open(conninfo, options));
  return std::unique_ptr<TaskStore>(
      std::make_unique<postgres::PostgresTaskStore>(std::move(ns), MigrationLine::kTasks));
}

}  // namespace octop::store
