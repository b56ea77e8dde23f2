-- The recurring-task operations on backstage_backend_tasks__tasks (SqliteStore; semantics in store/store.h).
--
-- Times are text. octop writes UTC 'YYYY-MM-DD HH:MM:SS.SSS', which sorts correctly as text and which datetime()
-- understands. Rows a Backstage backend wrote ('YYYY-MM-DD HH:MM:SS', or ISO with 'T'/'Z') are normalised with
-- strftime() before every comparison, so mixed formats still compare by instant.
--
-- :now is the database's now, resolved by the DatabaseNow statement (or the test clock's override) at the start of
-- each operation and bound as text. Offsets (:timeout, :period) are bound strftime modifiers like '+90.000000 seconds'.

-- name: DatabaseNow
SELECT strftime('%Y-%m-%d %H:%M:%f', 'now');

-- name: NowPlus
-- Resolves a TimeSpec that needs no row: an absolute time (:at), now plus an offset (:offset), or NULL (both NULL).
SELECT coalesce(:at, strftime('%Y-%m-%d %H:%M:%f', :now, :offset));

-- name: UpsertTask
INSERT INTO backstage_backend_tasks__tasks (id, settings_json, next_run_start_at)
VALUES (:id, :settings_json, :start_at)
ON CONFLICT (id) DO UPDATE SET
  settings_json = excluded.settings_json,
  next_run_start_at = CASE
    -- manual (or no new time): keep what is stored
    WHEN :next_start_at IS NULL THEN backstage_backend_tasks__tasks.next_run_start_at
    -- the task used to be manual and now has a timed cadence: start it (Backstage would keep NULL forever)
    WHEN backstage_backend_tasks__tasks.next_run_start_at IS NULL THEN :next_start_at
    -- a run ended at or after the new time: the occurrence it stands for (a cron occurrence less 1 s) was
    -- served, so a node starting now must not run it again (docs/scheduler.md, "One run per occurrence")
    WHEN strftime('%Y-%m-%d %H:%M:%f', backstage_backend_tasks__tasks.last_run_ended_at) >= :next_start_at
      THEN backstage_backend_tasks__tasks.next_run_start_at
    -- otherwise only ever move earlier
    WHEN :next_start_at < strftime('%Y-%m-%d %H:%M:%f', backstage_backend_tasks__tasks.next_run_start_at)
      THEN :next_start_at
    ELSE backstage_backend_tasks__tasks.next_run_start_at
  END;

-- name: PollTasks
SELECT id, settings_json, next_run_start_at, current_run_expires_at,
       current_run_ticket IS NOT NULL AS running,
       CASE WHEN strftime('%Y-%m-%d %H:%M:%f', next_run_start_at) <= :now AND current_run_ticket IS NULL
            THEN 1 ELSE 0 END AS ready
FROM backstage_backend_tasks__tasks
WHERE id IN (SELECT value FROM json_each(:ids))
ORDER BY id;

-- name: ClaimTask
UPDATE backstage_backend_tasks__tasks
SET current_run_ticket = :ticket,
    current_run_started_at = :now,
    current_run_expires_at = strftime('%Y-%m-%d %H:%M:%f', :now, :timeout)
WHERE id = :id
  AND current_run_ticket IS NULL
  AND strftime('%Y-%m-%d %H:%M:%f', next_run_start_at) <= :now
RETURNING current_run_started_at, current_run_expires_at, next_run_start_at;

-- name: CheckTaskTicket
SELECT 1 FROM backstage_backend_tasks__tasks WHERE id = :id AND current_run_ticket = :ticket;

-- name: ExtendTaskLease
-- The expiry becomes at least :now + :lease (a modifier), only while the ticket is ours.
UPDATE backstage_backend_tasks__tasks
SET current_run_expires_at = max(strftime('%Y-%m-%d %H:%M:%f', current_run_expires_at),
                                 strftime('%Y-%m-%d %H:%M:%f', :now, :lease))
WHERE id = :id AND current_run_ticket = :ticket
RETURNING 1;

