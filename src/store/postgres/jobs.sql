-- The PostgreSQL statements of the job-queue operations (octop_jobs and its three working sets, octop_queues,
-- octop_config); semantics in store/job_store.h, the layout and the reasoning in docs/store.md "Jobs".
--
-- The layout (migration octop_0004_job_sets): octop_jobs is every job's record, indexed only by its id and
-- created_at, so updating its status, times and token is a HOT update. What a claim, a unique key or the rescuer
-- must find by index lives in a table of its own: octop_waiting_jobs (the claimable set), octop_job_keys (keys of
-- live jobs), octop_job_leases (one row per claim). Lock order, so that no two statements deadlock: a waiting row
-- or a lease before the job row (a claim finds a job through its waiting row); the one statement that touches a
-- lease after job rows (CompleteJobs) takes it only if it is free (SKIP LOCKED).
--
-- Conventions as in tasks.sql: {ns} the quoted schema, $1 the database-now override (NULL in production), so "now"
-- is COALESCE($1::timestamptz, now()). Batches travel as arrays (one element per item, unnest WITH ORDINALITY keeps
-- the input order), so a batch is one statement and one round trip. A job row is always returned as these 17
-- columns, in this order (ReadJob in postgres_store.cc):
--   id, queue, kind, payload, priority, scheduled_at, status, attempt, max_retries, attempt_token, last_error,
--   created_at, started_at, completed_at, expires_at, unique_key, worker_id

-- name: EnqueueJobs
-- $2 ids, $3 queues, $4 kinds, $5 payloads (text, cast to jsonb), $6 priorities, $7 scheduled times (NULL: now),
-- $8 max_retries, $9 unique keys (NULL: none), $10 the notification prefix "<ns>/".
-- A unique key held by a live job (pending, running, failed) is a row of octop_job_keys, so ON CONFLICT skips the
-- item: the primary key decides atomically, waiting for a concurrent inserter of the same key to commit or roll
-- back. Only the items whose key was taken (or that have none) become jobs and waiting rows; skipped items are then
-- looked up (FindLiveJobsByKeys). NOTIFY once per queue that received a job; delivered on commit. $10 NULL: no
-- NOTIFY here (Store::EnqueueJobs sends NotifyJobQueues after its commit instead).
WITH input AS (
  SELECT * FROM unnest($2::uuid[], $3::text[], $4::text[], $5::text[], $6::int[], $7::timestamptz[], $8::int[],
                       $9::text[])
    WITH ORDINALITY AS t(id, queue, kind, payload, priority, at, max_retries, unique_key, ord)),
keyed AS (
  INSERT INTO {ns}.octop_job_keys (unique_key, job_id)
  SELECT unique_key, id FROM input WHERE unique_key IS NOT NULL ORDER BY ord
  ON CONFLICT (unique_key) DO NOTHING
  RETURNING job_id),
inserted AS (
  INSERT INTO {ns}.octop_jobs (id, queue, kind, payload, priority, scheduled_at, status, attempt, max_retries,
                               created_at, unique_key)
  SELECT id, queue, kind, payload::jsonb, priority, COALESCE(at, $1::timestamptz, now()),
         'pending', 0, max_retries, COALESCE($1::timestamptz, now()), unique_key
  FROM input
  WHERE (unique_key IS NULL OR id IN (SELECT job_id FROM keyed))
    -- Evaluated once, before the first row: this statement writes the waiting rows and keys itself, so the
    -- octop_jobs_inserted trigger is off for the rest of the transaction (migrations.sql, octop_0007).
    AND (SELECT set_config('octop.enqueueing', 'on', true)) = 'on'
  ORDER BY ord
  RETURNING id, queue, kind, priority, scheduled_at),
waiting AS (
  INSERT INTO {ns}.octop_waiting_jobs (id, queue, kind, priority, scheduled_at)
  SELECT id, queue, kind, priority, scheduled_at FROM inserted),
notified AS (SELECT pg_notify('octop_jobs', $10 || q.queue) FROM (SELECT DISTINCT queue FROM inserted) q
             WHERE $10::text IS NOT NULL)
SELECT id::text, (SELECT count(*) FROM notified) FROM inserted;

-- name: EnqueueingDone
-- Run after EnqueueJobs inside a caller's transaction (EnqueueTx): EnqueueJobs turned the octop_jobs_inserted
-- trigger off for the rest of the transaction (octop.enqueueing), so a job the caller then INSERTs by plain SQL
-- in the same transaction would wait for a reconcile pass. This turns it back on. octop's own enqueues commit
-- right after EnqueueJobs and need it not.
SELECT set_config('octop.enqueueing', 'off', true);

