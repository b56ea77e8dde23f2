// A real Backstage backend and two octopd nodes on one task table (docs/scheduler.md, "Sharing tasks with
// Backstage"), in each layout a Backstage user can have: PostgreSQL with a database per plugin (Backstage's
// default), PostgreSQL with a schema per plugin, and SQLite files in one directory.
//
// Every run of every node appends "S <node> <task> <ms>" at its start and "E <node> <task> <ms> <how>" at its
// end to one file; the checks read that file and the task table, never a node's own account:
//   - no two runs of a global task overlap, whoever runs them;
//   - a cron occurrence runs once;
//   - a trigger and a cancel sent to either side reach a run on the other;
//   - a run whose node is killed with SIGKILL is reclaimed after its timeout with Backstage's error recorded, an
//     octop run by Backstage's own janitor and a Backstage run by octop's;
//   - octop and Backstage's own knex migrator create the tables together on an empty schema, round after round.
//
// Needs OCTOP_TEST_PG_URL (a server this test may create databases on) and OCTOPD_BINARY, OCTOP_BINARY.
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import { createRequire } from 'node:module';
import os from 'node:os';
import path from 'node:path';
import { test } from 'node:test';
import assert from 'node:assert/strict';

const require = createRequire(import.meta.url);
const pg = require('pg');
const knexFactory = require('knex');

const here = path.dirname(new URL(import.meta.url).pathname);
const pgUrl = process.env.OCTOP_TEST_PG_URL;
const octopd = process.env.OCTOPD_BINARY;
const octopCli = process.env.OCTOP_BINARY;
const runId = `${process.pid}${Date.now() % 100000}`;

// ---- Waiting on conditions (never on a fixed sleep)

