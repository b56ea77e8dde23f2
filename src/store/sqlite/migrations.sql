-- Migrations of the SQLite backend, two lines applied in order by migrations.cc inside one BEGIN IMMEDIATE
-- transaction (SQLite DDL is transactional, so a failed or concurrent migration leaves nothing half-done).
--
-- A task namespace's line (Migration1..3) rebuilds Backstage's knex migrations step by step and records them,
-- under Backstage's file names, in knex's own bookkeeping table, so a database that a Backstage backend migrated
-- is recognised and vice versa. The DDL matches what knex generates for SQLite (column names, declared types,
-- nullability, primary key). A job namespace's line (Migration4..6) is octop's, recorded in octop_migrations.

-- name: CreateKnexBookkeeping
-- A task namespace's: knex's own tables, as knex creates them.
CREATE TABLE IF NOT EXISTS backstage_backend_tasks__knex_migrations (
  id integer NOT NULL PRIMARY KEY AUTOINCREMENT,
  name varchar(255),
  batch integer,
  migration_time datetime
);
CREATE TABLE IF NOT EXISTS backstage_backend_tasks__knex_migrations_lock (
  "index" integer NOT NULL PRIMARY KEY AUTOINCREMENT,
  is_locked integer
);
INSERT INTO backstage_backend_tasks__knex_migrations_lock (is_locked)
  SELECT 0 WHERE NOT EXISTS (SELECT 1 FROM backstage_backend_tasks__knex_migrations_lock);

-- name: CreateOctopBookkeeping
-- A job namespace's.
CREATE TABLE IF NOT EXISTS octop_migrations (
  version integer NOT NULL PRIMARY KEY,
  name text NOT NULL,
  applied_at datetime NOT NULL
);

-- name: BookkeepingTables
SELECT name FROM sqlite_master
WHERE type = 'table' AND name IN ('backstage_backend_tasks__knex_migrations', 'octop_migrations');

-- name: ListKnexMigrations
SELECT name FROM backstage_backend_tasks__knex_migrations ORDER BY id;

-- name: ListOctopMigrations
SELECT name FROM octop_migrations ORDER BY version;

-- name: NextKnexBatch
SELECT coalesce(max(batch), 0) + 1 FROM backstage_backend_tasks__knex_migrations;

-- name: RecordKnexMigration
INSERT INTO backstage_backend_tasks__knex_migrations (name, batch, migration_time) VALUES (:name, :batch, :now);

-- name: RecordOctopMigration
INSERT INTO octop_migrations (version, name, applied_at) VALUES (:version, :name, :now);

-- name: Migration1Init
-- 20210928160613_init.js: next_run_start_at starts out NOT NULL.
CREATE TABLE backstage_backend_tasks__tasks (
  id varchar(255) NOT NULL,
  settings_json text NOT NULL,
  next_run_start_at datetime NOT NULL,
  current_run_ticket text,
  current_run_started_at datetime,
  current_run_expires_at datetime,
  PRIMARY KEY (id)
);

-- name: Migration2NullableNextRun
-- 20240712211735_nullable_next_run.js: SQLite cannot ALTER a column's nullability, so (as knex does) the table is
-- rebuilt with the same columns and the rows copied over.
CREATE TABLE backstage_backend_tasks__tasks__octop_rebuild (
  id varchar(255) NOT NULL,
  settings_json text NOT NULL,
  next_run_start_at datetime NULL,
  current_run_ticket text,
  current_run_started_at datetime,
  current_run_expires_at datetime,
  PRIMARY KEY (id)
);
INSERT INTO backstage_backend_tasks__tasks__octop_rebuild
  (id, settings_json, next_run_start_at, current_run_ticket, current_run_started_at, current_run_expires_at)
  SELECT id, settings_json, next_run_start_at, current_run_ticket, current_run_started_at, current_run_expires_at
  FROM backstage_backend_tasks__tasks;
DROP TABLE backstage_backend_tasks__tasks;
ALTER TABLE backstage_backend_tasks__tasks__octop_rebuild RENAME TO backstage_backend_tasks__tasks;

-- name: Migration3LastRun
-- 20250411000000_last_run.js
ALTER TABLE backstage_backend_tasks__tasks ADD COLUMN last_run_error_json text;
ALTER TABLE backstage_backend_tasks__tasks ADD COLUMN last_run_ended_at datetime;

-- name: Migration4Jobs
-- octop_0001_jobs: the job queue (docs/jobs.md). Times are text like the tasks table ('YYYY-MM-DD HH:MM:SS.SSS', UTC).
CREATE TABLE octop_jobs (
  id text NOT NULL PRIMARY KEY,
  queue text NOT NULL DEFAULT 'default',
  kind text NOT NULL,
  payload text NOT NULL CHECK (json_valid(payload)),
  priority integer NOT NULL DEFAULT 0,
  scheduled_at datetime NOT NULL DEFAULT (strftime('%Y-%m-%d %H:%M:%f', 'now')),
  status text NOT NULL DEFAULT 'pending'
    CHECK (status IN ('pending', 'running', 'success', 'failed', 'frozen')),
  attempt integer NOT NULL DEFAULT 0 CHECK (attempt >= 0),
  max_retries integer NOT NULL DEFAULT 3 CHECK (max_retries >= 0),
  attempt_token text,
  last_error text CHECK (length(last_error) <= 1024),
  created_at datetime NOT NULL DEFAULT (strftime('%Y-%m-%d %H:%M:%f', 'now')),
  started_at datetime,
  completed_at datetime,
  expires_at datetime,
  unique_key text
);
CREATE UNIQUE INDEX octop_jobs_unique_key ON octop_jobs (unique_key)
  WHERE status IN ('pending', 'running');