-- name: NotifyJobQueues
-- $1 notification prefix "<ns>/", $2 queues. The wake-up of a committed Store::EnqueueJobs, in a transaction of
-- its own, sent by the store's WakeupSender thread after the enqueue returned (the wake-ups asked for while one
-- is in flight go out together in the next). A NOTIFY holds one cluster-wide lock from its commit's start to its end, WAL flush included: inside the
-- enqueue transaction every notifying enqueue would wait for the previous one's fsync (about 200 enqueues/s at
-- 5 ms a flush). Here nothing durable is written, so the commit does not wait for the flush (synchronous_commit
-- off for this transaction only) and the lock is held for microseconds. A wake-up lost in a crash is covered by
-- polling, as any missed notification is.
SELECT (SELECT set_config('synchronous_commit', 'off', true)),
       (SELECT count(*) FROM (SELECT pg_notify('octop_jobs', $1 || q) FROM unnest($2::text[]) q) n);

-- name: FindLiveJobsByKeys
-- $1 unique keys. Read in a new snapshot (READ COMMITTED), so it sees the job a concurrent enqueuer committed.
SELECT unique_key, job_id::text FROM {ns}.octop_job_keys WHERE unique_key = ANY ($1::text[]);

-- name: ClaimJobs
-- $2 queue, $3 limit, $4 kinds (NULL: any), $5 timeout, $6 worker id. One statement: `picked` locks up to $3 due
-- waiting rows in claim order, skipping rows another claimer holds (SKIP LOCKED: claimers never wait for each other
-- and never get the same job); `taken` deletes them (by ctid: the rows are locked, so it cannot have moved); the
-- jobs are updated to running (HOT: no indexed column changes) and one lease row records the claim.
-- It runs after IndexPlanSettings, in the same transaction and round trip (postgres_job_store.cc), and commits
-- as every write of octop does, waiting for its WAL flush (and, with synchronous replication, the standby): the
-- job's handler starts only once its claim would survive a crash or a failover, so the job cannot be claimed and
-- run a second time beside it (docs/jobs.md "Durability of claims").
-- One token for all the rows of a claim (an InitPlan, evaluated once): a completion matches id and token, and every
-- later claim of a job gets a new token, so fencing holds; the lease is keyed by it.
WITH picked AS (
  SELECT ctid, id FROM {ns}.octop_waiting_jobs
  WHERE queue = $2
    AND scheduled_at <= COALESCE($1::timestamptz, now())
    AND ($4::text[] IS NULL OR kind = ANY ($4::text[]))
    AND NOT EXISTS (SELECT 1 FROM {ns}.octop_queues q WHERE q.name = $2 AND q.paused)
  ORDER BY priority, scheduled_at, id
  LIMIT $3
  FOR UPDATE SKIP LOCKED),
taken AS (
  DELETE FROM {ns}.octop_waiting_jobs WHERE ctid = ANY (ARRAY(SELECT ctid FROM picked))
  RETURNING id),
claimed AS (
  UPDATE {ns}.octop_jobs j
  SET status = 'running',
      attempt = j.attempt + 1,
      attempt_token = (SELECT gen_random_uuid()::text),  -- once per claim: fencing needs a token per claim
      started_at = COALESCE($1::timestamptz, now()),
      expires_at = COALESCE($1::timestamptz, now()) + $5::interval,
      worker_id = $6
  WHERE j.id = ANY (ARRAY(SELECT id FROM taken))
    AND j.status IN ('pending', 'failed')  -- a waiting row always has such a job; never take one that is not
  RETURNING j.id, j.queue, j.kind, j.payload, j.priority, j.scheduled_at, j.status, j.attempt, j.max_retries,
            j.attempt_token, j.last_error, j.created_at, j.started_at, j.completed_at, j.expires_at, j.unique_key,
            j.worker_id),
leased AS (
  INSERT INTO {ns}.octop_job_leases (attempt_token, expires_at, job_ids)
  SELECT min(attempt_token), min(expires_at), array_agg(id) FROM claimed HAVING count(*) > 0)
SELECT id::text, queue, kind, payload::text, priority, scheduled_at, status, attempt, max_retries, attempt_token,
       last_error, created_at, started_at, completed_at, expires_at, unique_key, worker_id
FROM claimed;

