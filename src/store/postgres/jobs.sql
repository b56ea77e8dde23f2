-- The PostgreSQL statements of the job-queue operations (octop_jobs, octop_queues, octop_config); semantics in
-- store/store.h, the reasoning in docs/store.md "Jobs".
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
-- A unique key held by a live job (pending, running, failed) makes ON CONFLICT skip the row: the partial unique index
-- decides atomically, waiting for a concurrent inserter of the same key to commit or roll back. Skipped items are
-- then looked up (FindLiveJobsByKeys). NOTIFY once per queue that received a job; delivered on commit. $10 NULL:
-- no NOTIFY here (Store::EnqueueJobs sends NotifyJobQueues after its commit instead).
WITH input AS (
  SELECT * FROM unnest($2::uuid[], $3::text[], $4::text[], $5::text[], $6::int[], $7::timestamptz[], $8::int[],
                       $9::text[])
    WITH ORDINALITY AS t(id, queue, kind, payload, priority, at, max_retries, unique_key, ord)),
inserted AS (
  INSERT INTO {ns}.octop_jobs (id, queue, kind, payload, priority, scheduled_at, status, attempt, max_retries,
                               created_at, unique_key)
  SELECT id, queue, kind, payload::jsonb, priority, COALESCE(at, $1::timestamptz, now()),
         'pending', 0, max_retries, COALESCE($1::timestamptz, now()), unique_key
  FROM input ORDER BY ord
  ON CONFLICT (unique_key) WHERE status IN ('pending', 'running', 'failed') DO NOTHING
  RETURNING id, queue),
notified AS (SELECT pg_notify('octop_jobs', $10 || q.queue) FROM (SELECT DISTINCT queue FROM inserted) q
             WHERE $10::text IS NOT NULL)
SELECT id::text, (SELECT count(*) FROM notified) FROM inserted;

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
SELECT unique_key, id::text FROM {ns}.octop_jobs
WHERE unique_key = ANY ($1::text[]) AND status IN ('pending', 'running', 'failed');

-- name: ClaimJobs
-- $2 queue, $3 limit, $4 kinds (NULL: any), $5 timeout, $6 worker id. One statement: the subquery locks up to $3
-- due rows in claim order, skipping rows another claimer holds (SKIP LOCKED: claimers never wait for each other and
-- never get the same job); the row lock re-checks status, so a row claimed and committed meanwhile is left out.
-- The claim commits without waiting for its WAL flush (the set_config, evaluated once: synchronous_commit off for
-- this transaction only); docs/jobs.md "Durability of claims" argues why that is safe: a claim lost in a crash
-- leaves the job pending, or running until its expiry and the rescuer, and the attempt's completion, which commits
-- synchronously, flushes the claim's WAL before its own.
-- One token for all the rows of a claim (an InitPlan, evaluated once): a completion matches id and token, and every
-- later claim of a job gets a new token, so fencing holds; gen_random_uuid() per row cost another 25 % (-> 317 ms).
WITH picked AS (
  SELECT id FROM {ns}.octop_jobs
  WHERE queue = $2
    AND status IN ('pending', 'failed')
    AND scheduled_at <= COALESCE($1::timestamptz, now())
    AND ($4::text[] IS NULL OR kind = ANY ($4::text[]))
    AND NOT EXISTS (SELECT 1 FROM {ns}.octop_queues q WHERE q.name = $2 AND q.paused)
    AND (SELECT set_config('synchronous_commit', 'off', true)) = 'off'
  ORDER BY priority, scheduled_at, id
  LIMIT $3
  FOR UPDATE SKIP LOCKED)
UPDATE {ns}.octop_jobs j
SET status = 'running',
    attempt = j.attempt + 1,
    attempt_token = (SELECT gen_random_uuid()::text),  -- once per claim: fencing needs a token per claim, not per row
    started_at = COALESCE($1::timestamptz, now()),
    expires_at = COALESCE($1::timestamptz, now()) + $5::interval,
    worker_id = $6
FROM picked
WHERE j.id = picked.id
RETURNING j.id::text, j.queue, j.kind, j.payload::text, j.priority, j.scheduled_at, j.status, j.attempt,
          j.max_retries, j.attempt_token, j.last_error, j.created_at, j.started_at, j.completed_at, j.expires_at,
          j.unique_key, j.worker_id;

-- name: CompleteJobs
-- $2 ids, $3 attempt tokens, $4 outcomes (0 success, 1 failed attempt, 2 cancel, 3 release: the attempt never
-- started, the claim is undone), $5 errors, $6 retry delays. Fenced: only rows still running under the same token
-- change. In SET, j.* are the values before the update. Returns the 1-based positions that were applied.
WITH c AS (
  SELECT * FROM unnest($2::uuid[], $3::text[], $4::int[], $5::text[], $6::interval[])
    WITH ORDINALITY AS c(id, token, outcome, error, delay, ord)),
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
  RETURNING c.ord)
