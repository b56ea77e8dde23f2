// End-to-end tests of the dashboard's Queue page (#/queue): a real octopd (OCTOPD_BINARY) with the harness's
// job handlers (greet succeeds; sync-ledger fails until its marker file exists; report runs on queue
// "reports"), jobs enqueued through the REST API before the page opens, the page in headless Debian
// chromium. Every check of an effect goes through the API. Waits are conditions with deadlines (Playwright's
// auto-waiting and harness.waitFor), never fixed sleeps.
import { after, test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdirSync, existsSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { createRequire } from 'node:module';
import { Octopd, openContext, closeSharedBrowser, screenshotDir, waitFor, repoRoot } from './harness.js';

const F = createRequire(import.meta.url)(path.join(repoRoot, 'src/web/format.js'));
const TOKEN = 'e2e-queue-token-0123456789';
const LEDGER_ERROR = 'ledger unreachable: connection refused';
const LEDGER_PAYLOAD = '{"account":"EU-42","entries":[{"amount":12.5,"currency":"EUR"}],' +
  '"ref":123456789012345678901234567890,"rate":0.12345678901234567890123,"floor":-9223372036854775809}';

after(closeSharedBrowser);

// The page's state to be checked against: two greets and a report succeed, one sync-ledger job ends frozen
// (max_retries 0), one greet waits an hour in the future.
async function seed(octopd, token) {
  const greets = [];
  for (const name of ['Ada', 'Grace']) {
    greets.push(await octopd.enqueue({ kind: 'greet', payload: { name } }, token));
  }
  const report = await octopd.enqueue({ kind: 'report', queue: 'reports', payload: { month: '2026-11' } }, token);
  // As JSON text: its payload holds numbers a double would round, which the dashboard must show as they are.
  const ledger = await octopd.enqueue(`{"kind":"sync-ledger","maxRetries":0,"payload":${LEDGER_PAYLOAD}}`, token);
  const later = await octopd.enqueue({
    kind: 'greet',
    payload: { name: 'Later' },
    scheduledAt: new Date(Date.now() + 3600 * 1000).toISOString(),
  }, token);
  for (const id of [...greets, report]) await octopd.waitForJob(id, 'success');
  const frozen = await octopd.waitForJob(ledger, 'frozen');
  assert.match(frozen.lastError, new RegExp(LEDGER_ERROR));
  return { greets, report, ledger, later };
}

// One octopd (seeded) and one browser page on #/queue, torn down after the test.
async function setup(t, { token, hash = '#/queue' } = {}) {
  const octopd = await Octopd.start({ token });
  let browser;
  try {
    browser = await openContext();
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
  const jobs = await seed(octopd, token);
  await browser.page.goto(`${octopd.base}/${hash}`);
  await browser.page.waitForSelector('#page-queue[data-refreshes]', { timeout: 15000 });
  return { octopd, page: browser.page, jobs };
}

const jobRow = (page, id) => page.locator(`tr.job[data-job="${id}"]`);
const textOf = async (locator) => (await locator.textContent()).trim();
const shownJobs = (page) => page.locator('tr.job:not([data-stale])').evaluateAll((rs) => rs.map((r) => r.dataset.job));
// Resolves once the page has finished a refresh that started after this call (loads run one at a time, so
// the one after the last begun is finished when `refreshes` passes it).
async function nextRefresh(page) {
  const n = Number(await page.evaluate(() => document.getElementById('page-queue').dataset.started || 0));
  await page.waitForFunction((k) => Number(document.getElementById('page-queue').dataset.refreshes) >= k + 1,
    n, { timeout: 10000 });
}

test('format.js: routes, sparkline geometry, latencies and payload previews', () => {
  // Two spellings of one decimal give one key; a double's rounding of a longer literal gives another.
  assert.equal(F.decimalKey('19.90'), F.decimalKey('19.9'));
  assert.equal(F.decimalKey('1e-07'), F.decimalKey('1e-7'));
  assert.equal(F.decimalKey('5.0'), F.decimalKey(String(5)));
  assert.equal(F.decimalKey('-0'), F.decimalKey('0'));
  assert.equal(F.decimalKey('1500'), F.decimalKey('1.5E3'));
  assert.notEqual(F.decimalKey('123456789012345678901234567890'), F.decimalKey(String(123456789012345678901234567890)));
  assert.notEqual(F.decimalKey('0.12345678901234567890123'), F.decimalKey(String(0.12345678901234567890123)));
  assert.notEqual(F.decimalKey('-15'), F.decimalKey('15'));
  assert.deepEqual(F.parseJsonKeepingDigits('{"a":[1,2.5]}'), { a: [1, 2.5] }); // node has no JSON.rawJSON

  assert.deepEqual(F.parseRoute('#/queue?kind=greet&status=frozen'), { name: 'queue', params: { kind: 'greet', status: 'frozen' } });
  assert.deepEqual(F.parseRoute(''), { name: 'tasks', params: {} });
  assert.deepEqual(F.parseRoute('#/'), { name: 'tasks', params: {} });
  assert.deepEqual(F.parseRoute('#/queue?kind='), { name: 'queue', params: {} });
  assert.equal(F.formatRoute('queue', { kind: 'sync ledger/eu', status: '' }), '#/queue?kind=sync+ledger%2Feu');
  assert.deepEqual(F.parseRoute(F.formatRoute('queue', { kind: 'a&b=c', status: 'frozen' })).params,
    { kind: 'a&b=c', status: 'frozen' });

  const g = F.sparkline([0, null, 2, 4], { width: 100, height: 20, pad: 0 });
  assert.deepEqual(g.points.map((p) => [p.x, p.y, p.index]), [[0, 20, 0], [66.7, 10, 2], [100, 0, 3]]);
  assert.equal(g.path, 'M0 20 M66.7 10 L100 0'); // the gap at the null breaks the line
  assert.equal(g.max, 4);
  assert.equal(F.sparkline([0, 0], { height: 10, pad: 0, minMax: 1 }).points[0].y, 10); // flat at the baseline
  assert.deepEqual(F.sparkline([]).points, []);

  assert.equal(F.formatMs(null), '—');
  assert.equal(F.formatMs(850.4), '850 ms');
  assert.equal(F.formatMs(2400), '2.4 s');
  assert.equal(F.formatMs(185000), '3 min 5 s');
  assert.equal(F.jsonPreview({ a: 'x'.repeat(100) }, 20), '{"a":"xxxxxxxxxxxxx…');
  assert.equal(F.prettyJson({ a: [1] }), '{\n  "a": [\n    1\n  ]\n}');
});

test('counts per queue equal the API summary; failed/frozen jobs show their error and payload; the sparkline has points', async (t) => {
  const { octopd, page, jobs } = await setup(t);
  await octopd.api('POST', '/api/octop/v1/queues/reports/pause');
  await nextRefresh(page);

  // Counts: every queue and status cell equals the API's summary.
  const summary = (await octopd.api('GET', '/api/octop/v1/jobs/summary')).body;
  const expected = {};
  for (const line of summary.counts) expected[`${line.queue}/${line.status}`] = line.count;
  const queues = [...new Set(summary.counts.map((c) => c.queue))].sort();
  assert.deepEqual(queues, ['default', 'reports']);
  assert.deepEqual(await page.locator('tr.queue').evaluateAll((rs) => rs.map((r) => r.dataset.queue)), queues);
  for (const queue of queues) {
    for (const status of ['pending', 'running', 'success', 'failed', 'frozen']) {
      const cell = page.locator(`tr.queue[data-queue="${queue}"] td.count[data-status="${status}"]`);
      assert.equal(await textOf(cell), String(expected[`${queue}/${status}`] ?? 0), `${queue}/${status}`);
    }
  }
  assert.equal(expected['default/success'], 2);
  assert.equal(expected['default/frozen'], 1);
  assert.equal(expected['default/pending'], 1);
  // The paused queue is marked, and offers Resume.
  assert.deepEqual(summary.pausedQueues, ['reports']);
  await page.locator('tr.queue[data-queue="reports"] .badge.paused').waitFor({ state: 'visible' });
  assert.equal(await page.locator('tr.queue[data-queue="default"] .badge.paused').isVisible(), false);
  assert.equal(await textOf(page.locator('tr.queue[data-queue="reports"] button[data-action="resume"]')), 'Resume');
  assert.match(await textOf(page.locator('#queue-summary')), /^2 queues · 1 pending · 3 success · 1 frozen · 1 paused$/);

  // The default listing is the failed and frozen jobs: the ledger job, with its error and payload.
  assert.deepEqual(await shownJobs(page), [jobs.ledger]);
  const row = jobRow(page, jobs.ledger);
  assert.equal(await textOf(row.locator('.job-kind')), 'sync-ledger');
  assert.equal(await textOf(row.locator('td.queue')), 'default');
  assert.equal(await textOf(row.locator('.badge.status')), 'frozen');
  assert.equal(await textOf(row.locator('td.attempts')), '1 / 0');
  const api = await octopd.job(jobs.ledger);
  const error = row.locator('details.job-error');
  assert.equal(await error.locator('.error-message').isVisible(), false); // collapsed until clicked
  assert.match(await textOf(error.locator('.error-summary')), new RegExp(LEDGER_ERROR));
  await error.locator('summary').click();
  await error.locator('.error-message').waitFor({ state: 'visible' });
  assert.equal(await textOf(error.locator('.error-message')), api.lastError.trim());
  const payload = row.locator('details.payload');
  assert.equal(await textOf(payload.locator('.payload-preview')), F.jsonPreview(api.payload, 48));
  await payload.locator('summary').click();
  await payload.locator('.payload-json').waitFor({ state: 'visible' });
  const shown = await payload.locator('.payload-json').textContent();
  assert.match(shown, /\n {2}"account": "EU-42"/); // indented
  assert.match(shown, /"amount": 12\.5,/);
  // Every digit, as enqueued: the API keeps them, and so does the page (format.js parseJsonKeepingDigits).
  assert.match(shown, /\n {2}"ref": 123456789012345678901234567890[,\n]/);
  assert.match(shown, /\n {2}"rate": 0\.12345678901234567890123[,\n]/);
  assert.match(shown, /\n {2}"floor": -9223372036854775809[,\n]/);
  // Expanded stays expanded across live refreshes.
  await nextRefresh(page);
  assert.equal(await error.evaluate((d) => d.open), true);
  assert.equal(await payload.evaluate((d) => d.open), true);

  // The sparkline: a point in the bucket where the jobs finished, its value what the stats API says.
  const stats = (await octopd.api('GET', '/api/octop/v1/jobs/stats?window=1h&bucket=60s')).body;
  assert.equal(stats.buckets.length, 60);
  assert.equal(stats.totals.succeeded, 3);
  assert.equal(stats.totals.frozen, 1);
  const busy = stats.buckets.filter((b) => b.succeeded + b.frozen > 0);
  assert.ok(busy.length >= 1 && busy.length <= 2, 'all finished within a minute or two');
  const points = page.locator('#spark-throughput circle.spark-point');
  assert.deepEqual(await points.evaluateAll((cs) => cs.map((c) => [c.dataset.t, Number(c.dataset.value)])),
    busy.map((b) => [b.t, b.succeeded + b.frozen]));
  assert.equal(await page.locator('#spark-throughput path.spark-line').count(), 1);
  assert.ok(await page.locator('#spark-latency circle.spark-point').count() >= 1, 'a latency point');
  assert.equal(await textOf(page.locator('#spark-throughput-value')), '3 succeeded · 1 frozen');

  await page.evaluate(() => window.scrollTo(0, 0));
  mkdirSync(screenshotDir, { recursive: true });
  const file = path.join(screenshotDir, 'queue.png');
  await page.screenshot({ path: file, fullPage: true });
  assert.ok(existsSync(file));
});

test('Retry runs a frozen job again; Cancel cancels a pending one; 409 and 404 read as sentences', async (t) => {
  const { octopd, page, jobs } = await setup(t);
  const row = jobRow(page, jobs.ledger);

  // Cancel on a frozen job: the API's 409.
  await row.locator('button[data-action="cancel"]').click();
  const conflict = row.locator('.action-message[data-kind="error"] .text');
  await conflict.waitFor({ timeout: 5000 });
  assert.equal(await textOf(conflict), `Conflict: Job ${jobs.ledger} has already finished (HTTP 409)`);

  // Retry, with the ledger now reachable: it runs again (attempt 2) and succeeds.
  writeFileSync(octopd.marker('ledger.ok'), '');
  await row.locator('button[data-action="retry"]').click();
  await row.locator('.action-message[data-kind="ok"]').waitFor({ timeout: 5000 });
  const retried = await octopd.waitForJob(jobs.ledger, 'success');
  assert.equal(retried.attempt, 2);
  assert.equal(retried.lastError, null);

  // A 404 from the real API: the click is re-addressed to a job octopd does not have.
  const missing = '00000000-0000-4000-8000-000000000000';
  await page.selectOption('#job-status', 'success');
  await jobRow(page, jobs.greets[0]).waitFor({ timeout: 10000 });
  await page.route(`**/jobs/${jobs.greets[0]}/retry`, (route) =>
    route.continue({ url: route.request().url().replace(jobs.greets[0], missing) }));
  const greet = jobRow(page, jobs.greets[0]);
  await greet.locator('button[data-action="retry"]').click();
  const notFound = greet.locator('.action-message[data-kind="error"] .text');
  await notFound.waitFor({ timeout: 5000 });
  assert.equal(await textOf(notFound), `Not found: Job ${missing} does not exist (HTTP 404)`);
  // Retry on a succeeded job: the other 409.
  await page.unroute(`**/jobs/${jobs.greets[0]}/retry`);
  await greet.locator('button[data-action="retry"]').click();
  await page.waitForFunction((id) => {
    const m = document.querySelector(`tr.job[data-job="${id}"] .action-message[data-kind="error"] .text`);
    return m && m.textContent.includes('is success');
  }, jobs.greets[0], { timeout: 5000 });
  assert.equal(await textOf(notFound),
    `Conflict: Job ${jobs.greets[0]} is success, only failed or frozen jobs can be retried (HTTP 409)`);

  // Cancel on the pending job due in an hour.
  await page.selectOption('#job-status', 'pending');
  const later = jobRow(page, jobs.later);
  await later.waitFor({ timeout: 10000 });
  assert.match(await textOf(later.locator('td.when .abs')), /^due /);
  await later.locator('button[data-action="cancel"]').click();
  await later.locator('.action-message[data-kind="ok"]').waitFor({ timeout: 5000 });
  const cancelled = await octopd.waitForJob(jobs.later, 'frozen');
  assert.equal(cancelled.lastError, 'Job was cancelled');
  // The row shows what the API answered, then leaves the pending list once its message is gone.
  assert.equal(await textOf(later.locator('.badge.status')), 'frozen');
});

test('Cancel on a running job asks its node to stop it: the row says so, and the job ends frozen', async (t) => {
  const { octopd, page } = await setup(t, { hash: '#/queue?status=running' });
  const id = await octopd.enqueue({ kind: 'slow-export', queue: 'slow', maxRetries: 3 });
  await octopd.waitForJob(id, 'running');
  const row = jobRow(page, id);
  await row.waitFor({ timeout: 10000 });
  await row.locator('button[data-action="cancel"]').click();
  const message = row.locator('.action-message[data-kind="ok"] .text');
  await message.waitFor({ timeout: 5000 });
  assert.equal(await textOf(message), 'Stop requested: it ends frozen unless it finishes first.');
  // The command ignores SIGTERM, so it is still running when the API answers (the message above depends on
  // that) and is killed after its 2 s killGrace; a stopped attempt is not retried.
  const stopped = await octopd.waitForJob(id, 'frozen', { timeout: 20000 });
  assert.equal(stopped.lastError, 'Job was cancelled');
  assert.equal(stopped.attempt, 1);
});

test('filters by status and kind narrow the table and survive a reload through the hash', async (t) => {
  const { octopd, page, jobs } = await setup(t, { hash: '#/queue?status=all' });
  await waitFor(async () => (await shownJobs(page)).length === 5, { what: 'all 5 jobs listed' });
  assert.equal(await page.inputValue('#job-status'), 'all');

  await page.selectOption('#job-status', 'success');
  await page.waitForFunction(() => location.hash === '#/queue?status=success');
  await waitFor(async () => (await shownJobs(page)).length === 3, { what: 'the 3 succeeded jobs' });
  assert.deepEqual((await shownJobs(page)).sort(), [...jobs.greets, jobs.report].sort());

  await page.fill('#job-kind', 'greet');
  await page.locator('#job-kind').press('Enter');
  await page.waitForFunction(() => location.hash === '#/queue?kind=greet&status=success');
  await waitFor(async () => (await shownJobs(page)).length === 2, { what: 'the 2 succeeded greets' });
  assert.deepEqual((await shownJobs(page)).sort(), [...jobs.greets].sort());
  assert.deepEqual(await page.locator('tr.job').evaluateAll((rs) => [...new Set(rs.map((r) => r.dataset.kind))]), ['greet']);
  assert.match(await textOf(page.locator('#activity-note')), /greet/); // the sparkline follows the kind

  // A reload keeps both filters.
  await page.reload();
  await page.waitForSelector('#page-queue[data-refreshes]', { timeout: 15000 });
  assert.equal(await page.inputValue('#job-status'), 'success');
  assert.equal(await page.inputValue('#job-kind'), 'greet');
  await waitFor(async () => (await shownJobs(page)).length === 2, { what: 'the 2 succeeded greets after a reload' });

  // A kind with nothing of it says so.
  await page.fill('#job-kind', 'no-such-kind');
  await page.locator('#job-kind').press('Enter');
  await page.locator('#jobs-empty').waitFor({ state: 'visible', timeout: 5000 });
  assert.equal(await textOf(page.locator('#jobs-empty')), 'No success jobs of kind no-such-kind.');

  // Back to Tasks and to the Queue: the nav follows the route, and the Tasks page still works.
  await page.click('.nav-item[data-page="tasks"]');
  await page.waitForSelector('tr.task[data-task="heartbeat"]', { timeout: 15000 });
  assert.equal(await page.locator('#page-queue').isVisible(), false);
  assert.equal(await page.locator('.nav-item.current').getAttribute('data-page'), 'tasks');
  assert.equal(await page.title(), 'octop · Tasks');
  // The Tasks page's actions stay inside the card in a window too narrow for the table (they used to sit
  // past the right edge, behind a horizontal scrollbar at the bottom of the table).
  await page.setViewportSize({ width: 1000, height: 800 });
  const edges = await page.evaluate(() => {
    const button = document.querySelector('tr.task[data-task="heartbeat"] button[data-action="cancel"]');
    return { button: button.getBoundingClientRect().right, card: button.closest('section').getBoundingClientRect().right };
  });
  assert.ok(edges.button <= edges.card, `Cancel (right edge ${edges.button}) within the card (${edges.card})`);
  await page.setViewportSize({ width: 1440, height: 900 });
  await page.click('.nav-item[data-page="queue"]');
  await page.locator('#page-queue').waitFor({ state: 'visible' });
  assert.equal(await page.title(), 'octop · Queue');
  assert.ok(octopd.port > 0);
});

test('with a token configured, the Queue page asks for it once and its actions work', async (t) => {
  const { octopd, page, jobs } = await setup(t, { token: TOKEN });
  assert.equal((await octopd.api('POST', `/api/octop/v1/jobs/${jobs.ledger}/retry`)).status, 401);

  const row = jobRow(page, jobs.ledger);
  await row.locator('button[data-action="retry"]').click();
  await page.locator('#token-dialog[open]').waitFor({ timeout: 5000 });
  await page.fill('#token-input', TOKEN);
  await page.click('#token-submit');
  await page.locator('#token-dialog').waitFor({ state: 'hidden', timeout: 5000 });
  await row.locator('.action-message[data-kind="ok"]').waitFor({ timeout: 5000 });
  // It ran again (and, the ledger still unreachable, froze again after its one more attempt).
  const again = await waitFor(async () => {
    const j = await octopd.job(jobs.ledger);
    return j.attempt === 2 && j.status === 'frozen' ? j : null;
  }, { what: 'the retried job to run its second attempt' });
  assert.match(again.lastError, new RegExp(LEDGER_ERROR));
  assert.equal(await page.evaluate(() => sessionStorage.getItem('octop.token')), TOKEN);

  // The next action uses the kept token without asking.
  await page.selectOption('#job-status', 'pending');
  const later = jobRow(page, jobs.later);
  await later.locator('button[data-action="cancel"]').click();
  await later.locator('.action-message[data-kind="ok"]').waitFor({ timeout: 5000 });
  await octopd.waitForJob(jobs.later, 'frozen');
  assert.equal(await page.locator('#token-dialog').isVisible(), false);

  // Pause goes through the same token.
  await page.click('tr.queue[data-queue="default"] button[data-action="pause"]');
  await page.locator('tr.queue[data-queue="default"] .badge.paused').waitFor({ state: 'visible', timeout: 5000 });
  assert.deepEqual((await octopd.api('GET', '/api/octop/v1/jobs/summary')).body.pausedQueues, ['default']);
});
