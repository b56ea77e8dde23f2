-- Migrations of the PostgreSQL backend, applied by PostgresStore::MigrateTo in two short transactions: the first
-- creates whichever bookkeeping tables are missing, the second takes knex's migration lock the way knex takes it
-- and applies the missing steps (PostgreSQL DDL is transactional: a failure leaves nothing half-done). Both first
-- take pg_advisory_xact_lock keyed by the schema, so octop nodes migrating at once queue up.
--
-- The first three rebuild Backstage's knex migrations and are recorded, under Backstage's file names, in knex's own
-- bookkeeping tables (same DDL as knex creates on PostgreSQL), so a schema a Backstage backend migrated is
-- recognised and vice versa. {ns} is the schema, a quoted identifier. docs/store.md, "PostgreSQL: migrations beside knex".

-- name: CreateSchema
CREATE SCHEMA IF NOT EXISTS {ns};

-- name: CreateKnexMigrations
CREATE TABLE {ns}.backstage_backend_tasks__knex_migrations (
  id serial PRIMARY KEY,
  name varchar(255),
  batch integer,
  migration_time timestamptz
);

-- name: CreateKnexLock
-- Created with its one row in the same transaction, so no knex migrator ever sees it empty and adds a second
-- row (knex's lock then fails for good: its UPDATE must change exactly one row).
CREATE TABLE {ns}.backstage_backend_tasks__knex_migrations_lock (
  "index" serial PRIMARY KEY,
  is_locked integer
);
INSERT INTO {ns}.backstage_backend_tasks__knex_migrations_lock (is_locked) VALUES (0);

-- name: InsertKnexLockRow
INSERT INTO {ns}.backstage_backend_tasks__knex_migrations_lock (is_locked)
  SELECT 0 WHERE NOT EXISTS (SELECT 1 FROM {ns}.backstage_backend_tasks__knex_migrations_lock);

-- name: CountKnexLockRows
SELECT count(*) FROM {ns}.backstage_backend_tasks__knex_migrations_lock;

-- name: CreateOctopMigrations
CREATE TABLE {ns}.octop_migrations (
  version integer NOT NULL PRIMARY KEY,
  name text NOT NULL,
  applied_at timestamptz NOT NULL DEFAULT now()
);

-- name: TakeKnexLock
-- knex's _lockMigrations: exactly one row must change. A knex migrator in its transaction holds the row, so this
-- waits for it; 0 rows means a lock left set outside a transaction.
UPDATE {ns}.backstage_backend_tasks__knex_migrations_lock SET is_locked = 1 WHERE is_locked = 0;

-- name: FreeKnexLock
UPDATE {ns}.backstage_backend_tasks__knex_migrations_lock SET is_locked = 0;

-- name: BackstageSessions
-- $1 the application_name a Backstage backend gives its connections to this plugin's database.
SELECT count(*) FROM pg_catalog.pg_stat_activity
WHERE datname = current_database() AND pid <> pg_backend_pid() AND application_name = $1;

-- name: DatabaseExists
-- $1 a database name. Run on the URL's database before a plugin's own database is used (PluginDivision).
SELECT EXISTS (SELECT 1 FROM pg_catalog.pg_database WHERE datname = $1);

-- name: CreateDatabase
-- {ns} here is the plugin's database, a quoted identifier. Two nodes may race to it: the loser's
-- duplicate_database (42P04) or unique violation (23505) means it exists.
CREATE DATABASE {ns};

-- name: TaskTableIn
-- $1 a schema name (unquoted): whether it holds a task table (octop's earlier schema-per-plugin layout, or a
-- Backstage backend with pluginDivisionMode: schema).
SELECT EXISTS (SELECT 1 FROM pg_catalog.pg_class c JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
               WHERE n.nspname = $1 AND c.relname = 'backstage_backend_tasks__tasks');

-- name: CurrentSchema
-- Where unqualified names resolve for this role: where a Backstage backend (which never qualifies) keeps its
-- tables in a plugin database.
SELECT current_schema();

-- name: AdvisoryLock
-- $1 the lock's name ('octop-migrate:' + schema), hashed to the bigint key.
SELECT pg_advisory_xact_lock(hashtextextended($1, 0));

-- name: BookkeepingTables
-- $1 the schema name (unquoted). Which of the three bookkeeping tables exist.
SELECT c.relname FROM pg_catalog.pg_class c JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
WHERE n.nspname = $1 AND c.relkind = 'r'
  AND c.relname IN ('backstage_backend_tasks__knex_migrations', 'backstage_backend_tasks__knex_migrations_lock',
                    'octop_migrations');

-- name: ListKnexMigrations
SELECT name FROM {ns}.backstage_backend_tasks__knex_migrations ORDER BY id;

-- name: ListOctopMigrations
SELECT name FROM {ns}.octop_migrations ORDER BY version;

-- name: RecordKnexMigration
-- $1 name, $2 database now override. The batch is one more than the last, as knex numbers a run.
INSERT INTO {ns}.backstage_backend_tasks__knex_migrations (name, batch, migration_time)
SELECT $1, COALESCE(max(batch), 0) + 1, COALESCE($2::timestamptz, now())
FROM {ns}.backstage_backend_tasks__knex_migrations;

-- name: RecordOctopMigration
-- $1 version, $2 name, $3 database now override.
INSERT INTO {ns}.octop_migrations (version, name, applied_at) VALUES ($1, $2, COALESCE($3::timestamptz, now()));

-- name: Migration1Init
-- 20210928160613_init.js: next_run_start_at starts out NOT NULL. Comments and the id index as Backstage has them.
CREATE TABLE {ns}.backstage_backend_tasks__tasks (
  id varchar(255) NOT NULL,
  settings_json text NOT NULL,
  next_run_start_at timestamptz NOT NULL,
  current_run_ticket text NULL,
  current_run_started_at timestamptz NULL,
  current_run_expires_at timestamptz NULL,
  CONSTRAINT backstage_backend_tasks__tasks_pkey PRIMARY KEY (id)
);
CREATE INDEX backstage_backend_tasks__tasks__id_idx ON {ns}.backstage_backend_tasks__tasks (id);
COMMENT ON TABLE {ns}.backstage_backend_tasks__tasks IS 'Tasks used for scheduling work on multiple workers';
COMMENT ON COLUMN {ns}.backstage_backend_tasks__tasks.id IS 'The unique ID of this particular task';
COMMENT ON COLUMN {ns}.backstage_backend_tasks__tasks.settings_json
  IS 'JSON serialized object with properties for this task';
COMMENT ON COLUMN {ns}.backstage_backend_tasks__tasks.next_run_start_at
  IS 'The next time that the task should be started';
COMMENT ON COLUMN {ns}.backstage_backend_tasks__tasks.current_run_ticket
  IS 'A unique ticket for the current task run';
COMMENT ON COLUMN {ns}.backstage_backend_tasks__tasks.current_run_started_at
  IS 'The time that the current task run started';
COMMENT ON COLUMN {ns}.backstage_backend_tasks__tasks.current_run_expires_at
  IS 'The time that the current task run will time out';

-- name: Migration2NullableNextRun
-- 20240712211735_nullable_next_run.js
ALTER TABLE {ns}.backstage_backend_tasks__tasks ALTER COLUMN next_run_start_at DROP NOT NULL;

-- name: Migration3LastRun
-- 20250411000000_last_run.js
ALTER TABLE {ns}.backstage_backend_tasks__tasks
  ADD COLUMN last_run_error_json text NULL,
  ADD COLUMN last_run_ended_at timestamptz NULL;
COMMENT ON COLUMN {ns}.backstage_backend_tasks__tasks.last_run_error_json
  IS 'JSON serialized error object from the last task run';
COMMENT ON COLUMN {ns}.backstage_backend_tasks__tasks.last_run_ended_at
  IS 'The time that the last task run ended';

-- name: Migration4Jobs
-- octop_0001_jobs: the job queue (docs/jobs.md). Same columns, order and indexes as the SQLite backend.
CREATE TABLE {ns}.octop_jobs (
  id uuid NOT NULL PRIMARY KEY DEFAULT gen_random_uuid(),
  queue text NOT NULL DEFAULT 'default',
  kind text NOT NULL,
  payload jsonb NOT NULL,
  priority integer NOT NULL DEFAULT 0,
  scheduled_at timestamptz NOT NULL DEFAULT now(),
  status text NOT NULL DEFAULT 'pending'
    CHECK (status IN ('pending', 'running', 'success', 'failed', 'frozen')),
  attempt integer NOT NULL DEFAULT 0 CHECK (attempt >= 0),
  max_retries integer NOT NULL DEFAULT 3 CHECK (max_retries >= 0),
  attempt_token text NULL,
  last_error text NULL CHECK (char_length(last_error) <= 1024),
  created_at timestamptz NOT NULL DEFAULT now(),
  started_at timestamptz NULL,
  completed_at timestamptz NULL,
  expires_at timestamptz NULL,
  unique_key text NULL
);
CREATE UNIQUE INDEX octop_jobs_unique_key ON {ns}.octop_jobs (unique_key) WHERE status IN ('pending', 'running');
CREATE INDEX octop_jobs_claim ON {ns}.octop_jobs (status, queue, priority, scheduled_at) WHERE status = 'pending';

-- name: Migration5Config
-- octop_0002_config: runtime settings read by the job queue without a restart.
CREATE TABLE {ns}.octop_config (
  key text NOT NULL PRIMARY KEY,
  value jsonb NOT NULL,
  updated_at timestamptz NOT NULL DEFAULT now()
);

-- name: Migration6JobQueue
-- octop_0003_job_queue: what the job queue's operations need (docs/store.md, "Jobs"); same objects as on SQLite.
-- * worker_id: who claimed a job last. * A 'failed' job waits for its retry, so it is live: the unique key stays
-- taken and claims consider it; both partial indexes are rebuilt over the statuses they must cover (the claim index
-- in ORDER BY order, so a claim reads the first rows of one index range). * octop_queues for pause/resume.
-- * The monitoring views for DBAs and the summary API (docs/store.md, "Schema").
ALTER TABLE {ns}.octop_jobs ADD COLUMN worker_id text NULL;
DROP INDEX {ns}.octop_jobs_unique_key;
CREATE UNIQUE INDEX octop_jobs_unique_key ON {ns}.octop_jobs (unique_key)
  WHERE status IN ('pending', 'running', 'failed');
DROP INDEX {ns}.octop_jobs_claim;
CREATE INDEX octop_jobs_claim ON {ns}.octop_jobs (queue, priority, scheduled_at, id)
  WHERE status IN ('pending', 'failed');
CREATE INDEX octop_jobs_expires ON {ns}.octop_jobs (expires_at) WHERE status = 'running';
CREATE INDEX octop_jobs_created ON {ns}.octop_jobs (created_at);
CREATE TABLE {ns}.octop_queues (
  name text NOT NULL PRIMARY KEY,
  paused boolean NOT NULL DEFAULT false,
  updated_at timestamptz NOT NULL DEFAULT now()
);
-- Per (queue, status): count, oldest scheduled_at, average delay in seconds: for waiting jobs (pending, failed)
-- now() - scheduled_at over the due ones; for started ones started_at - scheduled_at over those started in the last
-- hour. SummarizeJobs runs the same query with the store's now (JobSummary in jobs.sql).
CREATE VIEW {ns}.octop_job_summary AS
SELECT queue, status, count(*) AS count, min(scheduled_at) AS oldest_scheduled_at,
       EXTRACT(EPOCH FROM CASE WHEN status IN ('pending', 'failed')
         THEN avg(now() - scheduled_at) FILTER (WHERE scheduled_at <= now())
         ELSE avg(started_at - scheduled_at) FILTER (WHERE started_at >= now() - interval '1 hour')
       END) AS average_delay_seconds
FROM {ns}.octop_jobs
GROUP BY queue, status;
CREATE VIEW {ns}.octop_failed_jobs AS
SELECT id, queue, kind, payload, priority, scheduled_at, status, attempt, max_retries, attempt_token, last_error,
       created_at, started_at, completed_at, expires_at, unique_key, worker_id,
       coalesce(completed_at, started_at, created_at) AS failed_at
FROM {ns}.octop_jobs
WHERE status IN ('failed', 'frozen');

-- name: Migration7JobSets
-- octop_0004_job_sets: the queue's working sets in tables of their own, so that a claim and a completion change no
-- indexed column of octop_jobs (docs/store.md §8.5). octop_jobs keeps its primary key and the
-- created_at index; with room left in each page (fillfactor) its updates are HOT: no index entry is written.
-- * octop_waiting_jobs: one row per job waiting to run (pending, or failed waiting for its retry), in claim order;
--   a claim deletes it, a retry or a release puts it back.
-- * octop_job_keys: one row per unique key held by a live job; a job going final gives its key up.
-- * octop_job_leases: one row per claim (its token, its expiry, its jobs); the rescuer reads these instead of an
--   index over every running job. A lease goes when one completion batch finishes all its jobs, or once it
--   expired and the rescuer took what was left.
-- The rows of live jobs are copied in; the three indexes they replace are dropped.
CREATE TABLE {ns}.octop_waiting_jobs (
  id uuid NOT NULL PRIMARY KEY,
  queue text NOT NULL,
  kind text NOT NULL,
  priority integer NOT NULL,
  scheduled_at timestamptz NOT NULL
);
CREATE INDEX octop_waiting_jobs_claim ON {ns}.octop_waiting_jobs (queue, priority, scheduled_at, id);
CREATE TABLE {ns}.octop_job_keys (
  unique_key text NOT NULL PRIMARY KEY,
  job_id uuid NOT NULL
);
CREATE TABLE {ns}.octop_job_leases (
  attempt_token text NOT NULL PRIMARY KEY,
  expires_at timestamptz NOT NULL,
  job_ids uuid[] NOT NULL
);
CREATE INDEX octop_job_leases_expires ON {ns}.octop_job_leases (expires_at);
INSERT INTO {ns}.octop_waiting_jobs (id, queue, kind, priority, scheduled_at)
SELECT id, queue, kind, priority, scheduled_at FROM {ns}.octop_jobs WHERE status IN ('pending', 'failed');
INSERT INTO {ns}.octop_job_keys (unique_key, job_id)
SELECT unique_key, id FROM {ns}.octop_jobs
WHERE unique_key IS NOT NULL AND status IN ('pending', 'running', 'failed');
INSERT INTO {ns}.octop_job_leases (attempt_token, expires_at, job_ids)
SELECT attempt_token, COALESCE(max(expires_at), now()), array_agg(id) FROM {ns}.octop_jobs
WHERE status = 'running' AND attempt_token IS NOT NULL
GROUP BY attempt_token;
DROP INDEX {ns}.octop_jobs_claim;
DROP INDEX {ns}.octop_jobs_unique_key;
DROP INDEX {ns}.octop_jobs_expires;
ALTER TABLE {ns}.octop_jobs SET (fillfactor = 50);

-- name: Migration8LeaseIds
-- octop_0005_lease_ids: a lease's job ids are stored out of line without compression. The array (16 bytes an id,
-- one id per claimed job) passes the 2 kB at which PostgreSQL compresses a row's wide values from a claim of
-- about 120 jobs on, and random ids do not compress, so every such claim paid for a failed pglz attempt over the
-- whole array: measured, a lease of 256 ids took 111 us to insert with the attempt and 23 without it, one of 500
-- 243 and 35, and none was stored compressed (docs/store.md §8.5). Catalog only: no row is rewritten.
ALTER TABLE {ns}.octop_job_leases ALTER COLUMN job_ids SET STORAGE EXTERNAL;

