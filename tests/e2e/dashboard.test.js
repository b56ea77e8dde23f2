// End-to-end tests of the dashboard: a real octopd (OCTOPD_BINARY, default build/debug/apps/octopd/octopd) on an
// ephemeral port with SQLite in a temp dir, the page opened in headless Debian chromium. Each test starts its
// own octopd and browser context. Waits are conditions with deadlines (Playwright's auto-waiting expectations and
// harness.waitFor), never fixed sleeps.
import { after, test } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync, mkdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { Octopd, openContext, closeSharedBrowser, screenshotDir, waitFor } from './harness.js';

// One chromium for the file, a fresh context (storage, cache) per test: launching costs seconds.
after(closeSharedBrowser);

const TOKEN = 'e2e-token-0123456789abcdef';

// One octopd and one browser page for a test, torn down after it.
async function setup(t, { token, colorScheme, protectReads, waitForTasks = true } = {}) {
  const octopd = await Octopd.start({ token, protectReads });
  let browser;
  try {
    browser = await openContext({ colorScheme });
  } catch (e) {
    await octopd.stop();
    throw e;
  }
  t.after(async () => {
    await browser.close();
    const exit = await octopd.stop();
    assert.deepEqual(browser.errors, [], 'the page threw no uncaught errors');
    assert.deepEqual(exit, { code: 0, signal: null }, `octopd stopped gracefully; its output:\n${octopd.output}`);
  });
  await browser.page.goto(`${octopd.base}/`);
  if (waitForTasks) await browser.page.waitForSelector('tr.task[data-task="heartbeat"]', { timeout: 15000 });
  return { octopd, page: browser.page };
}

const row = (page, plugin, task) => page.locator(`tr.task[data-plugin="${plugin}"][data-task="${task}"]`);
const textOf = async (locator) => (await locator.textContent()).trim();

test('lists every plugin\'s tasks with scope, cadence in words, state and next run', async (t) => {
  const { page } = await setup(t);

  const expected = [
    ['demo', 'heartbeat', 'every 10 minutes', 'global'],
    ['demo', 'quarter-minute-report', 'every 15 seconds', 'global'],
    ['demo', 'nightly-cleanup', 'at 02:00 daily (Europe/Paris)', 'global'],
    ['demo', 'rebuild-index', 'manual', 'global'],
    ['demo', 'long-export', 'manual', 'global'],
    ['demo', 'local-cache-refresh', 'every 15 seconds', 'local'],
    ['demo', 'flaky-upstream', 'every 10 minutes', 'global'],
    ['billing', 'invoice-run', 'at 06:30 on weekdays (server time)', 'global'],
    ['billing', 'ledger:sync/eu', 'manual', 'global'],
  ];
  for (const [plugin, task, cadence, scope] of expected) {
    const r = row(page, plugin, task);
    assert.equal(await textOf(r.locator('.cadence-words')), cadence, `${plugin}/${task} cadence`);
    assert.equal(await textOf(r.locator('.badge.scope')), scope, `${plugin}/${task} scope`);
  }
  // The raw cadence is shown beside the words.
  assert.equal(await textOf(row(page, 'demo', 'nightly-cleanup').locator('.cadence-raw')), '0 2 * * *');
  // Sections in the API's plugin order, tasks in registration order.
  const plugins = await page.locator('section.plugin').evaluateAll((s) => s.map((e) => e.dataset.plugin));
  const fromApi = await page.evaluate(async () => (await (await fetch('api/octop/v1/plugins')).json()).plugins);
  assert.deepEqual(plugins, fromApi);
  const demoTasks = await page.locator('tr.task[data-plugin="demo"]').evaluateAll((rs) => rs.map((r) => r.dataset.task));
  assert.deepEqual(demoTasks, expected.filter((e) => e[0] === 'demo').map((e) => e[1]));

  // Idle with its next run an hour away (initialDelay 1h), shown absolute and relative.
  const heartbeat = row(page, 'demo', 'heartbeat');
  assert.equal(await textOf(heartbeat.locator('.badge.status')), 'idle');
  assert.match(await textOf(heartbeat.locator('td.next .rel')), /^in (59 min|1 h)$/);
  assert.match(await textOf(heartbeat.locator('td.next .abs')), /^(\w{3} \d+ \w{3} )?\d\d:\d\d:\d\d$/);
  assert.equal(await textOf(row(page, 'demo', 'rebuild-index').locator('td.next')), 'when triggered');
  assert.equal(await textOf(row(page, 'demo', 'rebuild-index').locator('td.last .when')), 'never ran');
  // The nightly task's first run is due at 02:00 in Paris (the browser runs in Europe/Paris too), less the
  // one second Backstage takes off a cron task's first occurrence. Between midnight and 02:00 in Paris that is
  // today, shown as the clock alone; otherwise a later day, shown with its date.
  assert.match(await textOf(row(page, 'demo', 'nightly-cleanup').locator('td.next .abs')),
    /^(\w{3} \d+ \w{3}( \d{4})? )?01:59:59$/);
  // The local task's worker waits out its initial delay.
  assert.equal(await textOf(row(page, 'demo', 'local-cache-refresh').locator('.badge.worker')), 'initial-wait');

  // The nav marks Tasks as the page on screen and links the Queue page (tests in queue.test.js).
  assert.equal(await page.locator('.nav-item[aria-current="page"]').getAttribute('data-page'), 'tasks');
  assert.equal(await page.locator('.nav-item[data-page="queue"]').getAttribute('href'), '#/queue');
});