-- name: IndexPlanSettings
-- Run before ClaimJobs, CompleteJobs, RescueExpiredJobs and RenewJobLeases in their transaction (is_local: the
-- settings end with it): each of them finds its rows through an index, and must, whatever the statistics say. A
-- prepared statement keeps the plan made while its tables were small (PostgreSQL replans only after an ANALYZE), and a
-- table with no statistics yet (a new namespace, a burst into an empty queue before autovacuum's first ANALYZE)
-- is estimated at a handful of due rows: measured, claims that read every job or every waiting row with a
-- sequential or bitmap scan, 3-9 ms for a claim of 11 jobs and 26-56 ms for one of 500 where the index takes
-- under 1 and ~6 (docs/performance.md). These settings make every other plan cost more than any index plan.
-- octop.writing: as OwnWriteSettings.
SELECT set_config('enable_seqscan', 'off', true), set_config('enable_bitmapscan', 'off', true),
       set_config('octop.writing', 'on', true);

-- name: OwnWriteSettings
-- Run before octop's other statements that UPDATE or DELETE octop_jobs (RetryJob, CancelJob's,
-- DeleteFinishedJobs), in their transaction, as IndexPlanSettings is before theirs: octop keeps the working sets
-- in step in the statement that changes a job, so it turns off the octop_jobs_changed trigger, which asks every
-- node to reconcile after a change by plain SQL (migrations.sql, octop_0008).
SELECT set_config('octop.writing', 'on', true);

-- name: LockJobRows
-- $1 ids. Run before CompleteJobs (a batch that is not all successes), in its transaction and round trip:
-- locks the batch's job rows, in id order. CompleteJobs reads the stop requests (octop_job_cancels) in the
-- snapshot it takes when it starts, so a request committed while it runs would be missed and a cancelled
-- attempt would wait for its retry. CancelJob writes a request only while it holds the job row's lock
-- (LockJobToCancel), so once this statement holds the rows, every request for them has either committed --
-- and CompleteJobs, a new statement with a new snapshot, sees it -- or waits for this transaction and then
-- finds the job as it left it (docs/store.md §8.3 CancelJob). Successes need no lock: a success ends the job
-- whatever was asked.
SELECT 1 FROM {ns}.octop_jobs WHERE id = ANY ($1::uuid[]) ORDER BY id FOR UPDATE;

-- name: CompleteJobs
-- $2 ids, $3 attempt tokens, $4 outcomes (0 success, 1 failed attempt, 2 cancel, 3 release: the attempt never
-- started, the claim is undone), $5 errors, $6 retry delays. Fenced: only rows still running under the same token
-- change. In SET, j.* are the values before the update; in RETURNING, after. A job that waits again (a retry, a
-- release) gets its waiting row back; one that went final gives its unique key up. A batch that finishes every
-- job of a claim deletes its lease (a claim's jobs finish once each under its token, so the counts match only
-- then); any other lease stays until it expires and the rescuer drops it, finding nothing left to rescue. The
-- lease is never updated here: completions of one claim by many workers would queue on its row lock, each behind
-- the previous one's commit. The lease is locked with SKIP LOCKED, after the job rows: a rescuer or renewer that
-- holds it keeps it (they lock the lease first), so none of them waits for the other in a cycle.
-- An attempt asked to stop (a row in octop_job_cancels for its token) that fails or is handed back ends as a
-- cancel, with the error $7: a cancelled job never waits again. Looked up for those outcomes only.
-- Returns the 1-based positions that were applied.
WITH given AS (
  SELECT * FROM unnest($2::uuid[], $3::text[], $4::int[], $5::text[], $6::interval[])
    WITH ORDINALITY AS g(id, token, outcome, error, delay, ord)),
stopped AS (
  SELECT g.*, g.outcome IN (1, 3) AND EXISTS (
           SELECT 1 FROM {ns}.octop_job_cancels x WHERE x.job_id = g.id AND x.attempt_token = g.token) AS cancel
  FROM given g),
c AS (
  SELECT id, token, CASE WHEN cancel THEN 2 ELSE outcome END AS outcome,
         CASE WHEN cancel THEN $7 ELSE error END AS error, delay, ord
  FROM stopped),
