// Test harness for the dashboard's end-to-end tests: a real octopd on an ephemeral port with its own temp
// directory (config, SQLite data, marker files), a fresh headless Debian chromium driven by playwright-core,
// and condition waits with deadlines (never fixed sleeps).
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync, existsSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { chromium } from 'playwright-core';

export const repoRoot = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
export const octopdPath = path.resolve(repoRoot, process.env.OCTOPD_BINARY ?? process.env.OCTOPD ?? 'build/debug/apps/octopd/octopd');
export const chromiumPath = process.env.CHROMIUM ?? '/usr/bin/chromium';
export const screenshotDir = path.resolve(repoRoot, process.env.E2E_OUT ?? 'build/e2e');

// Polls `probe` until it returns a truthy value; the interval only bounds how soon the condition is noticed.
// A probe that throws is retried (the condition may not hold yet) unless the error is marked `fatal`.
export async function waitFor(probe, { timeout = 15000, interval = 50, what = 'condition' } = {}) {
  const deadline = Date.now() + timeout;
  let last;
  for (;;) {
    try {
      last = await probe();
      if (last) return last;
    } catch (e) {
      if (e && e.fatal) throw e;
      last = e;
    }
    if (Date.now() > deadline) {
      throw new Error(`timed out after ${timeout} ms waiting for ${what}` + (last instanceof Error ? `: ${last.message}` : ''));
    }
    await new Promise((resolve) => setTimeout(resolve, interval));
  }
}

// The example-like configuration: the task kinds of examples/octop.yaml, with marker files in `dir` and a
// second plugin, and job handlers: greet (succeeds), sync-ledger (fails with a message on stderr until the
// marker file ledger.ok exists) and report on queue "reports". `token`: sets http.token.
export function exampleConfig(dir, { token, protectReads } = {}) {
  const q = (s) => `'${s.replaceAll("'", "''")}'`;
  const marker = (name) => path.join(dir, name);
  return `database: sqlite:${path.join(dir, 'data')}
http:
  listen: 127.0.0.1:0
${token ? `  token: ${q(token)}\n` : ''}${protectReads ? '  protectReads: true\n' : ''}scheduler:
  workCheckFrequency: 200ms
  janitorInterval: 1s
plugins:
  demo:
    tasks:
      - id: heartbeat
        schedule: { frequency: { minutes: 10 }, timeout: 10s, initialDelay: 1h }
        command: [sh, -c, 'echo heartbeat']
      - id: quarter-minute-report
        schedule: { frequency: { cron: '*/15 * * * * *' }, timeout: 10s }
        command: [sh, -c, 'echo report']
      - id: nightly-cleanup
        schedule: { frequency: { cron: '0 2 * * *', timeZone: Europe/Paris }, timeout: 30m }
        command: [sh, -c, 'echo cleaning up']
      - id: rebuild-index
        schedule: { frequency: { trigger: manual }, timeout: 2m }
        command: [sh, -c, ${q(`echo rebuilt >> ${marker('rebuild-index.marker')}`)}]
      - id: long-export
        schedule: { frequency: { trigger: manual }, timeout: 5m }
        command: [sh, -c, ${q(`touch ${marker('long-export.started')}; trap 'exit 0' TERM; while true; do sleep 0.1; done`)}]
      - id: local-cache-refresh
        schedule: { frequency: PT15S, timeout: 20s, initialDelay: 1h, scope: local }
        command: [sh, -c, 'echo refreshing']
      - id: flaky-upstream
        schedule: { frequency: { minutes: 10 }, timeout: 10s }
        command: [sh, -c, 'echo "upstream answered 503" >&2; exit 3']
  billing:
    tasks:
      - id: invoice-run
        schedule: { frequency: { cron: '30 6 * * 1-5' }, timeout: 1h }
        command: [sh, -c, 'echo invoices']
      - id: ledger:sync/eu
        schedule: { frequency: { trigger: manual }, timeout: 1m }
        command: [sh, -c, ${q(`touch ${marker('ledger.marker')}`)}]
jobs:
  handlers:
    - kind: greet
      concurrency: 2
      timeout: 30s
      command: [sh, -c, 'echo "greeting $(cat)"']
    - kind: sync-ledger
      timeout: 30s
      command: [sh, -c, ${q(`cat >/dev/null; if [ -f ${marker('ledger.ok')} ]; then echo synced; else echo "ledger unreachable: connection refused" >&2; exit 1; fi`)}]
    - kind: report
      queue: reports
      timeout: 30s
      command: [sh, -c, 'cat >/dev/null; echo reported']
    - kind: slow-export
      queue: slow
      timeout: 5m
      command: { argv: [sh, -c, 'cat >/dev/null; trap "" TERM; exec sleep 300'], killGrace: 2s }
`;
}