test('Trigger on a manual task runs it (checked through the API and its marker file)', async (t) => {
  const { octopd, page } = await setup(t);
  const r = row(page, 'demo', 'rebuild-index');
  await r.locator('button[data-action="trigger"]').click();
  await r.locator('.action-message[data-kind="ok"]').waitFor({ timeout: 5000 });

  const task = await waitFor(async () => {
    const t2 = await octopd.task('demo', 'rebuild-index');
    return t2.taskState && t2.taskState.lastRunEndedAt ? t2 : null;
  }, { what: 'rebuild-index to have a lastRunEndedAt' });
  assert.equal(task.taskState.lastRunError, undefined);
  assert.equal(readFileSync(octopd.marker('rebuild-index.marker'), 'utf8'), 'rebuilt\n');

  // The page catches up on its own (live refresh): the run ended and succeeded.
  await r.locator('td.last .badge.ok').waitFor({ timeout: 10000 });
  assert.match(await textOf(r.locator('td.last .abs')), /^ended /);

  // An id with ':' and '/' goes through encodeURIComponent.
  const ledger = row(page, 'billing', 'ledger:sync/eu');
  await ledger.locator('button[data-action="trigger"]').click();
  await waitFor(() => existsSync(octopd.marker('ledger.marker')), { what: 'the ledger marker file' });
  await ledger.locator('td.last .badge.ok').waitFor({ timeout: 10000 });

  // A 404 from the real API (the click is re-addressed to a task octopd does not have) reads as a sentence.
  await page.route('**/tasks/rebuild-index/trigger', (route) =>
    route.continue({ url: route.request().url().replace('rebuild-index', 'no-such-task') }));
  await r.locator('button[data-action="trigger"]').click();
  const notFound = r.locator('.action-message[data-kind="error"] .text');
  await notFound.waitFor({ timeout: 5000 });
  assert.equal(await textOf(notFound), 'Not found: Task no-such-task does not exist (HTTP 404)');
});

test('a failing task shows its parsed error message, expandable', async (t) => {
  const { octopd, page } = await setup(t);
  const api = await waitFor(async () => {
    const t2 = await octopd.task('demo', 'flaky-upstream');
    return t2.taskState && t2.taskState.lastRunError ? t2 : null;
  }, { what: 'flaky-upstream to fail once' });
  const expectedMessage = JSON.parse(api.taskState.lastRunError).message;
  assert.match(expectedMessage, /exited with status 3/);

  const r = row(page, 'demo', 'flaky-upstream');
  const details = r.locator('details.run-error');
  await details.waitFor({ timeout: 10000 });
  assert.equal(await textOf(r.locator('.badge.fail')), 'failed');
  assert.equal(await textOf(details.locator('.error-summary')), expectedMessage);
  // Collapsed until clicked; the parsed message, not the raw JSON, is what it shows.
  assert.equal(await details.locator('.error-message').isVisible(), false);
  await details.locator('summary').click();
  await details.locator('.error-message').waitFor({ state: 'visible' });
  assert.equal(await textOf(details.locator('.error-message')), expectedMessage);
  assert.equal(await textOf(details.locator('.error-name')), 'Error');
  // Stays open across live refreshes.
  const refreshes = Number(await page.evaluate(() => document.body.dataset.refreshes));
  await page.waitForFunction((n) => Number(document.body.dataset.refreshes) >= n + 2, refreshes, { timeout: 10000 });
  assert.equal(await details.evaluate((d) => d.open), true);
  assert.match(await textOf(page.locator('#summary')), /1 failed last run/);
});

