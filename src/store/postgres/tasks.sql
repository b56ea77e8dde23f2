-- The PostgreSQL statements of the recurring-task operations (backstage_backend_tasks__tasks).
--
-- Conventions (see postgres_store.cc):
--   {ns}  the namespace's schema as a quoted identifier; the only text ever substituted into SQL.
--   $1    the database-now override (timestamptz, NULL in production): "now" is COALESCE($1::timestamptz, now()),
--         so a FakeClock drives every time comparison in tests. now() is the transaction start time.
--   A TimeSpec is three parameters: kind (0 NULL, 1 now + offset, 2 absolute, 3 fixed rate), absolute timestamptz,
--   offset interval.
-- Every statement is prepared once per connection and executed with bound parameters.

-- name: DatabaseNow
SELECT COALESCE($1::timestamptz, now());

-- name: UpsertTask
-- $2 id, $3 settings_json, $4-$6 start_at (insert), $7-$9 next_start_at (existing row).
-- LEAST ignores NULLs in PostgreSQL: a NULL next_start_at keeps the stored value, a NULL stored value takes
-- next_start_at (a task switched from manual to a timed cadence starts running), otherwise the earlier one wins,
-- unless a run ended at or after next_start_at: the occurrence it stands for (a cron occurrence less 1 s) was
-- served, so a node starting now must not run it again (docs/scheduler.md, "One run per occurrence").
INSERT INTO {ns}.backstage_backend_tasks__tasks AS t (id, settings_json, next_run_start_at)
VALUES ($2, $3,
        CASE $4::int WHEN 1 THEN COALESCE($1::timestamptz, now()) + $6::interval
                     WHEN 2 THEN $5::timestamptz END)
ON CONFLICT (id) DO UPDATE SET
  settings_json = excluded.settings_json,
  next_run_start_at = CASE
    WHEN t.next_run_start_at IS NOT NULL
         AND t.last_run_ended_at >= CASE $7::int WHEN 1 THEN COALESCE($1::timestamptz, now()) + $9::interval
                                                 WHEN 2 THEN $8::timestamptz END
      THEN t.next_run_start_at
    ELSE LEAST(t.next_run_start_at,
               CASE $7::int WHEN 1 THEN COALESCE($1::timestamptz, now()) + $9::interval
                            WHEN 2 THEN $8::timestamptz END) END;

-- name: PollTasks
-- $2 a text[] of ids. The LEFT JOIN keeps one row (with NULL id) when no id matches, so db_now is always returned.
SELECT c.now, t.id, t.settings_json,
       COALESCE(t.next_run_start_at <= c.now AND t.current_run_ticket IS NULL, false) AS ready,
       t.current_run_ticket IS NOT NULL AS running,
       t.next_run_start_at, t.current_run_expires_at
FROM (SELECT COALESCE($1::timestamptz, now()) AS now) c
LEFT JOIN {ns}.backstage_backend_tasks__tasks t ON t.id = ANY ($2::text[])
ORDER BY t.id COLLATE "C";

-- name: TryClaimTask
-- $2 id, $3 ticket, $4 timeout interval (NULL: no expiry). Row lock + re-check under READ COMMITTED: one winner.
UPDATE {ns}.backstage_backend_tasks__tasks
SET current_run_ticket = $3,
    current_run_started_at = COALESCE($1::timestamptz, now()),
    current_run_expires_at = COALESCE($1::timestamptz, now()) + $4::interval
WHERE id = $2 AND current_run_ticket IS NULL AND next_run_start_at <= COALESCE($1::timestamptz, now())
RETURNING current_run_started_at, current_run_expires_at, next_run_start_at;

-- name: CheckTaskTicket
SELECT 1 FROM {ns}.backstage_backend_tasks__tasks WHERE id = $1 AND current_run_ticket = $2;

-- name: ExtendTaskLease
-- $2 id, $3 ticket, $4 interval: the expiry becomes at least now + $4, only while the ticket is ours.
UPDATE {ns}.backstage_backend_tasks__tasks
SET current_run_expires_at = greatest(current_run_expires_at, COALESCE($1::timestamptz, now()) + $4::interval)
WHERE id = $2 AND current_run_ticket = $3
RETURNING 1;