// A running octopd with its own temp directory. Use `await Octopd.start(...)`, then `stop()`.
export class Octopd {
  static async start({ token, protectReads } = {}) {
    if (!existsSync(octopdPath)) {
      throw new Error(`octopd not found at ${octopdPath}: build it, or set OCTOPD_BINARY to its path`);
    }
    const d = new Octopd();
    d.dir = mkdtempSync(path.join(tmpdir(), 'octop-e2e-'));
    d.configPath = path.join(d.dir, 'octop.yaml');
    writeFileSync(d.configPath, exampleConfig(d.dir, { token, protectReads }));
    const args = ['--config', d.configPath];
    if (process.env.OCTOP_WEB_ROOT) args.push('--web-root', process.env.OCTOP_WEB_ROOT);
    d.output = '';
    d.child = spawn(octopdPath, args, { cwd: d.dir, stdio: ['ignore', 'pipe', 'pipe'] });
    d.exited = new Promise((resolve) => d.child.on('exit', (code, signal) => resolve({ code, signal })));
    const onData = (chunk) => { d.output += chunk.toString(); };
    d.child.stdout.on('data', onData);
    d.child.stderr.on('data', onData);
    let exit = null;
    d.exited.then((e) => { exit = e; });
    let port;
    try {
      port = await waitFor(() => {
        if (exit) throw Object.assign(new Error(`octopd exited (${JSON.stringify(exit)}):\n${d.output}`), { fatal: true });
        const m = /ready on port (\d+)/.exec(d.output);
        return m && Number(m[1]);
      }, { timeout: 20000, what: 'octopd to print "ready on port N"' });
    } catch (e) {
      await d.stop(); // never leave a half-started daemon behind
      throw e;
    }
    d.port = port;
    d.base = `http://127.0.0.1:${port}`;
    return d;
  }

  marker(name) {
    return path.join(this.dir, name);
  }

  async tasks(plugin) {
    const res = await fetch(`${this.base}/api/${encodeURIComponent(plugin)}/.backstage/scheduler/v1/tasks`);
    if (!res.ok) throw new Error(`GET tasks of ${plugin}: HTTP ${res.status}`);
    return (await res.json()).tasks;
  }

  async task(plugin, id) {
    return (await this.tasks(plugin)).find((t) => t.taskId === id);
  }

  async post(plugin, id, action, token) {
    const headers = token ? { Authorization: `Bearer ${token}` } : {};
    const res = await fetch(
      `${this.base}/api/${encodeURIComponent(plugin)}/.backstage/scheduler/v1/tasks/${encodeURIComponent(id)}/${action}`,
      { method: 'POST', headers });
    return { status: res.status, body: await res.text() };
  }

  // A request to octopd's API: {status, body (parsed JSON, or the text when it is not JSON)}.
  async api(method, urlPath, { body, token } = {}) {
    const headers = { Accept: 'application/json' };
    if (token) headers.Authorization = `Bearer ${token}`;
    if (body !== undefined) headers['Content-Type'] = 'application/json';
    // A string body is sent as it is: JSON text that a JavaScript object cannot hold (numbers beyond a double).
    const sent = body === undefined || typeof body === 'string' ? body : JSON.stringify(body);
    const res = await fetch(`${this.base}${urlPath}`, { method, headers, body: sent });
    const text = await res.text();
    let parsed = text;
    try {
      parsed = JSON.parse(text);
    } catch (e) {
      // not JSON: the text itself
    }
    return { status: res.status, body: parsed };
  }

