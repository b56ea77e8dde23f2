-- The job-queue operations on octop_jobs, octop_queues and octop_config (SqliteStore; semantics in store/store.h,
-- the status diagram and the reasoning in docs/store.md "Jobs").
--
-- Times are text 'YYYY-MM-DD HH:MM:SS.SSS' (UTC) written only by octop, so they compare as text. :now is the
-- database's now resolved at the start of the operation (or the test clock's override). Offsets are strftime
-- modifiers ('+90.000000 seconds'). Every write runs inside BEGIN IMMEDIATE (the single writer lock), which is what
-- makes a claim exclusive and a unique-key lookup-then-insert atomic on SQLite.
-- A job row is always read as these 17 columns, in this order (ReadJobRow):
--   id, queue, kind, payload, priority, scheduled_at, status, attempt, max_retries, attempt_token, last_error,
--   created_at, started_at, completed_at, expires_at, unique_key, worker_id

-- name: FindLiveJobByKey
-- The job holding a unique key: live means pending, running, or failed (waiting for its retry).
SELECT id FROM octop_jobs WHERE unique_key = :unique_key AND status IN ('pending', 'running', 'failed');

-- name: InsertJob
INSERT INTO octop_jobs (id, queue, kind, payload, priority, scheduled_at, status, attempt, max_retries, created_at,
                        unique_key)
VALUES (:id, :queue, :kind, :payload, :priority, :scheduled_at, 'pending', 0, :max_retries, :now, :unique_key);

-- name: ClaimJobs
-- :kinds is a JSON array of kinds, or NULL for any. The attempt token is a random UUID v4 made in SQL, one per row.
UPDATE octop_jobs
SET status = 'running',
    attempt = attempt + 1,
    attempt_token = lower(hex(randomblob(4))) || '-' || lower(hex(randomblob(2))) || '-4' ||
                    substr(lower(hex(randomblob(2))), 2) || '-' ||
                    substr('89ab', 1 + (abs(random()) % 4), 1) || substr(lower(hex(randomblob(2))), 2) || '-' ||
                    lower(hex(randomblob(6))),
    started_at = :now,
    expires_at = strftime('%Y-%m-%d %H:%M:%f', :now, :timeout),
    worker_id = :worker_id
WHERE id IN (
  SELECT id FROM octop_jobs
  WHERE queue = :queue
    AND status IN ('pending', 'failed')
    AND scheduled_at <= :now
    AND (:kinds IS NULL OR kind IN (SELECT value FROM json_each(:kinds)))
    AND NOT EXISTS (SELECT 1 FROM octop_queues WHERE name = :queue AND paused = 1)
  ORDER BY priority, scheduled_at, id
  LIMIT :limit)
RETURNING id, queue, kind, payload, priority, scheduled_at, status, attempt, max_retries, attempt_token, last_error,
          created_at, started_at, completed_at, expires_at, unique_key, worker_id;

-- name: CompleteJob
-- :outcome 0 success, 1 failed attempt (retry at now + :delay while attempt <= max_retries, else frozen), 2 cancel
-- (frozen now), 3 release (the attempt never started: the claim is undone). An attempt asked to stop (a row in
-- octop_job_cancels for its token) that fails or is handed back ends as a cancel with :cancelled_error instead
-- (x.o). In SET every column reads its value before the update. Fenced by the attempt token.
UPDATE octop_jobs
SET status = CASE
      WHEN x.o = 0 THEN 'success'
      WHEN x.o = 1 AND attempt <= max_retries THEN 'failed'
      WHEN x.o = 3 AND attempt <= 1 THEN 'pending'
      WHEN x.o = 3 THEN 'failed'
      ELSE 'frozen'
    END,
    scheduled_at = CASE
      WHEN x.o = 1 AND attempt <= max_retries THEN strftime('%Y-%m-%d %H:%M:%f', :now, :delay)
      ELSE scheduled_at
    END,
    completed_at = CASE WHEN (x.o = 1 AND attempt <= max_retries) OR x.o = 3 THEN NULL ELSE :now END,
    attempt = CASE WHEN x.o = 3 THEN max(attempt - 1, 0) ELSE attempt END,
    attempt_token = CASE WHEN x.o = 3 THEN NULL ELSE attempt_token END,
    started_at = CASE WHEN x.o = 3 AND attempt <= 1 THEN NULL ELSE started_at END,
    worker_id = CASE WHEN x.o = 3 THEN NULL ELSE worker_id END,
    expires_at = NULL,
    last_error = CASE WHEN x.o <> :outcome THEN :cancelled_error ELSE :error END
