// Shared plumbing for the peer benchmarks (graphile.mjs, pgboss.mjs): command line, a fresh database per
// figure, result lines in the benchmark contract (docs/performance.md), timing helpers.
import fs from 'node:fs';
import { performance } from 'node:perf_hooks';
import pg from 'pg';

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