-- name: TryReleaseTask
-- $2 id, $3 ticket, $4-$6 next_run, $7 error json. In SET, next_run_start_at is the value before the update.
UPDATE {ns}.backstage_backend_tasks__tasks
SET next_run_start_at = CASE $4::int
      WHEN 1 THEN COALESCE($1::timestamptz, now()) + $6::interval
      WHEN 2 THEN $5::timestamptz
      WHEN 3 THEN least(greatest(COALESCE(next_run_start_at, COALESCE($1::timestamptz, now())) + $6::interval,
                                 COALESCE($1::timestamptz, now())),
                        COALESCE($1::timestamptz, now()) + $6::interval)
    END,
    current_run_ticket = NULL, current_run_started_at = NULL, current_run_expires_at = NULL,
    last_run_ended_at = COALESCE($1::timestamptz, now()),
    last_run_error_json = $7
WHERE id = $2 AND current_run_ticket = $3;

-- name: Writable
SELECT pg_is_in_recovery(), current_setting('transaction_read_only');

-- name: CapTaskNextRun
-- $2 id, $3 interval.
UPDATE {ns}.backstage_backend_tasks__tasks
SET next_run_start_at = COALESCE($1::timestamptz, now()) + $3::interval
WHERE id = $2 AND current_run_ticket IS NULL
  AND next_run_start_at > COALESCE($1::timestamptz, now()) + $3::interval
RETURNING 1;

-- name: TriggerTask
-- $2 id, $3 notification payload prefix. One statement, hence one transaction: the NOTIFY is delivered on commit,
-- only when the update happened. found = 0: NotFound; updated = 0: Conflict (running).
WITH found AS (SELECT id FROM {ns}.backstage_backend_tasks__tasks WHERE id = $2),
     updated AS (UPDATE {ns}.backstage_backend_tasks__tasks SET next_run_start_at = COALESCE($1::timestamptz, now())
                 WHERE id = $2 AND current_run_ticket IS NULL RETURNING id)
SELECT (SELECT count(*) FROM found), (SELECT count(*) FROM updated),
       (SELECT count(*) FROM (SELECT pg_notify('octop_tasks', $3 || id) FROM updated) n);

-- name: CancelTask
-- $2 id, $3 error json, $4 whether to set next_run_start_at (0: keep it), $5-$7 the next run as a TimeSpec (as in
-- TryReleaseTask). found = 0: NotFound; updated = 0: Conflict (not running).
WITH found AS (SELECT id FROM {ns}.backstage_backend_tasks__tasks WHERE id = $2),
     updated AS (UPDATE {ns}.backstage_backend_tasks__tasks
                 SET next_run_start_at = CASE WHEN $4::int = 0 THEN next_run_start_at ELSE CASE $5::int
                       WHEN 1 THEN COALESCE($1::timestamptz, now()) + $7::interval
                       WHEN 2 THEN $6::timestamptz
                       WHEN 3 THEN least(greatest(COALESCE(next_run_start_at, COALESCE($1::timestamptz, now()))
                                                  + $7::interval, COALESCE($1::timestamptz, now())),
                                         COALESCE($1::timestamptz, now()) + $7::interval)
                     END END,
                     current_run_ticket = NULL, current_run_started_at = NULL, current_run_expires_at = NULL,
                     last_run_ended_at = COALESCE($1::timestamptz, now()), last_run_error_json = $3
                 WHERE id = $2 AND current_run_ticket IS NOT NULL RETURNING id)
SELECT (SELECT count(*) FROM found), (SELECT count(*) FROM updated);

-- name: SweepExpiredTaskRuns
-- $2 the error json to record as the run's result (NULL: leave last_run_* alone); $3 expired before (NULL: now;
-- LEAST skips a NULL).
UPDATE {ns}.backstage_backend_tasks__tasks
SET current_run_ticket = NULL, current_run_started_at = NULL, current_run_expires_at = NULL,
    last_run_ended_at = CASE WHEN $2::text IS NULL THEN last_run_ended_at
                             ELSE COALESCE($1::timestamptz, now()) END,
    last_run_error_json = COALESCE($2::text, last_run_error_json)
WHERE current_run_expires_at < LEAST(COALESCE($1::timestamptz, now()), $3::timestamptz)
RETURNING id;

-- name: ListAllTasks
SELECT id, settings_json, next_run_start_at, current_run_ticket, current_run_started_at, current_run_expires_at,
       last_run_error_json, last_run_ended_at
FROM {ns}.backstage_backend_tasks__tasks ORDER BY id COLLATE "C";

-- name: ListTasksByIds
-- $1 a text[] of ids.
SELECT id, settings_json, next_run_start_at, current_run_ticket, current_run_started_at, current_run_expires_at,
       last_run_error_json, last_run_ended_at
FROM {ns}.backstage_backend_tasks__tasks WHERE id = ANY ($1::text[]) ORDER BY id COLLATE "C";