CREATE INDEX octop_jobs_claim ON octop_jobs (status, queue, priority, scheduled_at)
  WHERE status = 'pending';

-- name: Migration5Config
-- octop_0002_config: runtime settings read by the job queue without a restart.
CREATE TABLE octop_config (
  key text NOT NULL PRIMARY KEY,
  value text NOT NULL CHECK (json_valid(value)),
  updated_at datetime NOT NULL DEFAULT (strftime('%Y-%m-%d %H:%M:%f', 'now'))
);

-- name: Migration6JobQueue
-- octop_0003_job_queue: what the job queue's operations need (docs/store.md, "Jobs").
-- * worker_id: who claimed a job last (diagnostics, dashboard).
-- * A 'failed' job is waiting for its retry, so it is live: the unique key stays taken, and claims consider it.
--   Both partial indexes are rebuilt over the statuses they must cover.
-- * octop_queues: pause/resume. Views for DBAs and the summary API: octop_job_summary, octop_failed_jobs.
ALTER TABLE octop_jobs ADD COLUMN worker_id text;
DROP INDEX octop_jobs_unique_key;
CREATE UNIQUE INDEX octop_jobs_unique_key ON octop_jobs (unique_key)
  WHERE status IN ('pending', 'running', 'failed');
DROP INDEX octop_jobs_claim;
CREATE INDEX octop_jobs_claim ON octop_jobs (queue, priority, scheduled_at, id)
  WHERE status IN ('pending', 'failed');
CREATE INDEX octop_jobs_expires ON octop_jobs (expires_at) WHERE status = 'running';
CREATE INDEX octop_jobs_created ON octop_jobs (created_at);
CREATE TABLE octop_queues (
  name text NOT NULL PRIMARY KEY,
  paused integer NOT NULL DEFAULT 0 CHECK (paused IN (0, 1)),
  updated_at datetime NOT NULL DEFAULT (strftime('%Y-%m-%d %H:%M:%f', 'now'))
);
-- Per (queue, status): count, oldest scheduled_at, and the average delay in seconds -- for waiting jobs
-- (pending, failed) now - scheduled_at over the due ones; for started ones started_at - scheduled_at over those
-- started in the last hour. SummarizeJobs runs the same query with the store's "now" (JobSummary in jobs.sql).
CREATE VIEW octop_job_summary AS
SELECT queue, status, count(*) AS count, min(scheduled_at) AS oldest_scheduled_at,
       CASE WHEN status IN ('pending', 'failed')
         THEN avg(CASE WHEN scheduled_at <= strftime('%Y-%m-%d %H:%M:%f', 'now')
                       THEN (julianday('now') - julianday(scheduled_at)) * 86400.0 END)
         ELSE avg(CASE WHEN started_at >= strftime('%Y-%m-%d %H:%M:%f', 'now', '-1 hour')
                       THEN (julianday(started_at) - julianday(scheduled_at)) * 86400.0 END)
       END AS average_delay_seconds
FROM octop_jobs
GROUP BY queue, status;
-- Failed (awaiting a retry) and frozen jobs with when they last failed; newest first with ORDER BY failed_at DESC.
CREATE VIEW octop_failed_jobs AS
SELECT id, queue, kind, payload, priority, scheduled_at, status, attempt, max_retries, attempt_token, last_error,
       created_at, started_at, completed_at, expires_at, unique_key, worker_id,
       coalesce(completed_at, started_at, created_at) AS failed_at
FROM octop_jobs
WHERE status IN ('failed', 'frozen');

-- name: Migration7JobSets
-- octop_0004_job_sets. On PostgreSQL this moves the queue's working sets into tables of their own, so that claims
-- and completions are HOT updates; SQLite has no HOT to win (an UPDATE rewrites only the indexes whose columns
-- or predicates it touches, and the one writer at a time bounds the rest), so the layout of octop_0003 stays
-- (docs/store.md §8.5). What it does change: the unique-key index holds only jobs that have a key
-- (SQLite indexes NULLs, so every job was in it, and every claim and completion rewrote its entry).
DROP INDEX octop_jobs_unique_key;
CREATE UNIQUE INDEX octop_jobs_unique_key ON octop_jobs (unique_key)
  WHERE status IN ('pending', 'running', 'failed') AND unique_key IS NOT NULL;

-- name: Migration8LeaseIds
-- octop_0005_lease_ids changes how PostgreSQL stores a lease's job ids; SQLite keeps no leases (its claims and
-- its rescuer read octop_jobs), so there is nothing to do here: the migration is recorded so the two backends'
-- lines stay the same.

-- name: Migration9JobCancels
-- octop_0006_job_cancels: a cancel of a running job is a request to whichever node runs it (docs/jobs.md,
-- "Cancelling a running job"); the same table as on PostgreSQL (docs/store.md §8.3 CancelJob).
CREATE TABLE octop_job_cancels (
  job_id TEXT NOT NULL PRIMARY KEY,
  attempt_token TEXT NOT NULL,
  requested_at TEXT NOT NULL
);

-- name: Migration10SqlWrites
-- octop_0007_sql_writes keeps PostgreSQL's working sets (octop_waiting_jobs, octop_job_keys) in step with jobs
-- written by plain SQL. SQLite has no such sets: its claims read octop_jobs by status and its unique index is on
-- octop_jobs, so a job INSERTed or UPDATEd by SQL is already what its status says (docs/jobs.md "Jobs written by
-- SQL"). Recorded so the two backends' lines stay the same.

-- name: Migration11SqlChanges
-- octop_0008_sql_changes wakes PostgreSQL's job queue maintenance when plain SQL changes octop_jobs, so that it
-- reconciles its working sets at once. SQLite has no such sets (see octop_0007): recorded so the two backends'
-- lines stay the same.
