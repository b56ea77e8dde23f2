// graphile-worker figures of the benchmark contract (docs/performance.md): throughput_preinserted,
// throughput_enqueue_drain at concurrency 1/10/32, latency_p50/p95/p99, each figure in a fresh database.
// Settings are the fastest graphile-worker documents (https://worker.graphile.org/docs/performance): the
// configuration of its own "quick stats" run (localQueue size 500, completeJobBatchDelay 0,
// failJobBatchDelay 0), prepared statements on, pool of max(10, concurrency + 2), LISTEN/NOTIFY wake-ups.
//   node graphile.mjs --pg-url URL --out results.jsonl [--quick]
import { EventEmitter } from 'node:events';
import { Logger, makeWorkerUtils, run, runMigrations } from 'graphile-worker';
import pg from 'pg';
import { Deferred, DropFigureDatabase, Emit, FreshDatabase, kHarnessMark, Now, ParseArgs, Percentile, Produce, ServerStats, Sizes, StartCost, WaitFor, Wanted } from './common.mjs';

const kSystem = 'graphile-worker';
const kDatabase = 'bench_graphile';
const kBulkChunk = 5000;
// The documented performance run's size; GRAPHILE_LOCAL_QUEUE_SIZE=-1 turns the local queue off (for sweeps).
const kLocalQueueSize = Number(process.env.GRAPHILE_LOCAL_QUEUE_SIZE || 500);

const logger = new Logger(() => (level, message) => {
  if (level === 'error') console.error(`graphile-worker: ${message}`);
});

function Preset(url, concurrency, events) {
  return {
    worker: {
      connectionString: url,
      concurrentJobs: concurrency,
      maxPoolSize: Math.max(10, concurrency + 2),
      preparedStatements: true,
      pollInterval: 2000,  // only for future-dated jobs and retries; new jobs arrive by NOTIFY
      ...(kLocalQueueSize > 1 ? { localQueue: { size: kLocalQueueSize } } : {}),
      completeJobBatchDelay: 0,
      failJobBatchDelay: 0,
      logger,
      events,
    },
  };
}

// A pool this script owns and ends, handed to graphile-worker (its `pgPool` option). graphile-worker ends a pool
// it made without waiting, and takes its error handlers off first: a connection still closing when the next
// figure drops the database (WITH (FORCE)) then raised an unhandled 'error' and killed the process. With our
// own pool, `end()` is awaited before the next figure, and a late connection error is only logged.
function OwnPool(url, max) {
  const pool = new pg.Pool({ connectionString: url, max });
  const report = (err) => console.error(`graphile-worker: connection error: ${err.message}`);
  pool.on('error', report);
  pool.on('connect', (client) => client.on('error', report));
  return pool;
}

// Starts a runner whose only task is `noop` calling `on_job`; resolves once its LISTEN connection is up
// (before that a new job's NOTIFY could be missed until the next poll). `stop()` stops it and ends its pool.
async function StartWorker(url, concurrency, on_job) {
  const events = new EventEmitter();
  const listening = Deferred();
  events.on('pool:listen:success', () => listening.resolve());
  const preset = Preset(url, concurrency, events);
  const pgPool = OwnPool(url, preset.worker.maxPoolSize);
  const runner = await run({
    preset,
    pgPool,
    taskList: { noop: async () => { on_job(); } },
    noHandleSignals: true,
  });
  await listening.promise;
  return { stop: async () => { await runner.stop(); await pgPool.end(); } };
}

// WorkerUtils on a pool of `max` connections; `release()` releases them and ends the pool.
async function Utils(url, max) {
  const pgPool = OwnPool(url, max);
  const utils = await makeWorkerUtils({ preset: { worker: { connectionString: url, maxPoolSize: max, logger } }, pgPool });
  const release = utils.release.bind(utils);
  utils.release = async () => { await release(); await pgPool.end(); };
  return utils;
}

async function Remaining(client) {
  const r = await client.query(`SELECT count(*)::int AS n FROM graphile_worker._private_jobs ${kHarnessMark}`);
  return r.rows[0].n;
}