SELECT ord FROM updated;

-- name: RescueExpiredJobs
-- $2 backoff base, $3 backoff cap, $4 the error, $5 the tokens spared, $6 expired before (NULL: now; LEAST skips
-- a NULL). SKIP LOCKED: a row a completer is updating right now is left to it (it is finishing, not lost), and
-- the rescuer never waits for -- or deadlocks with -- a worker.
WITH expired AS (
  SELECT id FROM {ns}.octop_jobs
  WHERE status = 'running' AND expires_at < LEAST(COALESCE($1::timestamptz, now()), $6::timestamptz)
    AND NOT COALESCE(attempt_token = ANY ($5::text[]), false)
  FOR UPDATE SKIP LOCKED)
UPDATE {ns}.octop_jobs j
SET status = CASE WHEN j.attempt <= j.max_retries THEN 'failed' ELSE 'frozen' END,
    scheduled_at = CASE
      WHEN j.attempt <= j.max_retries
        THEN COALESCE($1::timestamptz, now())
             + LEAST($2::interval * power(2, LEAST(GREATEST(j.attempt - 1, 0), 30)), $3::interval)
      ELSE j.scheduled_at
    END,
    completed_at = CASE WHEN j.attempt <= j.max_retries THEN NULL ELSE COALESCE($1::timestamptz, now()) END,
    expires_at = NULL,
    last_error = $4
FROM expired
WHERE j.id = expired.id
RETURNING j.id::text, j.status, j.attempt;

-- name: RenewJobLeases
-- $2 the tokens, $3 the lease.
UPDATE {ns}.octop_jobs
SET expires_at = COALESCE($1::timestamptz, now()) + $3::interval
WHERE status = 'running' AND attempt_token = ANY ($2::text[]);

-- name: RetryJob
-- $2 id, $3 notification prefix. current = NULL: NotFound; updated = 0: Conflict. A frozen job whose unique key is
-- now held by another live job fails with a unique violation (23505), reported as Conflict.
WITH current_row AS (SELECT status FROM {ns}.octop_jobs WHERE id = $2::uuid),
updated AS (
  UPDATE {ns}.octop_jobs
  SET status = 'pending', scheduled_at = COALESCE($1::timestamptz, now()), max_retries = GREATEST(max_retries, attempt),
      completed_at = NULL, expires_at = NULL
  WHERE id = $2::uuid AND status IN ('failed', 'frozen')
  RETURNING queue),
notified AS (SELECT pg_notify('octop_jobs', $3 || queue) FROM updated)
SELECT (SELECT status FROM current_row), (SELECT count(*) FROM updated), (SELECT count(*) FROM notified);

-- name: CancelJob
-- $2 id, $3 the error. current = NULL: NotFound; updated = 0: Conflict (running, or already final).
WITH current_row AS (SELECT status FROM {ns}.octop_jobs WHERE id = $2::uuid),
updated AS (
  UPDATE {ns}.octop_jobs
  SET status = 'frozen', last_error = $3, completed_at = COALESCE($1::timestamptz, now()), expires_at = NULL
  WHERE id = $2::uuid AND status IN ('pending', 'failed')
  RETURNING id)
SELECT (SELECT status FROM current_row), (SELECT count(*) FROM updated);

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
SELECT min(scheduled_at) FROM {ns}.octop_jobs WHERE queue = $1 AND status IN ('pending', 'failed');

-- name: SetQueuePaused
-- $2 queue, $3 paused, $4 notification prefix: resuming wakes the queue's workers.
WITH upserted AS (
  INSERT INTO {ns}.octop_queues (name, paused, updated_at) VALUES ($2, $3::boolean, COALESCE($1::timestamptz, now()))
  ON CONFLICT (name) DO UPDATE SET paused = excluded.paused, updated_at = excluded.updated_at
  RETURNING name, paused),
notified AS (SELECT pg_notify('octop_jobs', $4 || name) FROM upserted WHERE NOT paused)
SELECT (SELECT count(*) FROM upserted), (SELECT count(*) FROM notified);

-- name: ListQueues
SELECT name, bool_or(paused) FROM (
  SELECT name, paused FROM {ns}.octop_queues
  UNION ALL
  SELECT DISTINCT queue, false FROM {ns}.octop_jobs) q
GROUP BY name;

-- name: DeleteFinishedJobs
-- $2 final statuses, $3 older_than, $4 limit per call.
DELETE FROM {ns}.octop_jobs
WHERE id IN (
  SELECT id FROM {ns}.octop_jobs
  WHERE status = ANY ($2::text[])
    AND coalesce(completed_at, created_at) < COALESCE($1::timestamptz, now()) - $3::interval
  LIMIT $4);

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