  // POST /api/octop/v1/jobs; returns the new job's id.
  async enqueue(spec, token) {
    const r = await this.api('POST', '/api/octop/v1/jobs', { body: spec, token });
    if (r.status !== 201) throw new Error(`enqueue ${JSON.stringify(spec)}: HTTP ${r.status} ${JSON.stringify(r.body)}`);
    return r.body.id;
  }

  async job(id) {
    const r = await this.api('GET', `/api/octop/v1/jobs/${encodeURIComponent(id)}`);
    if (r.status !== 200) throw new Error(`GET job ${id}: HTTP ${r.status}`);
    return r.body;
  }

  // Waits until job `id` has `status` (one of, when an array); returns the job.
  async waitForJob(id, status, options = {}) {
    const wanted = Array.isArray(status) ? status : [status];
    return waitFor(async () => {
      const j = await this.job(id);
      return wanted.includes(j.status) ? j : null;
    }, { what: `job ${id} to be ${wanted.join(' or ')}`, ...options });
  }

  // SIGTERM, then the exit status: {code, signal}. A graceful stop is code 0, so a sanitizer report (which
  // makes the process exit non-zero) fails the test that ran it.
  async stop() {
    let exit = { code: this.child.exitCode, signal: this.child.signalCode };
    if (this.child.exitCode === null && this.child.signalCode === null) {
      this.child.kill('SIGTERM');
      const timer = setTimeout(() => this.child.kill('SIGKILL'), 20000);
      exit = await this.exited;
      clearTimeout(timer);
    }
    rmSync(this.dir, { recursive: true, force: true });
    return exit;
  }
}

// A fresh headless chromium (its own empty profile directory) and one page.
export async function openBrowser({ colorScheme = 'light' } = {}) {
  const profile = mkdtempSync(path.join(tmpdir(), 'octop-e2e-chromium-'));
  const context = await chromium.launchPersistentContext(profile, {
    executablePath: chromiumPath,
    headless: true,
    args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
      '--disable-background-networking', '--disable-component-update', '--disable-sync'],
    viewport: { width: 1440, height: 900 },
    colorScheme,
    timezoneId: 'Europe/Paris',
    locale: 'en-GB',
  });
  const page = context.pages()[0] ?? (await context.newPage());
  const errors = [];
  page.on('pageerror', (e) => errors.push(e.message));
  return {
    context,
    page,
    errors,
    async close() {
      await context.close();
      rmSync(profile, { recursive: true, force: true });
    },
  };
}

// One headless chromium shared by the tests of a file (launching one costs seconds on a loaded machine), and
// a fresh context per test: its own cookies, storage and cache, so each test still starts from nothing. Call
// closeSharedBrowser() after the file's tests.
let sharedBrowser = null;
// `hostResolverRules` (chromium's --host-resolver-rules, e.g. 'MAP rebind.test 127.0.0.1') gives the context a
// browser of its own, launched with those rules.
export async function openContext({ colorScheme = 'light', hostResolverRules } = {}) {
  const launch = (extra = []) => chromium.launch({
    executablePath: chromiumPath,
    headless: true,
    args: ['--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
      '--disable-background-networking', '--disable-component-update', '--disable-sync', ...extra],
  });
  let own = null;
  if (hostResolverRules) {
    own = await launch([`--host-resolver-rules=${hostResolverRules}`]);
  } else if (!sharedBrowser) {
    sharedBrowser = launch();
  }
  const browser = own ?? await sharedBrowser;
  const context = await browser.newContext({
    viewport: { width: 1440, height: 900 },
    colorScheme,
    timezoneId: 'Europe/Paris',
    locale: 'en-GB',
  });
  const page = await context.newPage();
  const errors = [];
  page.on('pageerror', (e) => errors.push(e.message));
  return {
    context, page, errors,
    close: async () => {
      await context.close();
      if (own) await own.close();
    },
  };
}

export async function closeSharedBrowser() {
  if (!sharedBrowser) return;
  const browser = await sharedBrowser;
  sharedBrowser = null;
  await browser.close();
}
