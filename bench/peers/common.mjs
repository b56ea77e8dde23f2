// Shared plumbing for the peer benchmarks (graphile.mjs, pgboss.mjs): command line, a fresh database per
// figure, result lines in the benchmark contract (docs/performance.md), timing helpers.
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import { performance } from 'node:perf_hooks';
import pg from 'pg';

// Marks the harness's own statements (reading a table to see the last completion), which a figure's server
// time leaves out.
export const kHarnessMark = '/* bench */';

export function ParseArgs(argv) {
  const args = { pgUrl: '', out: '', quick: false, only: '' };
  for (let i = 0; i < argv.length; ++i) {
    const a = argv[i];
    if (a === '--pg-url') args.pgUrl = argv[++i];
    else if (a === '--out') args.out = argv[++i];
    else if (a === '--quick') args.quick = true;
    else if (a === '--only') args.only = argv[++i];  // comma list of figure names, for debugging
    else throw new Error(`unknown argument ${a}`);
  }
  if (!args.pgUrl || !args.out) throw new Error('usage: --pg-url URL --out FILE [--quick] [--only figures]');
  return args;
}

// Sizes of the contract; --quick shrinks them for a smoke run.
export function Sizes(quick) {
  return quick ? { jobs: 2000, latency_jobs: 100, concurrencies: [1, 10, 32], producers: 8 }
               : { jobs: 20000, latency_jobs: 500, concurrencies: [1, 10, 32], producers: 8 };
}

// Drops database `name` of the server at `pgUrl`. The previous figure's connections may still be closing (a pg
// pool's end() returns once it has asked them to): they get up to 5 s to go before FORCE terminates them, since a
// connection terminated mid-close raises an error event in the peer's pool.
async function DropDatabase(client, name) {
  const gone = async () =>
    (await client.query('SELECT count(*)::int AS n FROM pg_stat_activity WHERE datname = $1', [name])).rows[0].n === 0;
  const deadline = Date.now() + 5000;
  while (!(await gone()) && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 10));
  await client.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
}

async function WithAdmin(pgUrl, fn) {
  const admin = new URL(pgUrl);
  admin.pathname = '/postgres';
  const client = new pg.Client({ connectionString: admin.toString() });
  await client.connect();
  try {
    await fn(client);
  } finally {
    await client.end();
  }
}

// Every figure runs in a database of its own, dropped and re-created, so no figure inherits another's
// dead tuples, bloated indexes or leftover completed rows.
export async function FreshDatabase(pgUrl, name) {
  await WithAdmin(pgUrl, async (client) => {
    await DropDatabase(client, name);
    await client.query(`CREATE DATABASE ${name}`);
  });
  const url = new URL(pgUrl);
  url.pathname = `/${name}`;
  return url.toString();
}

// The last figure's database, dropped when a peer's script ends.
export async function DropFigureDatabase(pgUrl, name) {
  await WithAdmin(pgUrl, (client) => DropDatabase(client, name));
}

export function Emit(out, system, metric, params, value, unit) {
  const line = { system, backend: 'postgres', metric, params, value: Number(value.toFixed(3)), unit };
  fs.appendFileSync(out, JSON.stringify(line) + '\n');
  console.error(`  ${system} ${metric} ${JSON.stringify(params)} = ${line.value} ${unit}`);
}

export const Now = () => performance.now();

// Nearest-rank percentile over an already sorted array.
export function Percentile(sorted, p) {
  const rank = Math.ceil((p / 100) * sorted.length);
  return sorted[Math.min(sorted.length, Math.max(1, rank)) - 1];
}

// Polls `probe` (an async predicate) every `interval_ms` until it holds, or throws after `timeout_ms`.
// Used only after the last handler ran, to see the last completion committed, so it adds no load while a
// figure is being measured.
export async function WaitFor(probe, timeout_ms, what, interval_ms = 1) {
  const deadline = Now() + timeout_ms;
  for (;;) {
    if (await probe()) return;
    if (Now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, interval_ms));
  }
}