test('Trigger on a running task shows the 409 message; Cancel stops it', async (t) => {
  const { octopd, page } = await setup(t);
  const r = row(page, 'demo', 'long-export');
  await r.locator('button[data-action="trigger"]').click();
  await waitFor(() => existsSync(octopd.marker('long-export.started')), { what: 'long-export to start' });
  await page.waitForSelector('tr.task[data-task="long-export"][data-status="running"]', { timeout: 10000 });
  assert.match(await textOf(r.locator('td.state .lines')), /since .*times out/s);
  assert.equal(await textOf(r.locator('td.next')), 'after this run');

  await r.locator('button[data-action="trigger"]').click();
  const conflict = r.locator('.action-message[data-kind="error"]');
  await conflict.waitFor({ timeout: 5000 });
  assert.equal(await textOf(conflict.locator('.text')), 'Conflict: Task long-export is currently running (HTTP 409)');

  // Cancel: the run is stopped and recorded as cancelled (cancel writes lastRunEndedAt and the error).
  // Whether the triggered task is then claimed again (Backstage leaves next_run_start_at alone, spec §3.9) is
  // the runtime's business, so only the common part is checked.
  await r.locator('button[data-action="cancel"]').click();
  await r.locator('.action-message[data-kind="ok"]').waitFor({ timeout: 5000 });
  const cancelled = await waitFor(async () => {
    const t2 = await octopd.task('demo', 'long-export');
    return t2.taskState.lastRunError ? t2 : null;
  }, { what: 'long-export to be recorded as cancelled' });
  assert.equal(JSON.parse(cancelled.taskState.lastRunError).message, 'Task was cancelled');
  assert.ok(cancelled.taskState.lastRunEndedAt);
  await r.locator('details.run-error').waitFor({ timeout: 10000 });
  assert.equal(await textOf(r.locator('.error-summary')), 'Task was cancelled');

  // Cancel on an idle task: the API's other 409.
  const idle = row(page, 'demo', 'rebuild-index');
  await idle.locator('button[data-action="cancel"]').click();
  const notRunning = idle.locator('.action-message[data-kind="error"] .text');
  await notRunning.waitFor({ timeout: 5000 });
  assert.equal(await textOf(notRunning), 'Conflict: Task rebuild-index is not running (HTTP 409)');
});

test('with reads protected, the dashboard asks for the token before it shows anything, then shows the tasks', async (t) => {
  const { octopd, page } = await setup(t, { token: TOKEN, protectReads: true, waitForTasks: false });
  // The API refuses a read without the token; the probe does not.
  assert.equal((await fetch(`${octopd.base}/api/octop/v1/plugins`)).status, 401);
  assert.equal((await fetch(`${octopd.base}/healthz`)).status, 200);
  const dialog = page.locator('#token-dialog[open]');
  await dialog.waitFor({ state: 'visible', timeout: 15000 });
  assert.match(await textOf(page.locator('#token-error')), /requires a bearer token to read/);
  assert.equal(await row(page, 'demo', 'heartbeat').count(), 0, 'no task is shown before the token');
  await page.fill('#token-input', TOKEN);
  await page.click('#token-submit');
  await page.waitForSelector('tr.task[data-task="heartbeat"]', { timeout: 15000 });
  assert.equal(await page.evaluate(() => sessionStorage.getItem('octop.token')), TOKEN);
});

test('with a token configured, a 401 asks for it once, keeps it, and the retry succeeds', async (t) => {
  const { octopd, page } = await setup(t, { token: TOKEN });
  // The API really refuses an unauthenticated POST.
  assert.equal((await octopd.post('demo', 'rebuild-index', 'trigger')).status, 401);

  const r = row(page, 'demo', 'rebuild-index');
  await r.locator('button[data-action="trigger"]').click();
  const dialog = page.locator('#token-dialog[open]');
  await dialog.waitFor({ timeout: 5000 });
  assert.equal(await page.locator('#token-error').isVisible(), false);

  // A wrong token is rejected by octopd and the form asks again, saying so.
  await page.fill('#token-input', 'wrong-token-wrong-token');
  await page.click('#token-submit');
  await page.locator('#token-error').waitFor({ state: 'visible', timeout: 5000 });
  assert.match(await textOf(page.locator('#token-error')), /rejected/);
  assert.equal(existsSync(octopd.marker('rebuild-index.marker')), false);

  await page.fill('#token-input', TOKEN);
  await page.click('#token-submit');
  await page.locator('#token-dialog').waitFor({ state: 'hidden', timeout: 5000 });
  await r.locator('.action-message[data-kind="ok"]').waitFor({ timeout: 5000 });
  await waitFor(() => existsSync(octopd.marker('rebuild-index.marker')), { what: 'rebuild-index to run' });
  assert.equal(await page.evaluate(() => sessionStorage.getItem('octop.token')), TOKEN);
  await page.locator('#token-status').waitFor({ state: 'visible' });

  // The next POST uses the kept token without asking.
  const ledger = row(page, 'billing', 'ledger:sync/eu');
  await ledger.locator('button[data-action="trigger"]').click();
  await ledger.locator('.action-message[data-kind="ok"]').waitFor({ timeout: 5000 });
  await waitFor(() => existsSync(octopd.marker('ledger.marker')), { what: 'the ledger marker file' });
  assert.equal(await page.locator('#token-dialog').isVisible(), false);

  // Cancelling the form sends nothing and says why.
  await page.click('#forget-token');
  await ledger.locator('button[data-action="trigger"]').click();
  await dialog.waitFor({ timeout: 5000 });
  await page.click('#token-cancel');
  await page.waitForFunction(() => {
    const m = document.querySelector('tr.task[data-task="ledger:sync/eu"] .action-message[data-kind="error"]');
    return m && m.textContent.includes('requires a bearer token');
  }, null, { timeout: 5000 });
});