updated AS (
  UPDATE {ns}.octop_jobs j
  SET status = CASE
        WHEN c.outcome = 0 THEN 'success'
        WHEN c.outcome = 1 AND j.attempt <= j.max_retries THEN 'failed'
        WHEN c.outcome = 3 AND j.attempt <= 1 THEN 'pending'
        WHEN c.outcome = 3 THEN 'failed'
        ELSE 'frozen'
      END,
      scheduled_at = CASE
        WHEN c.outcome = 1 AND j.attempt <= j.max_retries THEN COALESCE($1::timestamptz, now()) + c.delay
        ELSE j.scheduled_at
      END,
      completed_at = CASE
        WHEN c.outcome = 1 AND j.attempt <= j.max_retries THEN NULL
        WHEN c.outcome = 3 THEN NULL
        ELSE COALESCE($1::timestamptz, now())
      END,
      attempt = CASE WHEN c.outcome = 3 THEN GREATEST(j.attempt - 1, 0) ELSE j.attempt END,
      attempt_token = CASE WHEN c.outcome = 3 THEN NULL ELSE j.attempt_token END,
      started_at = CASE WHEN c.outcome = 3 AND j.attempt <= 1 THEN NULL ELSE j.started_at END,
      worker_id = CASE WHEN c.outcome = 3 THEN NULL ELSE j.worker_id END,
      expires_at = NULL,
      last_error = c.error
  FROM c
  WHERE j.id = c.id AND j.attempt_token = c.token AND j.status = 'running'
  RETURNING c.ord, c.token, j.id, j.queue, j.kind, j.priority, j.scheduled_at, j.status, j.unique_key),
requeued AS (
  INSERT INTO {ns}.octop_waiting_jobs (id, queue, kind, priority, scheduled_at)
  SELECT id, queue, kind, priority, scheduled_at FROM updated WHERE status IN ('pending', 'failed')),
unkeyed AS (
  DELETE FROM {ns}.octop_job_keys k USING updated u
  WHERE u.unique_key IS NOT NULL AND u.status IN ('success', 'frozen') AND k.unique_key = u.unique_key
    AND k.job_id = u.id),
per_lease AS (SELECT token, count(*) AS n FROM updated GROUP BY token),
finished_lease AS (
  SELECT l.attempt_token FROM {ns}.octop_job_leases l JOIN per_lease p ON l.attempt_token = p.token
  WHERE cardinality(l.job_ids) = p.n
  FOR UPDATE OF l SKIP LOCKED),
lease_done AS (
  DELETE FROM {ns}.octop_job_leases l USING finished_lease f WHERE l.attempt_token = f.attempt_token)
SELECT ord FROM updated;

-- name: CompleteSucceededJobs
-- CompleteJobs for a batch of plain successes (no error text), the common case: $2 ids, $3 attempt tokens. The
-- same fencing, key release and lease deletion as CompleteJobs, without the outcome, error and delay arrays or
-- the per-row CASEs, and nothing can wait again, so no waiting row is written: measured, about 8 % less server
-- time per completed job (docs/store.md §8.3 CompleteJobs).
-- Returns the 1-based positions that were applied.
WITH c AS (
  SELECT * FROM unnest($2::uuid[], $3::text[]) WITH ORDINALITY AS c(id, token, ord)),
updated AS (
  UPDATE {ns}.octop_jobs j
  SET status = 'success', completed_at = COALESCE($1::timestamptz, now()), expires_at = NULL, last_error = NULL
  FROM c
  WHERE j.id = c.id AND j.attempt_token = c.token AND j.status = 'running'
  RETURNING c.ord, c.token, j.id, j.unique_key),
unkeyed AS (
  DELETE FROM {ns}.octop_job_keys k USING updated u
  WHERE u.unique_key IS NOT NULL AND k.unique_key = u.unique_key AND k.job_id = u.id),
per_lease AS (SELECT token, count(*) AS n FROM updated GROUP BY token),
finished_lease AS (
  SELECT l.attempt_token FROM {ns}.octop_job_leases l JOIN per_lease p ON l.attempt_token = p.token
  WHERE cardinality(l.job_ids) = p.n
  FOR UPDATE OF l SKIP LOCKED),
lease_done AS (
  DELETE FROM {ns}.octop_job_leases l USING finished_lease f WHERE l.attempt_token = f.attempt_token)
SELECT ord FROM updated;