// Completed jobs are deleted, so "every completion durable" is an empty jobs table.
async function WaitDrained(url, client = undefined) {
  const own = client === undefined;
  if (own) {
    client = new pg.Client({ connectionString: url });
    await client.connect();
  }
  try {
    await WaitFor(async () => (await Remaining(client)) === 0, 120000, 'the jobs table to empty');
  } finally {
    if (own) await client.end();
  }
}

async function Prepare(args) {
  const url = await FreshDatabase(args.pgUrl, kDatabase);
  const pgPool = OwnPool(url, 1);
  try {
    await runMigrations({ preset: Preset(url, 1, new EventEmitter()), pgPool });
  } finally {
    await pgPool.end();
  }
  return url;
}

async function ThroughputPreinserted(args, stats, concurrency, jobs) {
  const url = await Prepare(args);
  const utils = await Utils(url, 1);
  for (let i = 0; i < jobs; i += kBulkChunk) {
    const specs = [];
    for (let j = i; j < Math.min(jobs, i + kBulkChunk); ++j) specs.push({ identifier: 'noop', payload: {} });
    await utils.addJobs(specs);
  }
  await utils.release();

  let done = 0;
  const all_ran = Deferred();
  const cost = await StartCost(stats);
  const t0 = Now();
  const runner = await StartWorker(url, concurrency, () => { if (++done === jobs) all_ran.resolve(); });
  await all_ran.promise;
  await WaitDrained(url);
  const seconds = (Now() - t0) / 1000;
  await cost.end(args.out, kSystem, kDatabase, { figure: 'preinserted', concurrency, jobs });
  await runner.stop();
  Emit(args.out, kSystem, 'throughput_preinserted', { concurrency, jobs }, jobs / seconds, 'jobs/s');
}

async function ThroughputEnqueueDrain(args, stats, concurrency, jobs, producers) {
  const url = await Prepare(args);
  let done = 0;
  const all_ran = Deferred();
  const runner = await StartWorker(url, concurrency, () => { if (++done === jobs) all_ran.resolve(); });
  const utils = await Utils(url, producers);
  await utils.migrate();  // connects once, so pool warm-up is not timed
  const cost = await StartCost(stats);
  const t0 = Now();
  await Produce(jobs, producers, () => utils.addJob('noop', {}));
  await all_ran.promise;
  await WaitDrained(url);
  const seconds = (Now() - t0) / 1000;
  await cost.end(args.out, kSystem, kDatabase, { figure: 'enqueue_drain', concurrency, jobs });
  await utils.release();
  await runner.stop();
  Emit(args.out, kSystem, 'throughput_enqueue_drain', { concurrency, jobs, producers }, jobs / seconds, 'jobs/s');
}

async function Latency(args, samples) {
  const url = await Prepare(args);
  let entered = Deferred();
  const runner = await StartWorker(url, 10, () => entered.resolve(Now()));
  const utils = await Utils(url, 2);
  await utils.migrate();
  const probe = new pg.Client({ connectionString: url });
  await probe.connect();
  const latencies = [];
  for (let i = 0; i < samples + 10; ++i) {  // the first 10 warm up prepared statements and connections
    entered = Deferred();
    const t0 = Now();
    await utils.addJob('noop', {});
    const t1 = await entered.promise;
    if (i >= 10) latencies.push(t1 - t0);
    // Idle again before the next sample: its completion is committed (as octop_bench does).
    await WaitDrained(url, probe);
  }
  await probe.end();
  await utils.release();
  await runner.stop();
  latencies.sort((a, b) => a - b);
  for (const p of [50, 95, 99]) {
    Emit(args.out, kSystem, `latency_p${p}`, { jobs: samples }, Percentile(latencies, p), 'ms');
  }
}

async function Main() {
  const args = ParseArgs(process.argv.slice(2));
  const sizes = Sizes(args.quick);
  console.error(`${kSystem}: ${sizes.jobs} jobs, concurrency ${sizes.concurrencies.join('/')}`);
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