test('polling every 2 s stops while the tab is hidden and resumes when it is shown', async (t) => {
  const { octopd, page } = await setup(t);
  // A fake clock drives the page's timers, so "no poll in 10 s" is checked without waiting 10 s.
  await page.clock.install();
  await page.reload();
  await page.waitForSelector('tr.task[data-task="heartbeat"]', { timeout: 15000 });
  const polls = [];
  page.on('request', (req) => { if (req.url().endsWith('/api/octop/v1/plugins')) polls.push(req.url()); });
  const idle = () => page.waitForFunction(() => document.body.dataset.refreshes && !document.body.dataset.loading);
  await idle();

  let before = polls.length;
  const next = page.waitForRequest((req) => req.url().endsWith('/api/octop/v1/plugins'), { timeout: 5000 });
  await page.clock.runFor(2100);
  await next;
  assert.ok(polls.length > before, 'polled after 2 s');

  await page.evaluate(() => {
    Object.defineProperty(document, 'hidden', { configurable: true, get: () => true });
    Object.defineProperty(document, 'visibilityState', { configurable: true, get: () => 'hidden' });
    document.dispatchEvent(new Event('visibilitychange'));
  });
  assert.match(await textOf(page.locator('#live-text')), /Paused/);
  // Let the poll already in flight finish, then nothing more may go out.
  await idle();
  before = polls.length;
  await page.clock.runFor(10000);
  assert.equal(polls.length, before, 'no poll while hidden');

  const resumed = page.waitForRequest((req) => req.url().endsWith('/api/octop/v1/plugins'), { timeout: 5000 });
  await page.evaluate(() => {
    Object.defineProperty(document, 'hidden', { configurable: true, get: () => false });
    Object.defineProperty(document, 'visibilityState', { configurable: true, get: () => 'visible' });
    document.dispatchEvent(new Event('visibilitychange'));
  });
  await resumed;
  await page.waitForFunction(() => /^Live/.test(document.getElementById('live-text').textContent), null, { timeout: 5000 });
  assert.ok(octopd.port > 0);
});

test('screenshots of a busy dashboard, light and dark', async (t) => {
  mkdirSync(screenshotDir, { recursive: true });
  for (const colorScheme of ['light', 'dark']) {
    await t.test(colorScheme, async (st) => {
      const { octopd, page } = await setup(st, { colorScheme });
      // A succeeded run, a running task, a failed one (expanded) and a 409 message.
      await row(page, 'demo', 'rebuild-index').locator('button[data-action="trigger"]').click();
      await row(page, 'demo', 'rebuild-index').locator('td.last .badge.ok').waitFor({ timeout: 10000 });
      const long = row(page, 'demo', 'long-export');
      await long.locator('button[data-action="trigger"]').click();
      await page.waitForSelector('tr.task[data-task="long-export"][data-status="running"]', { timeout: 10000 });
      await long.locator('button[data-action="trigger"]').click();
      await long.locator('.action-message[data-kind="error"]').waitFor({ timeout: 5000 });
      const flaky = row(page, 'demo', 'flaky-upstream').locator('details.run-error');
      await flaky.waitFor({ timeout: 10000 });
      await flaky.locator('summary').click();
      await page.waitForSelector('tr.task[data-task="quarter-minute-report"] td.last .badge.ok', { timeout: 20000 });
      await page.evaluate(() => window.scrollTo(0, 0)); // the sticky header belongs at the top
      const file = path.join(screenshotDir, colorScheme === 'light' ? 'dashboard.png' : 'dashboard-dark.png');
      await page.screenshot({ path: file, fullPage: true });
      assert.ok(existsSync(file));
      await octopd.post('demo', 'long-export', 'cancel');
    });
  }
});