-- name: Migration9JobCancels
-- octop_0006_job_cancels: a cancel of a running job is a request to whichever node runs it (docs/jobs.md,
-- "Cancelling a running job"). One row per job whose running attempt (its token) was asked to stop; the node
-- learns it from a notification, or from this table on its next rescue pass, and an attempt that fails, or is
-- handed back, or whose lease runs out under a request ends frozen instead of waiting again. A row whose attempt
-- has ended is dropped by the next cancel request. A new table only: nothing else changes.
CREATE TABLE {ns}.octop_job_cancels (
  job_id uuid NOT NULL PRIMARY KEY,
  attempt_token text NOT NULL,
  requested_at timestamptz NOT NULL
);

-- name: Migration10SqlWrites
-- octop_0007_sql_writes: status is the one source of a job's state (docs/jobs.md "Jobs written
-- by SQL"), so a job INSERTed by plain SQL must be registered -- also where the claimable set and the live keys
-- are tables of their own (octop_0004). A row trigger adds the waiting row and the key of such a job and wakes
-- its queue as EnqueueJobs does (on commit). octop's own EnqueueJobs writes both in its statement and turns the
-- trigger off for it (octop.enqueueing, a transaction-local setting): its WHEN is false there, so no function
-- runs (measured: no difference in enqueue time; docs/performance.md). A key held by another live job makes the
-- INSERT fail with a unique violation, as the unique index of octop_0003 did. UPDATEs and DELETEs by SQL are not
-- caught by triggers: a row trigger on UPDATE would cost every claim and completion (PostgreSQL fetches the old
-- row version for an AFTER ROW trigger before testing its WHEN; measured, about 2.3 us per claimed job), so the
-- job queue's maintenance reconciles them (ReconcileJobSets in jobs.sql). Then the live jobs that such writes
-- left without their rows are repaired.
CREATE FUNCTION {ns}.octop_jobs_inserted() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF NEW.status IN ('pending', 'failed')
     AND NOT EXISTS (SELECT 1 FROM {ns}.octop_waiting_jobs w WHERE w.id = NEW.id) THEN
    INSERT INTO {ns}.octop_waiting_jobs (id, queue, kind, priority, scheduled_at)
    VALUES (NEW.id, NEW.queue, NEW.kind, NEW.priority, NEW.scheduled_at);
    PERFORM pg_notify('octop_jobs', TG_TABLE_SCHEMA || '/' || NEW.queue);
  END IF;
  IF NEW.unique_key IS NOT NULL AND NEW.status IN ('pending', 'running', 'failed')
     AND NOT EXISTS (SELECT 1 FROM {ns}.octop_job_keys k
                     WHERE k.unique_key = NEW.unique_key AND k.job_id = NEW.id) THEN
    INSERT INTO {ns}.octop_job_keys (unique_key, job_id) VALUES (NEW.unique_key, NEW.id);
  END IF;
  RETURN NULL;