-- name: ReleaseTask
-- :period set: fixed rate, max(previous + period, now) but at most now + period, a NULL previous counting as now.
-- Otherwise :next_at (resolved by NowPlus, possibly NULL).
UPDATE backstage_backend_tasks__tasks
SET next_run_start_at = CASE
      WHEN :period IS NULL THEN :next_at
      WHEN next_run_start_at IS NULL THEN :now
      ELSE min(max(coalesce(strftime('%Y-%m-%d %H:%M:%f', next_run_start_at, :period), :now), :now),
               strftime('%Y-%m-%d %H:%M:%f', :now, :period))
    END,
    current_run_ticket = NULL,
    current_run_started_at = NULL,
    current_run_expires_at = NULL,
    last_run_ended_at = :now,
    last_run_error_json = :error_json
WHERE id = :id AND current_run_ticket = :ticket;

-- name: TaskExists
SELECT 1 FROM backstage_backend_tasks__tasks WHERE id = :id;

-- name: WriteProbe
-- The smallest real write, for readiness: the header's user_version, which neither octop nor knex uses, set to
-- 0 (one WAL frame each time; an UPDATE that changes nothing writes nothing, so it would prove nothing).
PRAGMA user_version = 0;

-- name: CapTaskNextRun
-- :within is a strftime modifier.
UPDATE backstage_backend_tasks__tasks
SET next_run_start_at = strftime('%Y-%m-%d %H:%M:%f', :now, :within)
WHERE id = :id AND current_run_ticket IS NULL
  AND strftime('%Y-%m-%d %H:%M:%f', next_run_start_at) > strftime('%Y-%m-%d %H:%M:%f', :now, :within)
RETURNING 1;

-- name: TriggerTask
UPDATE backstage_backend_tasks__tasks
SET next_run_start_at = :now
WHERE id = :id AND current_run_ticket IS NULL;

-- name: CancelTask
-- :keep_next = 1 leaves next_run_start_at alone; otherwise it is set like ReleaseTask does (:period / :next_at).
UPDATE backstage_backend_tasks__tasks
SET next_run_start_at = CASE
      WHEN :keep_next = 1 THEN next_run_start_at
      WHEN :period IS NULL THEN :next_at
      WHEN next_run_start_at IS NULL THEN :now
      ELSE min(max(coalesce(strftime('%Y-%m-%d %H:%M:%f', next_run_start_at, :period), :now), :now),
               strftime('%Y-%m-%d %H:%M:%f', :now, :period))
    END,
    current_run_ticket = NULL,
    current_run_started_at = NULL,
    current_run_expires_at = NULL,
    last_run_ended_at = :now,
    last_run_error_json = :error_json
WHERE id = :id AND current_run_ticket IS NOT NULL;

-- name: SweepExpiredTaskRuns
-- One statement (Backstage uses a SELECT then an UPDATE on SQLite, which is not atomic).
-- :error the error json to record as the run's result (NULL: leave last_run_* alone); :expired_before is :now
-- or earlier.
UPDATE backstage_backend_tasks__tasks
SET current_run_ticket = NULL,
    current_run_started_at = NULL,
    current_run_expires_at = NULL,
    last_run_ended_at = CASE WHEN :error IS NULL THEN last_run_ended_at ELSE :now END,
    last_run_error_json = coalesce(:error, last_run_error_json)
WHERE current_run_expires_at IS NOT NULL
  AND strftime('%Y-%m-%d %H:%M:%f', current_run_expires_at) < :expired_before
RETURNING id;

-- name: ListAllTasks
SELECT id, settings_json, next_run_start_at, current_run_ticket, current_run_started_at, current_run_expires_at,
       last_run_error_json, last_run_ended_at
FROM backstage_backend_tasks__tasks
ORDER BY id;

-- name: ListTasksByIds
SELECT id, settings_json, next_run_start_at, current_run_ticket, current_run_started_at, current_run_expires_at,
       last_run_error_json, last_run_ended_at
FROM backstage_backend_tasks__tasks
WHERE id IN (SELECT value FROM json_each(:ids))
ORDER BY id;