FROM (SELECT CASE
               WHEN :outcome IN (1, 3) AND EXISTS (SELECT 1 FROM octop_job_cancels
                                                   WHERE job_id = :id AND attempt_token = :token) THEN 2
               ELSE :outcome
             END AS o) AS x
WHERE id = :id AND attempt_token = :token AND status = 'running';

-- name: RescueCancelledJobs
-- Run first in RescueExpiredJobs's transaction, with its parameters: an expired attempt asked to stop (a row in
-- octop_job_cancels for its token) ends frozen with :cancelled_error instead of waiting again.
UPDATE octop_jobs
SET status = 'frozen', completed_at = :now, expires_at = NULL, last_error = :cancelled_error
WHERE status = 'running' AND expires_at < :expired_before
  AND coalesce(attempt_token, '') NOT IN (SELECT value FROM json_each(:spare_tokens))
  AND EXISTS (SELECT 1 FROM octop_job_cancels k
              WHERE k.job_id = octop_jobs.id AND k.attempt_token = octop_jobs.attempt_token)
RETURNING id, status, attempt;

-- name: RescueExpiredJobs
-- :base_ms and :max_ms in milliseconds; the backoff doubles per attempt: min(base * 2^(attempt-1), max).
-- :expired_before is :now or earlier.
UPDATE octop_jobs
SET status = CASE WHEN attempt <= max_retries THEN 'failed' ELSE 'frozen' END,
    scheduled_at = CASE
      WHEN attempt <= max_retries
        THEN strftime('%Y-%m-%d %H:%M:%f', :now,
                      printf('%+.6f seconds',
                             min(:base_ms / 1000.0 * (1 << min(max(attempt - 1, 0), 30)), :max_ms / 1000.0)))
      ELSE scheduled_at
    END,
    completed_at = CASE WHEN attempt <= max_retries THEN NULL ELSE :now END,
    expires_at = NULL,
    last_error = :error
WHERE status = 'running' AND expires_at < :expired_before
  AND coalesce(attempt_token, '') NOT IN (SELECT value FROM json_each(:spare_tokens))
RETURNING id, status, attempt;

-- name: RenewJobLeases
-- :lease is a strftime modifier.
UPDATE octop_jobs
SET expires_at = strftime('%Y-%m-%d %H:%M:%f', :now, :lease)
WHERE status = 'running' AND attempt_token IN (SELECT value FROM json_each(:tokens));

-- name: JobStatusAndKey
SELECT status, unique_key, queue FROM octop_jobs WHERE id = :id;

-- name: RetryJob
UPDATE octop_jobs
SET status = 'pending',
    scheduled_at = :now,
    max_retries = max(max_retries, attempt),
    completed_at = NULL,
    expires_at = NULL
WHERE id = :id AND status IN ('failed', 'frozen');

-- name: CancelJob
UPDATE octop_jobs
SET status = 'frozen', last_error = :error, completed_at = :now, expires_at = NULL
WHERE id = :id AND status IN ('pending', 'failed');

-- name: SweepJobCancels
-- Before a new request: drop the requests whose attempt has ended (not running under that token any more).
DELETE FROM octop_job_cancels
WHERE job_id <> :id
  AND NOT EXISTS (SELECT 1 FROM octop_jobs j
                  WHERE j.id = octop_job_cancels.job_id AND j.attempt_token = octop_job_cancels.attempt_token
                    AND j.status = 'running');

-- name: RequestJobCancel
-- The request for a running job's attempt (its token); none when the job is not running.
INSERT INTO octop_job_cancels (job_id, attempt_token, requested_at)
SELECT id, attempt_token, :now FROM octop_jobs WHERE id = :id AND status = 'running' AND attempt_token IS NOT NULL
ON CONFLICT (job_id) DO UPDATE SET attempt_token = excluded.attempt_token, requested_at = excluded.requested_at;

-- name: CancelRequestsFor
-- The requests of attempts still running under one of :tokens (a JSON array).
SELECT x.job_id FROM octop_job_cancels x
JOIN octop_jobs j ON j.id = x.job_id AND j.attempt_token = x.attempt_token AND j.status = 'running'
WHERE x.attempt_token IN (SELECT value FROM json_each(:tokens));

-- name: GetJob
SELECT id, queue, kind, payload, priority, scheduled_at, status, attempt, max_retries, attempt_token, last_error,
       created_at, started_at, completed_at, expires_at, unique_key, worker_id
FROM octop_jobs WHERE id = :id;