// A promise with its resolve function exposed, for "the N-th handler ran".
export function Deferred() {
  let resolve;
  const promise = new Promise((r) => { resolve = r; });
  return { promise, resolve };
}

// Runs `count` calls of `one(i)` over `producers` concurrent loops (each loop holds one connection).
export async function Produce(count, producers, one) {
  let next = 0;
  const loops = [];
  for (let p = 0; p < producers; ++p) {
    loops.push((async () => {
      for (;;) {
        const i = next++;
        if (i >= count) return;
        await one(i);
      }
    })());
  }
  await Promise.all(loops);
}

export function Wanted(args, figure) {
  return !args.only || args.only.split(',').includes(figure);
}

// CPU time for a figure's per-job budget, as octop_bench measures it (docs/performance.md, "Figure
// definitions"): the machine's busy time (/proc/stat: user, nice, system, irq, softirq of every CPU; PostgreSQL
// included) and this process's own (user + system, every thread).
const kClockTicks = Number(execFileSync('getconf', ['CLK_TCK']).toString().trim()) || 100;

export function SampleCpu() {
  const [user, nice, system, , , irq, softirq] =
      fs.readFileSync('/proc/stat', 'utf8').split('\n', 1)[0].trim().split(/\s+/).slice(1).map(Number);
  const self = process.cpuUsage();
  return { machine_s: (user + nice + system + irq + softirq) / kClockTicks, self_s: (self.user + self.system) / 1e6 };
}

// The server's statement execution time in one figure's database (pg_stat_statements, top-level statements),
// without the harness's own and without transaction control (a COMMIT's time is its wait for the WAL flush,
// which an implicitly committed statement does not count either). One connection to the `postgres` database,
// which no figure drops.
export async function ServerStats(pgUrl) {
  const admin = new URL(pgUrl);
  admin.pathname = '/postgres';
  const client = new pg.Client({ connectionString: admin.toString() });
  await client.connect();
  let available = true;
  try {
    await client.query('CREATE EXTENSION IF NOT EXISTS pg_stat_statements');
  } catch (err) {
    console.error(`no pg_stat_statements, so no server time per job: ${err.message}`);
    available = false;
  }
  return {
    reset: async () => { if (available) await client.query(`SELECT pg_stat_statements_reset() ${kHarnessMark}`); },
    execMs: async (database) => {
      if (!available) return undefined;
      const r = await client.query(
        `SELECT coalesce(sum(total_exec_time), 0)::float8 AS ms FROM pg_stat_statements ${kHarnessMark}
         WHERE dbid = (SELECT oid FROM pg_database WHERE datname = $1)
           AND query NOT LIKE '%' || $2 || '%'
           AND query !~* '^\\s*(begin|commit|rollback|start transaction|end)\\M'`, [database, kHarnessMark]);
      return r.rows[0].ms;
    },
    end: () => client.end(),
  };
}

// A throughput figure's cost, started just before its t0 and ended just after its t1; `end` emits
// cpu_us_per_job, client_cpu_us_per_job and server_exec_us_per_job with `params` (figure, concurrency, jobs).
export async function StartCost(stats) {
  await stats.reset();
  const cpu0 = SampleCpu();
  return {
    end: async (out, system, database, params) => {
      const cpu1 = SampleCpu();
      const ms = await stats.execMs(database);
      Emit(out, system, 'cpu_us_per_job', params, (cpu1.machine_s - cpu0.machine_s) * 1e6 / params.jobs, 'us');
      Emit(out, system, 'client_cpu_us_per_job', params, (cpu1.self_s - cpu0.self_s) * 1e6 / params.jobs, 'us');
      if (ms !== undefined) Emit(out, system, 'server_exec_us_per_job', params, ms * 1e3 / params.jobs, 'us');
    },
  };
}