-- name: LockExpiredLeases
-- $2 the tokens spared, $3 expired before (as RescueExpiredJobs's $5 and $6). Run before RescueExpiredJobs, in
-- its transaction and round trip, for the reason LockJobRows gives: locks the expired leases (SKIP LOCKED, as the
-- rescue does) and then their job rows, in id order -- a lease before its job rows, the store's lock order. Both
-- statements read "now" once (the transaction's start), so the rescue finds the leases locked here.
WITH expired AS (
  SELECT job_ids FROM {ns}.octop_job_leases
  WHERE expires_at < LEAST(COALESCE($1::timestamptz, now()), $3::timestamptz)
    AND NOT COALESCE(attempt_token = ANY ($2::text[]), false)
  FOR UPDATE SKIP LOCKED)
SELECT 1 FROM {ns}.octop_jobs WHERE id IN (SELECT unnest(job_ids) FROM expired) ORDER BY id FOR UPDATE;

-- name: RescueExpiredJobs
-- $2 backoff base, $3 backoff cap, $4 the error, $5 the tokens spared, $6 expired before (NULL: now; LEAST skips
-- a NULL). Expired leases are locked with SKIP LOCKED (a lease being renewed right now is left to its renewer) and
-- deleted; their jobs still running under the lease's token fail (or freeze) like a failed attempt, waiting again
-- or giving their unique key up -- except an attempt asked to stop (octop_job_cancels), which ends frozen with
-- the error $7. A job whose completer holds its row is waited for, then left alone (no longer running); a
-- completer never waits for a lease (SKIP LOCKED), so the two never deadlock.
WITH expired AS (
  SELECT attempt_token, job_ids FROM {ns}.octop_job_leases
  WHERE expires_at < LEAST(COALESCE($1::timestamptz, now()), $6::timestamptz)
    AND NOT COALESCE(attempt_token = ANY ($5::text[]), false)
  FOR UPDATE SKIP LOCKED),
dropped AS (
  DELETE FROM {ns}.octop_job_leases l USING expired e WHERE l.attempt_token = e.attempt_token),
rescued AS (
  UPDATE {ns}.octop_jobs j
  SET status = CASE WHEN j.attempt <= j.max_retries AND NOT x.cancel THEN 'failed' ELSE 'frozen' END,
      scheduled_at = CASE
        WHEN j.attempt <= j.max_retries AND NOT x.cancel
          THEN COALESCE($1::timestamptz, now())
               + LEAST($2::interval * power(2, LEAST(GREATEST(j.attempt - 1, 0), 30)), $3::interval)
        ELSE j.scheduled_at
      END,
      completed_at = CASE
        WHEN j.attempt <= j.max_retries AND NOT x.cancel THEN NULL
        ELSE COALESCE($1::timestamptz, now())
      END,
      expires_at = NULL,
      last_error = CASE WHEN x.cancel THEN $7 ELSE $4 END
  FROM (SELECT e.id, e.attempt_token,
               EXISTS (SELECT 1 FROM {ns}.octop_job_cancels k
                       WHERE k.job_id = e.id AND k.attempt_token = e.attempt_token) AS cancel
        FROM (SELECT unnest(job_ids) AS id, attempt_token FROM expired) e) x
  WHERE j.id = x.id AND j.attempt_token = x.attempt_token AND j.status = 'running'
  RETURNING j.id, j.queue, j.kind, j.priority, j.scheduled_at, j.status, j.attempt, j.unique_key),
requeued AS (
  INSERT INTO {ns}.octop_waiting_jobs (id, queue, kind, priority, scheduled_at)
  SELECT id, queue, kind, priority, scheduled_at FROM rescued WHERE status = 'failed'),
unkeyed AS (
  DELETE FROM {ns}.octop_job_keys k USING rescued r
  WHERE r.unique_key IS NOT NULL AND r.status = 'frozen' AND k.unique_key = r.unique_key AND k.job_id = r.id)
SELECT id::text, status, attempt FROM rescued;

-- name: RenewJobLeases
-- $2 the tokens, $3 the lease. The lease rows first, then their running jobs' expires_at (what GetJob shows);
-- the count is of jobs.
WITH renewed AS (
  UPDATE {ns}.octop_job_leases SET expires_at = COALESCE($1::timestamptz, now()) + $3::interval
  WHERE attempt_token = ANY ($2::text[])
  RETURNING attempt_token, job_ids)
UPDATE {ns}.octop_jobs j
SET expires_at = COALESCE($1::timestamptz, now()) + $3::interval
FROM (SELECT unnest(job_ids) AS id, attempt_token FROM renewed) r
WHERE j.id = r.id AND j.attempt_token = r.attempt_token AND j.status = 'running';

-- name: RetryJob
-- $2 id, $3 notification prefix. current = NULL: NotFound; updated = 0: Conflict. A failed job still has its waiting
-- row: it is locked first (`touched`, the claim's lock order) and made due now; a claim that took it first leaves
-- nothing to touch, and the job, running now, is not updated. A frozen job gets a waiting row again and takes its
-- unique key back: if another live job holds it the insert fails with a unique violation (23505), reported as
-- Conflict, and nothing of the statement stays.
WITH current_row AS (SELECT status FROM {ns}.octop_jobs WHERE id = $2::uuid),
touched AS (
  UPDATE {ns}.octop_waiting_jobs SET scheduled_at = COALESCE($1::timestamptz, now())
  WHERE id = $2::uuid AND (SELECT status FROM current_row) = 'failed'  -- a pending job keeps its schedule
  RETURNING id),
updated AS (
  UPDATE {ns}.octop_jobs
  SET status = 'pending', scheduled_at = COALESCE($1::timestamptz, now()), max_retries = GREATEST(max_retries, attempt),
      completed_at = NULL, expires_at = NULL
  WHERE id = $2::uuid
    AND (status = 'frozen' OR (status = 'failed' AND EXISTS (SELECT 1 FROM touched)))
  RETURNING id, queue, kind, priority, scheduled_at, unique_key),
requeued AS (
  INSERT INTO {ns}.octop_waiting_jobs (id, queue, kind, priority, scheduled_at)
  SELECT id, queue, kind, priority, scheduled_at FROM updated WHERE NOT EXISTS (SELECT 1 FROM touched)),
rekeyed AS (
  INSERT INTO {ns}.octop_job_keys (unique_key, job_id)
  SELECT unique_key, id FROM updated WHERE unique_key IS NOT NULL AND NOT EXISTS (SELECT 1 FROM touched)),
notified AS (SELECT pg_notify('octop_jobs', $3 || queue) FROM updated)
SELECT (SELECT status FROM current_row), (SELECT count(*) FROM updated), (SELECT count(*) FROM notified);

-- CancelJob is a transaction of three statements (postgres_job_store.cc): UnwaitJob, LockJobToCancel, then
-- FreezeCancelledJob or RequestJobStop. The waiting row is deleted first and the job row locked second, the
-- claim's lock order; the job row stays locked until the commit, so no completion or rescue of a running job
-- reads the stop requests while one is being written (LockJobRows). A job found waiting (pending or failed)
-- without a waiting row deleted by this transaction was handed back between the two statements: the caller
-- rolls back and starts again.

-- name: UnwaitJob
-- $1 id. Waits for a claim that holds the waiting row: once it commits the row is gone (the job is running).
DELETE FROM {ns}.octop_waiting_jobs WHERE id = $1::uuid RETURNING id;

-- name: LockJobToCancel
-- $1 id. The job as it is now: waits for a completion, rescue or cancel that holds the row, then reads the
-- version it committed.
SELECT status, attempt_token FROM {ns}.octop_jobs WHERE id = $1::uuid FOR UPDATE;

-- name: FreezeCancelledJob
-- $2 id, $3 the error. A waiting job whose waiting row this transaction deleted: frozen, its key given up.
WITH updated AS (
  UPDATE {ns}.octop_jobs
  SET status = 'frozen', last_error = $3, completed_at = COALESCE($1::timestamptz, now()), expires_at = NULL
  WHERE id = $2::uuid AND status IN ('pending', 'failed')
  RETURNING id, unique_key),
unkeyed AS (
  DELETE FROM {ns}.octop_job_keys k USING updated u WHERE k.unique_key = u.unique_key AND k.job_id = u.id)
SELECT count(*) FROM updated;

-- name: RequestJobStop
-- $2 id, $3 its running attempt's token, $4 notification prefix. A running job is not written (its worker owns
-- the row): the request names the attempt's token, and the notification the job's id. Requests whose attempt
-- has ended (not running under that token any more) are dropped first, so the table holds about as many rows
-- as there are live requests.
WITH swept AS (
  DELETE FROM {ns}.octop_job_cancels x
  WHERE x.job_id <> $2::uuid
    AND NOT EXISTS (SELECT 1 FROM {ns}.octop_jobs j
                    WHERE j.id = x.job_id AND j.attempt_token = x.attempt_token AND j.status = 'running')),
requested AS (
  INSERT INTO {ns}.octop_job_cancels (job_id, attempt_token, requested_at)
  VALUES ($2::uuid, $3, COALESCE($1::timestamptz, now()))
  ON CONFLICT (job_id) DO UPDATE
    SET attempt_token = EXCLUDED.attempt_token, requested_at = EXCLUDED.requested_at
  RETURNING job_id)
SELECT count(*) FROM (SELECT pg_notify('octop_job_cancels', $4 || job_id::text) FROM requested) n;

-- name: CancelRequestsFor
-- $1 attempt tokens. The requests of attempts still running under one of them.
SELECT x.job_id::text FROM {ns}.octop_job_cancels x
JOIN {ns}.octop_jobs j ON j.id = x.job_id AND j.attempt_token = x.attempt_token AND j.status = 'running'
WHERE x.attempt_token = ANY ($1::text[]);

-- name: GetJob
SELECT id::text, queue, kind, payload::text, priority, scheduled_at, status, attempt, max_retries, attempt_token,
       last_error, created_at, started_at, completed_at, expires_at, unique_key, worker_id
FROM {ns}.octop_jobs WHERE id = $1::uuid;

-- name: ListJobs
-- $1 status, $2 queue, $3 kind (each NULL: any), $4 limit, $5 offset, $6 payload budget in bytes (NULL: none).
-- Newest first, id breaks ties. The page is cut first, so payload sizes are measured on at most $4 rows; a
-- payload whose running total passes the budget comes back NULL, with its size in the 18th column.
SELECT id::text, queue, kind,
       CASE WHEN $6::bigint IS NULL OR sum(size) OVER page <= $6 THEN payload END, priority, scheduled_at, status,
       attempt, max_retries, attempt_token, last_error, created_at, started_at, completed_at, expires_at,
       unique_key, worker_id, size
FROM (SELECT id, queue, kind, payload::text AS payload, octet_length(payload::text) AS size, priority, scheduled_at,
             status, attempt, max_retries, attempt_token, last_error, created_at, started_at, completed_at,
             expires_at, unique_key, worker_id
      FROM {ns}.octop_jobs
      WHERE ($1::text IS NULL OR status = $1) AND ($2::text IS NULL OR queue = $2) AND ($3::text IS NULL OR kind = $3)
      ORDER BY created_at DESC, id DESC
      LIMIT $4 OFFSET $5) AS j
WINDOW page AS (ORDER BY created_at DESC, id DESC ROWS UNBOUNDED PRECEDING)
ORDER BY created_at DESC, id DESC;

-- name: ListFailedJobs
-- $1 queue (NULL: any), $2 limit.
SELECT id::text, queue, kind, payload::text, priority, scheduled_at, status, attempt, max_retries, attempt_token,
       last_error, created_at, started_at, completed_at, expires_at, unique_key, worker_id
FROM {ns}.octop_failed_jobs
WHERE ($1::text IS NULL OR queue = $1)
ORDER BY failed_at DESC, id DESC
LIMIT $2;

-- name: JobSummary
-- The octop_job_summary view's query with the store's now; the average delay in microseconds. Returns db now too.
SELECT c.now, s.queue, s.status, s.count, s.oldest, s.delay_us
FROM (SELECT COALESCE($1::timestamptz, now()) AS now) c
LEFT JOIN LATERAL (
  SELECT queue, status, count(*) AS count, min(scheduled_at) AS oldest,
         (EXTRACT(EPOCH FROM CASE WHEN status IN ('pending', 'failed')
            THEN avg(c.now - scheduled_at) FILTER (WHERE scheduled_at <= c.now)
            ELSE avg(started_at - scheduled_at) FILTER (WHERE started_at >= c.now - interval '1 hour')
          END) * 1000000)::bigint AS delay_us
  FROM {ns}.octop_jobs
  GROUP BY queue, status) s ON true;

-- name: JobStats
-- $1 from, $2 to, $3 bucket in microseconds, $4 queue, $5 kind (each NULL: any). Finished jobs by bucket of
-- completed_at (EXTRACT gives an exact numeric of seconds), latencies in microseconds over the succeeded ones.
SELECT floor(EXTRACT(EPOCH FROM completed_at - $1::timestamptz) * 1000000 / $3::bigint)::bigint AS bucket,
       count(*) FILTER (WHERE status = 'success'), count(*) FILTER (WHERE status = 'frozen'),
       round(EXTRACT(EPOCH FROM avg(started_at - scheduled_at) FILTER (WHERE status = 'success')) * 1000000)::bigint,
       round(EXTRACT(EPOCH FROM max(started_at - scheduled_at) FILTER (WHERE status = 'success')) * 1000000)::bigint,
       round(EXTRACT(EPOCH FROM avg(completed_at - started_at) FILTER (WHERE status = 'success')) * 1000000)::bigint
FROM {ns}.octop_jobs
WHERE status IN ('success', 'frozen')
  AND completed_at >= $1::timestamptz AND completed_at < $2::timestamptz
  AND ($4::text IS NULL OR queue = $4) AND ($5::text IS NULL OR kind = $5)
GROUP BY 1
ORDER BY 1;

-- name: NextJobDueAt
SELECT min(scheduled_at) FROM {ns}.octop_waiting_jobs WHERE queue = $1;

-- name: SetQueuePaused
-- $2 queue, $3 paused, $4 notification prefix: resuming wakes the queue's workers.
WITH upserted AS (
  INSERT INTO {ns}.octop_queues (name, paused, updated_at) VALUES ($2, $3::boolean, COALESCE($1::timestamptz, now()))
  ON CONFLICT (name) DO UPDATE SET paused = excluded.paused, updated_at = excluded.updated_at
  RETURNING name, paused),
notified AS (SELECT pg_notify('octop_jobs', $4 || name) FROM upserted WHERE NOT paused)
SELECT (SELECT count(*) FROM upserted), (SELECT count(*) FROM notified);

-- name: ListQueues
-- Sorted by the store (bytes), as SQLite sorts.
SELECT name, paused FROM {ns}.octop_queues;

-- name: DeleteFinishedJobs
-- $2 final statuses, $3 older_than, $4 limit per call.
DELETE FROM {ns}.octop_jobs
WHERE id IN (
  SELECT id FROM {ns}.octop_jobs
  WHERE status = ANY ($2::text[])
    AND coalesce(completed_at, created_at) < COALESCE($1::timestamptz, now()) - $3::interval
  LIMIT $4);

-- name: ReconcileJobSets
-- Brings octop_waiting_jobs and octop_job_keys in step with what plain SQL UPDATEd or DELETEd in octop_jobs
-- (docs/jobs.md "Jobs written by SQL"; an INSERT is caught at once by the octop_jobs_inserted trigger): a job set
-- back to pending or failed gets its waiting row, a waiting row follows its job's schedule, priority, queue and
-- kind, and goes when the job is no longer waiting or no longer exists; a live keyed job holds its key, and a key
-- goes when its job has ended, gone or changed key. One statement, one snapshot: octop's own writes keep both
-- sets in step in the statement that changes a job, so what it finds out of step was written by SQL. The live
-- jobs are found by one read of every job (no index on status: docs/store.md §8.5); the rest go by primary keys.
-- A key held by another live job stays with that job. Returns how many rows it wrote.
WITH live AS MATERIALIZED (
  SELECT id, queue, kind, priority, scheduled_at, status, unique_key, created_at FROM {ns}.octop_jobs
  WHERE status IN ('pending', 'running', 'failed')),
stale AS (
  DELETE FROM {ns}.octop_waiting_jobs w
  WHERE NOT EXISTS (SELECT 1 FROM {ns}.octop_jobs j WHERE j.id = w.id AND j.status IN ('pending', 'failed'))
  RETURNING w.id),
moved AS (
  UPDATE {ns}.octop_waiting_jobs w
  SET queue = j.queue, kind = j.kind, priority = j.priority, scheduled_at = j.scheduled_at
  FROM {ns}.octop_jobs j
  WHERE j.id = w.id AND j.status IN ('pending', 'failed')
    AND (w.queue, w.kind, w.priority, w.scheduled_at) IS DISTINCT FROM (j.queue, j.kind, j.priority, j.scheduled_at)
  RETURNING w.id),
added AS (
  INSERT INTO {ns}.octop_waiting_jobs (id, queue, kind, priority, scheduled_at)
  SELECT j.id, j.queue, j.kind, j.priority, j.scheduled_at FROM live j
  WHERE j.status IN ('pending', 'failed')
    AND NOT EXISTS (SELECT 1 FROM {ns}.octop_waiting_jobs w WHERE w.id = j.id)
  ON CONFLICT (id) DO NOTHING
  RETURNING id),
freed AS (
  DELETE FROM {ns}.octop_job_keys k
  WHERE NOT EXISTS (SELECT 1 FROM {ns}.octop_jobs j
                    WHERE j.id = k.job_id AND j.unique_key = k.unique_key
                      AND j.status IN ('pending', 'running', 'failed'))
  RETURNING k.unique_key),
held AS (
  INSERT INTO {ns}.octop_job_keys (unique_key, job_id)
  SELECT DISTINCT ON (j.unique_key) j.unique_key, j.id FROM live j
  WHERE j.unique_key IS NOT NULL
    AND NOT EXISTS (SELECT 1 FROM {ns}.octop_job_keys k WHERE k.unique_key = j.unique_key)
  ORDER BY j.unique_key, j.created_at
  ON CONFLICT (unique_key) DO NOTHING
  RETURNING unique_key)
SELECT (SELECT count(*) FROM stale) + (SELECT count(*) FROM moved) + (SELECT count(*) FROM added)
       + (SELECT count(*) FROM freed) + (SELECT count(*) FROM held);

-- name: GetConfig
SELECT value::text FROM {ns}.octop_config WHERE key = $1;

-- name: SetConfig
-- $2 key, $3 value (text, cast to jsonb), $4 notification prefix.
WITH upserted AS (
  INSERT INTO {ns}.octop_config (key, value, updated_at) VALUES ($2, $3::jsonb, COALESCE($1::timestamptz, now()))
  ON CONFLICT (key) DO UPDATE SET value = excluded.value, updated_at = excluded.updated_at
  RETURNING key),
notified AS (SELECT pg_notify('octop_config', $4 || key) FROM upserted)
SELECT (SELECT count(*) FROM notified);
