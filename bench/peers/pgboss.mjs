// pg-boss figures of the benchmark contract (docs/performance.md): throughput_preinserted,
// throughput_enqueue_drain at concurrency 1/10/32, latency_p50/p95/p99, each figure in a fresh database.
// pg-boss 10 has no per-worker concurrency option: each work() call adds one polling worker, so concurrency N
// is N work() calls. Fastest documented settings: pollingIntervalSeconds at its documented minimum (0.5 s),
// a batchSize per fetch (kBatchSize; each worker sleeps out the rest of its interval after every fetch, so
// the batch bounds throughput), cron scheduling off (not used), pool of concurrency + 2 connections.
//   node pgboss.mjs --pg-url URL --out results.jsonl [--quick]
import PgBoss from 'pg-boss';
import pg from 'pg';
import { Deferred, DropFigureDatabase, Emit, FreshDatabase, kHarnessMark, Now, ParseArgs, Percentile, Produce, ServerStats, Sizes, StartCost, WaitFor, Wanted } from './common.mjs';

const kSystem = 'pg-boss';
const kDatabase = 'bench_pgboss';
const kQueue = 'noop';
const kBulkChunk = 5000;
const kBatchSize = Number(process.env.PGBOSS_BATCH_SIZE || 500);
const kPollingSeconds = 0.5;

function Options(url, max) {
  return { connectionString: url, max, schedule: false, supervise: false, migrate: true };
}

async function StartBoss(url, max) {
  const boss = new PgBoss(Options(url, max));
  boss.on('error', (err) => console.error(`pg-boss: ${err.message}`));
  await boss.start();
  return boss;
}

// Adds `concurrency` polling workers that each call `on_job` once per fetched job.
async function StartWorkers(boss, concurrency, batch_size, on_job) {
  for (let i = 0; i < concurrency; ++i) {
    await boss.work(kQueue, { batchSize: batch_size, pollingIntervalSeconds: kPollingSeconds }, async (jobs) => {
      for (let j = 0; j < jobs.length; ++j) on_job();
    });
  }
}

// Completions are written after the handler returns (not awaited by pg-boss), so "every completion durable"
// is read back from the table.
async function WaitCompleted(url, client = undefined) {
  const own = client === undefined;
  if (own) {
    client = new pg.Client({ connectionString: url });
    await client.connect();
  }
  try {
    await WaitFor(async () => {
      const r = await client.query(
        `SELECT count(*)::int AS n FROM pgboss.job WHERE name = $1 AND state <> 'completed' ${kHarnessMark}`, [kQueue]);
      return r.rows[0].n === 0;
    }, 120000, 'every job completed');
  } finally {
    if (own) await client.end();
  }
}

async function Prepare(args) {
  const url = await FreshDatabase(args.pgUrl, kDatabase);
  const boss = await StartBoss(url, 2);
  await boss.createQueue(kQueue);
  return { url, boss };
}

async function ThroughputPreinserted(args, stats, concurrency, jobs) {
  const { url, boss: setup } = await Prepare(args);
  for (let i = 0; i < jobs; i += kBulkChunk) {
    const batch = [];
    for (let j = i; j < Math.min(jobs, i + kBulkChunk); ++j) batch.push({ name: kQueue, data: {} });
    await setup.insert(batch);
  }
  await setup.stop({ graceful: false, wait: true });

  let done = 0;
  const all_ran = Deferred();
  const boss = await StartBoss(url, concurrency + 2);  // connected before t0, as octop_bench opens its queue
  const cost = await StartCost(stats);
  const t0 = Now();
  await StartWorkers(boss, concurrency, kBatchSize, () => { if (++done === jobs) all_ran.resolve(); });
  await all_ran.promise;
  await WaitCompleted(url);
  const seconds = (Now() - t0) / 1000;
  await cost.end(args.out, kSystem, kDatabase, { figure: 'preinserted', concurrency, jobs });
  await boss.stop({ graceful: false, wait: true });
  Emit(args.out, kSystem, 'throughput_preinserted', { concurrency, jobs }, jobs / seconds, 'jobs/s');
}

async function ThroughputEnqueueDrain(args, stats, concurrency, jobs, producers) {
  const { url, boss: producer } = await Prepare(args);
  await producer.stop({ graceful: false, wait: true });
  let done = 0;
  const all_ran = Deferred();
  const boss = await StartBoss(url, concurrency + 2);
  await StartWorkers(boss, concurrency, kBatchSize, () => { if (++done === jobs) all_ran.resolve(); });
  const sender = await StartBoss(url, producers);
  await Produce(producers, producers, () => sender.getQueue(kQueue));  // opens the pool's connections untimed
  const cost = await StartCost(stats);
  const t0 = Now();
  await Produce(jobs, producers, () => sender.send(kQueue, {}));
  await all_ran.promise;
  await WaitCompleted(url);
  const seconds = (Now() - t0) / 1000;
  await cost.end(args.out, kSystem, kDatabase, { figure: 'enqueue_drain', concurrency, jobs });
  await sender.stop({ graceful: false, wait: true });
  await boss.stop({ graceful: false, wait: true });
  Emit(args.out, kSystem, 'throughput_enqueue_drain', { concurrency, jobs, producers }, jobs / seconds, 'jobs/s');
}

// Idle worker at concurrency 10 (ten polling workers, batch size 1: one job at a time is in the queue).
async function Latency(args, samples) {
  const { url, boss: sender } = await Prepare(args);
  let entered = Deferred();
  const boss = await StartBoss(url, 12);
  await StartWorkers(boss, 10, 1, () => entered.resolve(Now()));
  const probe = new pg.Client({ connectionString: url });
  await probe.connect();
  const latencies = [];
  for (let i = 0; i < samples + 10; ++i) {  // the first 10 warm up connections
    entered = Deferred();
    const t0 = Now();
    await sender.send(kQueue, {});
    const t1 = await entered.promise;
    if (i >= 10) latencies.push(t1 - t0);
    // Idle again before the next sample: its completion is committed (as octop_bench does).
    await WaitCompleted(url, probe);
  }
  await probe.end();
  await sender.stop({ graceful: false, wait: true });
  await boss.stop({ graceful: false, wait: true });
  latencies.sort((a, b) => a - b);
  for (const p of [50, 95, 99]) {
    Emit(args.out, kSystem, `latency_p${p}`, { jobs: samples }, Percentile(latencies, p), 'ms');
  }
}

async function Main() {
  const args = ParseArgs(process.argv.slice(2));
  const sizes = Sizes(args.quick);
  console.error(`${kSystem}: ${sizes.jobs} jobs, concurrency ${sizes.concurrencies.join('/')}, batchSize ${kBatchSize}`);
  const stats = await ServerStats(args.pgUrl);
  for (const c of sizes.concurrencies) {
    if (Wanted(args, 'preinserted')) await ThroughputPreinserted(args, stats, c, sizes.jobs);
    if (Wanted(args, 'enqueue_drain')) await ThroughputEnqueueDrain(args, stats, c, sizes.jobs, sizes.producers);
  }
  await stats.end();
  if (Wanted(args, 'latency')) await Latency(args, sizes.latency_jobs);
  await DropFigureDatabase(args.pgUrl, kDatabase);
}

Main().catch((err) => {
  console.error(`${kSystem}: ${err.stack || err}`);
  process.exit(1);
});