async function until(what, condition, timeoutMs) {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await condition();
    if (value) return value;
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

// ---- The run log

// Only whole lines are read (a writer may be mid-line); a whole line without a time is the harness's own fault and
// fails loudly rather than reading as a run at epoch 0.
function readRuns(logPath) {
  const starts = [];
  const ends = [];
  if (!fs.existsSync(logPath)) return { starts, ends };
  const lines = fs.readFileSync(logPath, 'utf8').split('\n');
  for (const text of lines.slice(0, -1)) {
    const [kind, node, task, ms, how] = text.split(' ');
    if (kind !== 'S' && kind !== 'E') continue;
    if (!/^\d{13}$/.test(ms ?? '')) throw new Error(`run log line without a time: ${JSON.stringify(text)}`);
    if (kind === 'S') starts.push({ node, task, ms: Number(ms) });
    if (kind === 'E') ends.push({ node, task, ms: Number(ms), how });
  }
  return { starts, ends };
}

// Each start paired with the first later end of the same node and task; a run without an end (its node was
// killed) ends when the node was killed (`killedAt`: node -> ms), since its process died with it.
function runIntervals(logPath, killedAt) {
  const { starts, ends } = readRuns(logPath);
  const used = new Set();
  return starts.map((s) => {
    const i = ends.findIndex((e, k) => !used.has(k) && e.node === s.node && e.task === s.task && e.ms >= s.ms);
    if (i >= 0) {
      used.add(i);
      return { ...s, end: ends[i].ms, how: ends[i].how };
    }
    return { ...s, end: killedAt[s.node] ?? Infinity, how: 'killed' };
  });
}

function overlaps(intervals) {
  const found = [];
  const byTask = new Map();
  for (const r of intervals) byTask.set(r.task, [...(byTask.get(r.task) ?? []), r]);
  for (const runs of byTask.values()) {
    runs.sort((a, b) => a.ms - b.ms);
    for (let i = 1; i < runs.length; ++i) {
      if (runs[i].ms < runs[i - 1].end) found.push([runs[i - 1], runs[i]]);
    }
  }
  return found;
}

// ---- Processes

class Node {
  constructor(name, argv, env, logFile) {
    this.name = name;
    this.output = '';
    this.child = spawn(argv[0], argv.slice(1), { env: { ...process.env, ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
    const keep = (chunk) => {
      this.output += chunk.toString();
      fs.appendFileSync(logFile, chunk);
    };
    this.child.stdout.on('data', keep);
    this.child.stderr.on('data', keep);
    this.exited = new Promise((resolve) => this.child.on('exit', (code, signal) => resolve({ code, signal })));
  }
  kill(signal) {
    this.child.kill(signal);
    return this.exited;
  }
}

function startBackstage(name, layout, dir, tasks, port) {
  // Backstage has no node id setting: `name` is only how this test's run lines name it.
  const config = {
    backend: {
      baseUrl: `http://127.0.0.1:${port}`,
      listen: { host: '127.0.0.1', port },
      auth: { dangerouslyDisableDefaultAuthPolicy: true },
      database: layout.backstageDatabase,
    },
  };
  const configPath = path.join(dir, `${name}.json`);
  fs.writeFileSync(configPath, JSON.stringify(config));
  return new Node(
    name,
    [process.execPath, path.join(here, 'backstage-node.cjs')],
    { BS_CONFIG: configPath, BS_TASKS: JSON.stringify(tasks), BS_LOG: layout.runLog, BS_NODE: name, NO_COLOR: '1' },
    path.join(dir, `${name}.log`),
  );
}

// A shell command that logs like the Backstage node's task function; a TERM (cancel, timeout) ends it as
// "aborted". The first run of a task with firstRunMs (across all nodes: a flag file) lasts that long.
// The time comes from bash's EPOCHREALTIME, not date(1): octopd signals the run's whole process group, so a TERM
// arriving as the run starts would kill a `date` child and log the start without its time. (`$${` is octopd's
// config escape for the shell's own `${`.)
function octopTask(task) {
  const script =
    'log() { local t=$${EPOCHREALTIME/[.,]/}; echo "$1 $NODE $OCTOP_TASK_ID $${t%???}$2" >> "$RUN_LOG"; }; ' +
    "trap 'log E \" aborted\"; exit 143' TERM; log S; d=$1; " +
    'f="$RUN_LOG.$OCTOP_TASK_ID.ran"; if [ -n "$2" ] && [ ! -e "$f" ]; then echo "$NODE" > "$f"; d=$2; fi; ' +
    'sleep "$d" & wait $!; log E " done"';
  const schedule = { timeout: task.timeout, ...task.octopSchedule };
  return `      - id: ${task.id}\n        schedule: ${JSON.stringify(schedule)}\n` +
    `        command: { argv: ["/bin/bash", "-c", ${JSON.stringify(script)}, "sh", "${task.runMs / 1000}", ` +
    `"${task.firstRunMs === undefined ? '' : task.firstRunMs / 1000}"], ` +
    'killGrace: 2s }\n';
}

function startOctopd(name, layout, dir, tasks) {
  const configPath = path.join(dir, `${name}.yaml`);
  fs.writeFileSync(
    configPath,
    `database: ${JSON.stringify(layout.octopDatabase)}\nnodeId: ${name}\nhttp:\n  listen: 127.0.0.1:0\n` +
      'scheduler:\n  workCheckFrequency: 1s\n  janitorInterval: 1s\n' +
      `plugins:\n  interop:\n    tasks:\n${tasks.map(octopTask).join('')}`,
  );
  const node = new Node(name, [octopd, '--config', configPath], { NODE: name, RUN_LOG: layout.runLog },
    path.join(dir, `${name}.log`));
  return node;
}

async function octopPort(node) {
  const match = await until(`${node.name} to listen`, () => /ready on port (\d+)/.exec(node.output), 30000);
  return Number(match[1]);
}

async function backstageReady(node, runLog) {
  await until(`${node.name} to start`, () => {
    if (node.child.exitCode !== null) throw new Error(`${node.name} exited: ${node.output.slice(-2000)}`);
    return fs.existsSync(runLog) && fs.readFileSync(runLog, 'utf8').includes(`READY ${node.name} `);
  }, 60000);
}

async function post(port, pathname) {
  const response = await fetch(`http://127.0.0.1:${port}${pathname}`, { method: 'POST' });
  return { status: response.status, body: await response.text() };
}

const schedulerPath = (task, action) => `/api/interop/.backstage/scheduler/v1/tasks/${task}/${action}`;

// ---- The task table, read directly

async function taskRow(layout, id) {
  if (layout.kind === 'sqlite') {
    const Database = require('better-sqlite3');
    const db = new Database(path.join(layout.dir, 'interop.sqlite'), { readonly: true });
    try {
      return db.prepare('SELECT * FROM backstage_backend_tasks__tasks WHERE id = ?').get(id);
    } finally {
      db.close();
    }
  }
  const client = new pg.Client({ connectionString: layout.tableUrl });
  await client.connect();
  try {
    const r = await client.query(`SELECT * FROM ${layout.tableSchema}.backstage_backend_tasks__tasks WHERE id = $1`, [id]);
    return r.rows[0];
  } finally {
    await client.end();
  }
}

// A timestamp from the task table: a Date (pg) or SQLite's 'YYYY-MM-DD HH:MM:SS.fff' text in UTC.
function dbTimeMs(value) {
  return value instanceof Date ? value.getTime() : Date.parse(`${String(value).replace(' ', 'T')}Z`);
}

async function adminQuery(sql, params = []) {
  const client = new pg.Client({ connectionString: pgUrl });
  await client.connect();
  try {
    return await client.query(sql, params);
  } finally {
    await client.end();
  }
}

function withDatabase(url, database) {
  const u = new URL(url);
  u.pathname = `/${database}`;
  return u.toString();
}

// ---- The scenario, run once per layout

const TASKS = [
  // Registered by every node: runs must never overlap.
  { id: 'every2s', backstage: { seconds: 2 }, octopSchedule: { frequency: { seconds: 2 } }, timeout: { seconds: 8 }, runMs: 700 },
  // Always due (a run outlasts the cadence): the node that releases it usually claims it again at once.
  { id: 'busy', backstage: { seconds: 1 }, octopSchedule: { frequency: { seconds: 1 } }, timeout: { seconds: 8 }, runMs: 1200 },
  { id: 'cron5s', backstage: { cron: '*/5 * * * * *' }, octopSchedule: { frequency: { cron: '*/5 * * * * *' } }, timeout: { seconds: 8 }, runMs: 300 },
  // Triggered on one side and cancelled on the other. A cancelled run is due again at once (the trigger's due
  // time stands, as in Backstage): the first run is long, the ones after it short.
  { id: 'manual-a', backstage: { trigger: 'manual' }, octopSchedule: { frequency: { trigger: 'manual' } }, timeout: { seconds: 60 }, runMs: 300, firstRunMs: 30000 },
  { id: 'manual-b', backstage: { trigger: 'manual' }, octopSchedule: { frequency: { trigger: 'manual' } }, timeout: { seconds: 60 }, runMs: 300, firstRunMs: 30000 },
];
// Registered on one side only: a trigger sent to the other side must still reach it.
// The first run outlasts the timeout (its node is killed during it); a lost run is run again at once, as in
// Backstage, and that one ends in time.
const BACKSTAGE_ONLY = { id: 'bs-long', backstage: { trigger: 'manual' }, timeout: { seconds: 4 }, runMs: 300, firstRunMs: 60000 };
// A cron task with a time zone, only octop's: registered while a Backstage node uses the table, it is warned about.
const ZONED = { id: 'zoned', octopSchedule: { frequency: { cron: '0 0 3 * * *', timeZone: 'Asia/Tokyo' } }, timeout: { seconds: 4 }, runMs: 300 };
const OCTOP_ONLY = { id: 'oc-long', octopSchedule: { frequency: { trigger: 'manual' } }, timeout: { seconds: 4 }, runMs: 300, firstRunMs: 60000 };

function layouts(base) {
  const prefix = `it${runId}_`;
  const baseDb = `it${runId}_base`;
  const schemaDb = `it${runId}_schemas`;
  return [
    {
      name: 'postgres, a database per plugin',
      kind: 'pg',
      setup: async () => adminQuery(`CREATE DATABASE ${baseDb}`),
      backstageDatabase: { client: 'pg', connection: withDatabase(pgUrl, baseDb), prefix },
      octopDatabase: { connection: withDatabase(pgUrl, baseDb), prefix },
      tableUrl: withDatabase(pgUrl, `${prefix}interop`),
      tableSchema: 'public',
    },
    {
      name: 'postgres, a schema per plugin',
      kind: 'pg',
      setup: async () => adminQuery(`CREATE DATABASE ${schemaDb}`),
      backstageDatabase: { client: 'pg', connection: withDatabase(pgUrl, schemaDb), pluginDivisionMode: 'schema' },
      octopDatabase: { connection: withDatabase(pgUrl, schemaDb), pluginDivisionMode: 'schema' },
      tableUrl: withDatabase(pgUrl, schemaDb),
      tableSchema: 'interop',
    },
    {
      name: 'sqlite, a file per plugin',
      kind: 'sqlite',
      setup: async () => {},
      backstageDatabase: { client: 'better-sqlite3', connection: { directory: path.join(base, 'sqlite') } },
      octopDatabase: `sqlite:${path.join(base, 'sqlite')}`,
      dir: path.join(base, 'sqlite'),
    },
  ];
}

const base = fs.mkdtempSync(path.join(os.tmpdir(), 'octop-backstage-'));
const figures = [];

for (const [index, layout] of layouts(base).entries()) {
  test(`a Backstage node and two octopd nodes share the tasks: ${layout.name}`, { timeout: 150000 }, async () => {
    assert.ok(pgUrl && octopd, 'OCTOP_TEST_PG_URL and OCTOPD_BINARY are needed');
    const dir = path.join(base, `layout${index}`);
    fs.mkdirSync(dir, { recursive: true });
    layout.runLog = path.join(dir, 'runs.log');
    await layout.setup();
    const bsPort = 17100 + (process.pid % 400) + index;
    const bsTasks = [...TASKS, BACKSTAGE_ONLY].map((t) => ({
      id: t.id, frequency: t.backstage, timeout: t.timeout, runMs: t.runMs, firstRunMs: t.firstRunMs,
    }));
    const ocTasks = [...TASKS, OCTOP_ONLY, ZONED];
    // All three start at once on an empty database.
    const nodes = {
      bs: startBackstage('bs', layout, dir, bsTasks, bsPort),
      oc1: startOctopd('oc1', layout, dir, ocTasks),
      oc2: startOctopd('oc2', layout, dir, ocTasks),
    };
    const killedAt = {};
    try {
      const ports = { oc1: await octopPort(nodes.oc1), oc2: await octopPort(nodes.oc2) };
      await backstageReady(nodes.bs, layout.runLog);
      const started = Date.now();

      // A trigger through Backstage cancelled through octop, and the reverse: each reaches a run on any node.
      for (const [task, triggerVia, cancelVia] of [
        ['manual-a', () => bsPort, () => ports.oc1],
        ['manual-b', () => ports.oc2, () => bsPort],
      ]) {
        const trig = await post(triggerVia(), schedulerPath(task, 'trigger'));
        assert.equal(trig.status, 200, `trigger ${task}: ${trig.body}`);
        await until(`${task} to start`, () => readRuns(layout.runLog).starts.some((s) => s.task === task), 20000);
        const cancelledAt = Date.now();
        const cancel = await post(cancelVia(), schedulerPath(task, 'cancel'));
        assert.equal(cancel.status, 200, `cancel ${task}: ${cancel.body}`);
        const ended = await until(`${task} to end after the cancel`, () => {
          const first = runIntervals(layout.runLog, {}).find((r) => r.task === task);
          return Number.isFinite(first.end) && first;
        }, 20000);
        assert.equal(ended.how, 'aborted');
        figures.push(`${layout.name}: ${task} ran on ${ended.node}, ended ${ended.end - cancelledAt} ms after the cancel`);
      }

      // Each side's run, killed with its node, is reclaimed by the other after the timeout and run again.
      let incarnation = 1;
      for (const [task, triggerVia, victim] of [
        ['oc-long', () => bsPort, null],
        ['bs-long', () => ports.oc1, 'bs'],
      ]) {
        const trig = await post(triggerVia(), schedulerPath(task, 'trigger'));
        assert.equal(trig.status, 200, `trigger ${task}: ${trig.body}`);
        const run = await until(`${task} to start`, () => readRuns(layout.runLog).starts.find((s) => s.task === task), 20000);
        // The lease as the row records it: the claim's expiry, on the database's clock (this host's).
        const claimed = await taskRow(layout, task);
        assert.ok(claimed.current_run_ticket, `${task} is claimed while it runs`);
        const expiresMs = dbTimeMs(claimed.current_run_expires_at);
        const role = victim ?? Object.keys(nodes).find((k) => nodes[k].name === run.node);
        assert.ok(victim === null ? role.startsWith('oc') : run.node.startsWith('bs'), `${task} ran on ${run.node}`);
        killedAt[run.node] = Date.now();
        await nodes[role].kill('SIGKILL');
        ++incarnation;
        if (role !== 'bs') {
          // Backstage's janitor is the one to reclaim it: the other octop node stops too (a deploy), and once the
          // lease has expired Backstage restarts, as its janitor sweeps at start (then once a minute).
          const other = role === 'oc1' ? 'oc2' : 'oc1';
          await nodes[other].kill('SIGTERM');
          killedAt[nodes[other].name] = Date.now();
          await until(`the lease of ${task} to expire`, () => Date.now() > expiresMs + 200, 20000);
          await nodes.bs.kill('SIGTERM');
          killedAt[nodes.bs.name] = Date.now();
          nodes.bs = startBackstage(`bs${incarnation}`, layout, dir, bsTasks, bsPort);
          await backstageReady(nodes.bs, layout.runLog);
          const row = await until(`${task} to be reclaimed by Backstage`, async () => {
            const r = await taskRow(layout, task);
            return r && !r.current_run_ticket && r.last_run_error_json ? r : null;
          }, 30000);
          assert.match(String(row.last_run_error_json), /Task timed out/);
          assert.ok(row.last_run_ended_at, 'the reclaimed run has an end time');
          assert.match(nodes.bs.output, new RegExp(`Task timed out and was lost: ${task}`));
          figures.push(`${layout.name}: ${task} (octop's run, its node killed) reclaimed by Backstage's janitor`);
          nodes[other] = startOctopd(`${other}x${incarnation}`, layout, dir, ocTasks);
          ports[other] = await octopPort(nodes[other]);
        }
        if (role === 'bs') {
          // Only Backstage runs bs-long: until it is back, the row shows what the reclaim (by octop) wrote.
          const row = await until(`${task} to be reclaimed`, async () => {
            const r = await taskRow(layout, task);
            return r && !r.current_run_ticket && r.last_run_error_json ? r : null;
          }, 30000);
          assert.match(String(row.last_run_error_json), /Task timed out/);
          assert.ok(row.last_run_ended_at, 'the reclaimed run has an end time');
          nodes.bs = startBackstage(`bs${incarnation}`, layout, dir, bsTasks, bsPort);
          await backstageReady(nodes.bs, layout.runLog);
        } else {
          nodes[role] = startOctopd(`${role}x${incarnation}`, layout, dir, ocTasks);
          ports[role] = await octopPort(nodes[role]);
        }
        const rerun = await until(`${task} to run again`, () => readRuns(layout.runLog).starts.filter((s) => s.task === task)[1], 30000);
        assert.ok(rerun.ms >= expiresMs, `${task} ran again ${expiresMs - rerun.ms} ms before its lease expired`);
        figures.push(`${layout.name}: ${task} killed with ${run.node}, run again by ${rerun.node} ` +
          `${rerun.ms - run.ms} ms after the killed run began (timeout 4 s)`);
      }

      // octop's nodes stop (a deploy): Backstage carries on alone, then they come back while it runs. Runs hand
      // over both ways without overlap, and the restarts do not repeat an occurrence Backstage served.
      await Promise.all([nodes.oc1.kill('SIGTERM'), nodes.oc2.kill('SIGTERM')]);
      const alone = Date.now();
      await until('Backstage to run the recurring tasks alone', () => {
        const starts = readRuns(layout.runLog).starts.filter((s) => s.ms > alone && s.node.startsWith('bs'));
        return starts.filter((s) => s.task === 'busy').length >= 2 && starts.some((s) => s.task === 'cron5s');
      }, 30000);
      ++incarnation;
      nodes.oc1 = startOctopd(`oc1x${incarnation}`, layout, dir, ocTasks);
      nodes.oc2 = startOctopd(`oc2x${incarnation}`, layout, dir, ocTasks);
      ports.oc1 = await octopPort(nodes.oc1);
      ports.oc2 = await octopPort(nodes.oc2);
      // Registered while Backstage holds connections to the table: the zone warning, on PostgreSQL (SQLite keeps
      // no list of sessions).
      if (layout.kind === 'pg') {
        assert.match(nodes.oc1.output, /Task interop\/zoned has timeZone Asia\/Tokyo, but \d+ Backstage session/);
      }

      // Let the recurring tasks run on every node for a while.
      await until('30 s of recurring runs', () => Date.now() - started > 30000 &&
        readRuns(layout.runLog).starts.filter((s) => s.task === 'every2s').length >= 8, 60000);
    } finally {
      for (const node of Object.values(nodes)) {
        if (node.child.exitCode === null && node.child.signalCode === null) await node.kill('SIGTERM');
      }
    }

    const intervals = runIntervals(layout.runLog, killedAt);
    const bad = overlaps(intervals);
    assert.deepEqual(bad, [], `overlapping runs: ${JSON.stringify(bad)}`);
    // A run killed with its node did not serve its occurrence: the first run after it (once its lease expired)
    // serves that occurrence late, as in Backstage, so neither is counted. Every other run serves the
    // occurrence at or just after its start (a run may start 1 s early, Backstage's registration).
    const cronRuns = intervals.filter((r) => r.task === 'cron5s').sort((a, b) => a.ms - b.ms);
    const cron = cronRuns.filter((r, i) => r.how !== 'killed' && !(i > 0 && cronRuns[i - 1].how === 'killed'));
    const occurrences = new Map();
    for (const r of cron) {
      const occurrence = Math.floor((r.ms + 1000) / 5000) * 5000;
      occurrences.set(occurrence, [...(occurrences.get(occurrence) ?? []), r]);
    }
    // When a Backstage node registers cron5s, it pulls the row back to one second before the next occurrence
    // even if that occurrence has just run (octop's registration does not: docs/scheduler.md), so whichever node
    // claims next repeats it: the claim right after the registration runs that occurrence a second early, and the
    // release sets the row to the occurrence itself, which runs again. So the registration that explains a
    // repeated occurrence comes after the task's run before the pair and before the pair's last run (under load
    // an octop node, not Backstage, may be the one that claims right after it). The registrations, from the
    // Backstage nodes' own logs:
    const registrations = fs.readdirSync(dir).filter((f) => /^bs\d*\.log$/.test(f)).flatMap((f) =>
      [...fs.readFileSync(path.join(dir, f), 'utf8').matchAll(
        /(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z)\S* .*Registered scheduled task: cron5s\b/g)]
        .map((m) => Date.parse(m[1])));
    const rewoundByBackstage = (runs) => {
      const before = cronRuns.filter((r) => r.ms < runs[0].ms).at(-1);
      return registrations.some((t) => t > (before?.ms ?? -Infinity) && t < runs[runs.length - 1].ms);
    };
    // octop never runs an occurrence twice; Backstage itself does, after its own registration or release (it
    // starts a cron run 1 s early and then releases to the same occurrence; docs/scheduler.md), which octop
    // cannot change: those repeats are counted, not failed.
    const repeated = [...occurrences.values()].filter((runs) => runs.length > 1);
    // A repeat is octop's fault when octop ran it twice and no Backstage registration came in between.
    const octopRepeats = repeated.filter((runs) => runs.filter((r) => r.node.startsWith('oc')).length > 1 &&
      !rewoundByBackstage(runs));
    assert.deepEqual(octopRepeats, [], 'octop ran a cron occurrence more than once');
    const backstageRepeats = repeated.length;
    const perNode = {};
    for (const r of intervals) perNode[r.node] = (perNode[r.node] ?? 0) + 1;
    const busyOnBackstage = intervals.filter((r) => r.task === 'busy' && r.node.startsWith('bs')).length;
    const busyOnOctop = intervals.filter((r) => r.task === 'busy' && r.node.startsWith('oc')).length;
    figures.push(`${layout.name}: ${intervals.length} runs (${JSON.stringify(perNode)}; busy: ${busyOnBackstage} on ` +
      `Backstage, ${busyOnOctop} on octop), 0 overlaps, ${occurrences.size} cron occurrences none repeated by octop on its own (${backstageRepeats} repeated after a Backstage registration or by a Backstage node)`);
  });
}

// octop's migrator and Backstage's (knex, the scheduler's own migrations) start at the same instant on an empty
// schema; both must succeed, with one knex lock row left free.
test('octop and Backstage migrate one empty schema at the same time', { timeout: 120000 }, async () => {
  assert.ok(pgUrl && octopCli, 'OCTOP_TEST_PG_URL and OCTOP_BINARY are needed');
  const database = `it${runId}_firststart`;
  await adminQuery(`CREATE DATABASE ${database}`);
  const url = withDatabase(pgUrl, database);
  const migrations = path.join(here, 'node_modules/@backstage/backend-defaults/migrations/scheduler');
  const rounds = Number(process.env.FIRST_START_ROUNDS ?? 60);
  const failures = [];
  for (let round = 0; round < rounds; ++round) {
    const schema = `r${round}`;
    const knex = knexFactory({ client: 'pg', connection: url, searchPath: [schema], pool: { min: 0, max: 2 } });
    await knex.raw('CREATE SCHEMA ??', [schema]);
    // Octop's first, as a process; knex's at once in this one (its start costs more than a spawn).
    const octop = new Promise((resolve) => {
      const child = spawn(octopCli, ['--database', url, '--plugin-division-mode', 'schema', 'migrate', '--plugin', schema]);
      let output = '';
      child.stderr.on('data', (c) => { output += c; });
      child.on('exit', (code) => resolve({ code, output }));
    });
    const backstage = knex.migrate.latest({ directory: migrations, tableName: 'backstage_backend_tasks__knex_migrations' })
      .then(() => null, (error) => String(error));
    const [o, b] = await Promise.all([octop, backstage]);
    if (o.code !== 0) failures.push(`round ${round}: octop exited ${o.code}: ${o.output}`);
    if (b) failures.push(`round ${round}: Backstage's migration failed: ${b}`);
    const lock = await knex.raw('SELECT count(*)::int AS n, max(is_locked) AS locked FROM ??.backstage_backend_tasks__knex_migrations_lock', [schema]);
    if (lock.rows[0].n !== 1 || lock.rows[0].locked !== 0) failures.push(`round ${round}: lock rows ${JSON.stringify(lock.rows)}`);
    await knex.destroy();
  }
  figures.push(`simultaneous first migrations: ${failures.length} failures in ${rounds} rounds`);
  assert.deepEqual(failures, []);
});

test('figures', () => {
  for (const line of figures) console.log(`# backstage interop: ${line}`);
});