END $$;
CREATE TRIGGER octop_jobs_inserted AFTER INSERT ON {ns}.octop_jobs FOR EACH ROW
  WHEN (current_setting('octop.enqueueing', true) IS DISTINCT FROM 'on')
  EXECUTE FUNCTION {ns}.octop_jobs_inserted();
INSERT INTO {ns}.octop_waiting_jobs (id, queue, kind, priority, scheduled_at)
SELECT j.id, j.queue, j.kind, j.priority, j.scheduled_at FROM {ns}.octop_jobs j
WHERE j.status IN ('pending', 'failed') AND NOT EXISTS (SELECT 1 FROM {ns}.octop_waiting_jobs w WHERE w.id = j.id);
INSERT INTO {ns}.octop_job_keys (unique_key, job_id)
SELECT DISTINCT ON (j.unique_key) j.unique_key, j.id FROM {ns}.octop_jobs j
WHERE j.unique_key IS NOT NULL AND j.status IN ('pending', 'running', 'failed')
  AND NOT EXISTS (SELECT 1 FROM {ns}.octop_job_keys k WHERE k.unique_key = j.unique_key)
ORDER BY j.unique_key, j.created_at;

-- name: Migration11SqlChanges
-- octop_0008_sql_changes: a plain SQL UPDATE, DELETE or TRUNCATE of octop_jobs wakes the job queue's
-- maintenance, which reconciles the working sets at once (docs/jobs.md "Jobs written by SQL"), instead of on its
-- next periodic pass: a DBA's retry by UPDATE runs within moments, and no node has to read every job on a short
-- period to catch one. A statement trigger, so its cost is one test of its WHEN per statement, not per row
-- (a row trigger on UPDATE costs every claimed job, octop_0007). octop's own statements turn it off for their
-- transaction (octop.writing, a transaction-local setting: jobs.sql IndexPlanSettings,
-- OwnWriteSettings); any other statement notifies, on commit, even one that changed no row.
CREATE FUNCTION {ns}.octop_jobs_changed() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  PERFORM pg_notify('octop_jobs_changed', TG_TABLE_SCHEMA || '/');
  RETURN NULL;
END $$;
CREATE TRIGGER octop_jobs_changed AFTER UPDATE OR DELETE OR TRUNCATE ON {ns}.octop_jobs FOR EACH STATEMENT
  WHEN (current_setting('octop.writing', true) IS DISTINCT FROM 'on')
  EXECUTE FUNCTION {ns}.octop_jobs_changed();