-- name: ListJobs
-- Optional filters are NULL when absent. Newest first; id breaks ties so pages are stable. The page is cut first;
-- a payload whose running total of bytes passes :budget (NULL: none) comes back NULL, its size in column 18.
SELECT id, queue, kind,
       CASE WHEN :budget IS NULL OR sum(size) OVER page <= :budget THEN payload END, priority, scheduled_at,
       status, attempt, max_retries, attempt_token, last_error, created_at, started_at, completed_at, expires_at,
       unique_key, worker_id, size
FROM (SELECT *, length(CAST(payload AS BLOB)) AS size
      FROM octop_jobs
      WHERE (:status IS NULL OR status = :status)
        AND (:queue IS NULL OR queue = :queue)
        AND (:kind IS NULL OR kind = :kind)
      ORDER BY created_at DESC, id DESC
      LIMIT :limit OFFSET :offset)
WINDOW page AS (ORDER BY created_at DESC, id DESC ROWS UNBOUNDED PRECEDING)
ORDER BY created_at DESC, id DESC;

-- name: ListFailedJobs
SELECT id, queue, kind, payload, priority, scheduled_at, status, attempt, max_retries, attempt_token, last_error,
       created_at, started_at, completed_at, expires_at, unique_key, worker_id
FROM octop_failed_jobs
WHERE (:queue IS NULL OR queue = :queue)
ORDER BY failed_at DESC, id DESC
LIMIT :limit;

-- name: JobSummary
-- The octop_job_summary view's query with the store's now; delays in whole milliseconds (julianday arithmetic is a
-- double of days, good to well under a millisecond).
SELECT queue, status, count(*), min(scheduled_at),
       CAST(round(CASE WHEN status IN ('pending', 'failed')
         THEN avg(CASE WHEN scheduled_at <= :now THEN (julianday(:now) - julianday(scheduled_at)) * 86400000.0 END)
         ELSE avg(CASE WHEN started_at >= strftime('%Y-%m-%d %H:%M:%f', :now, '-1 hour')
                       THEN (julianday(started_at) - julianday(scheduled_at)) * 86400000.0 END)
       END) AS INTEGER)
FROM octop_jobs
GROUP BY queue, status
ORDER BY queue, status;

-- name: JobStats
-- Finished jobs by bucket of completed_at in [:from, :to): the bucket index from whole milliseconds (rounding the
-- julianday difference to a millisecond is exact for octop's millisecond times), latencies in milliseconds over the
-- succeeded ones. Optional filters are NULL when absent.
SELECT CAST(round((julianday(completed_at) - julianday(:from)) * 86400000.0) AS INTEGER) / :bucket_ms AS bucket,
       sum(status = 'success'), sum(status = 'frozen'),
       CAST(round(avg(CASE WHEN status = 'success'
                      THEN (julianday(started_at) - julianday(scheduled_at)) * 86400000.0 END)) AS INTEGER),
       CAST(round(max(CASE WHEN status = 'success'
                      THEN (julianday(started_at) - julianday(scheduled_at)) * 86400000.0 END)) AS INTEGER),
       CAST(round(avg(CASE WHEN status = 'success'
                      THEN (julianday(completed_at) - julianday(started_at)) * 86400000.0 END)) AS INTEGER)
FROM octop_jobs
WHERE status IN ('success', 'frozen')
  AND completed_at >= :from AND completed_at < :to
  AND (:queue IS NULL OR queue = :queue)
  AND (:kind IS NULL OR kind = :kind)
GROUP BY bucket
ORDER BY bucket;

-- name: NextJobDueAt
SELECT min(scheduled_at) FROM octop_jobs WHERE queue = :queue AND status IN ('pending', 'failed');

-- name: SetQueuePaused
INSERT INTO octop_queues (name, paused, updated_at) VALUES (:queue, :paused, :now)
ON CONFLICT (name) DO UPDATE SET paused = excluded.paused, updated_at = excluded.updated_at;

-- name: ListQueues
SELECT name, paused FROM octop_queues ORDER BY name;

-- name: DeleteFinishedJobs
-- :statuses a JSON array of final statuses; :cutoff = now - older_than.
DELETE FROM octop_jobs
WHERE id IN (
  SELECT id FROM octop_jobs
  WHERE status IN (SELECT value FROM json_each(:statuses))
    AND coalesce(completed_at, created_at) < :cutoff
  LIMIT :limit);

-- name: GetConfig
SELECT value FROM octop_config WHERE key = :key;

-- name: SetConfig
INSERT INTO octop_config (key, value, updated_at) VALUES (:key, :value, :now)
ON CONFLICT (key) DO UPDATE SET value = excluded.value, updated_at = excluded.updated_at;
