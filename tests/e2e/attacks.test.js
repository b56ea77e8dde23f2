// A hostile web page against a loopback octopd, in headless Debian chromium (docs/reliability.md, "Threat
// model"): a page on another origin tries to enqueue a job, trigger a task and pause a queue (no-cors fetches,
// a CORS fetch, a form post), and a DNS-rebinding name (mapped to 127.0.0.1 in chromium's resolver) tries to
// read the API. Each attempt reaches octopd and is refused, and nothing is written. The other e2e files show
// the dashboard itself working under the same checks.
import { after, test } from 'node:test';
import assert from 'node:assert/strict';
import http from 'node:http';
import { existsSync } from 'node:fs';
import { Octopd, openContext, closeSharedBrowser, waitFor } from './harness.js';

after(closeSharedBrowser);

// The attacker's site: one page, on a port of its own (another origin).
async function attackerSite(octopdBase) {
  const page = `<!doctype html><title>cute cats</title>
<iframe name="sink" style="display:none"></iframe>
<form id="f" method="POST" target="sink" enctype="text/plain"
      action="${octopdBase}/api/octop/v1/queues/default/pause"><input name='{"x":"' value='"}'></form>
<script>
  const target = ${JSON.stringify(octopdBase)};
  const job = JSON.stringify({ kind: 'greet', payload: { from: 'attacker' } });
  const attempts = [
    fetch(target + '/api/octop/v1/jobs', { method: 'POST', mode: 'no-cors', body: job,
      headers: { 'Content-Type': 'text/plain' } }),
    fetch(target + '/api/demo/.backstage/scheduler/v1/tasks/rebuild-index/trigger', { method: 'POST', mode: 'no-cors' }),
    fetch(target + '/api/octop/v1/jobs', { method: 'POST', body: job, headers: { 'Content-Type': 'application/json' } }),
    fetch(target + '/api/octop/v1/jobs').then((r) => r.text()),
  ];
  Promise.allSettled(attempts).then((results) => {
    window.readable = results[3].status === 'fulfilled' ? results[3].value : null;
    document.getElementById('f').submit();
    document.title = 'attacked';
  });
</script>`;
  const server = http.createServer((req, res) => {
    res.writeHead(200, { 'Content-Type': 'text/html; charset=utf-8' });
    res.end(page);
  });
  await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
  return { server, base: `http://127.0.0.1:${server.address().port}` };
}

test('a page on another origin changes nothing, and a rebinding name reads nothing', async (t) => {
  const octopd = await Octopd.start({});
  const site = await attackerSite(octopd.base);
  const browser = await openContext({ hostResolverRules: 'MAP rebind.test 127.0.0.1' });
  t.after(async () => {
    await browser.close();
    site.server.close();
    const exit = await octopd.stop();
    assert.deepEqual(exit, { code: 0, signal: null }, `octopd stopped gracefully; its output:\n${octopd.output}`);
  });

  // Every answer octopd gave the attacking page, as chromium received it.
  const answers = [];
  browser.page.on('response', (r) => {
    if (r.url().startsWith(octopd.base)) answers.push({ method: r.request().method(), url: r.url(), status: r.status() });
  });
  await browser.page.goto(`${site.base}/`);
  await waitFor(async () => (await browser.page.title()) === 'attacked', { what: 'the attack script to finish' });
  const posts = await waitFor(() => {
    const p = answers.filter((a) => a.method === 'POST');
    return p.length >= 3 && p;
  }, { what: 'octopd to answer the three POSTs that chromium sends (no-cors fetches and the form)' });
  for (const a of posts) assert.equal(a.status, 403, `${a.method} ${a.url} was refused: ${JSON.stringify(answers)}`);
  // The CORS fetch with a JSON body is preflighted; octopd grants no CORS, so chromium never sends the POST.
  assert.equal(await browser.page.evaluate(() => window.readable), null, 'the cross-origin read was blocked');

  // Nothing was written: no job, no run, no paused queue.
  const jobs = await octopd.api('GET', '/api/octop/v1/jobs');
  assert.equal(jobs.status, 200);
  assert.deepEqual(jobs.body.jobs, [], 'no job was enqueued');
  const summary = await octopd.api('GET', '/api/octop/v1/jobs/summary');
  assert.deepEqual(summary.body.pausedQueues, [], 'no queue was paused');
  const task = await octopd.task('demo', 'rebuild-index');
  assert.equal(task.taskState.lastRunEndedAt, undefined, 'the task did not run');
  assert.equal(existsSync(octopd.marker('rebuild-index.marker')), false);

  // DNS rebinding: the attacker's name now resolves to 127.0.0.1, so a page under it is same-origin with
  // octopd's port. Its Host header names no name of this server: the dashboard and the API are refused.
  const port = new URL(octopd.base).port;
  for (const target of ['/', '/api/octop/v1/jobs', '/api/demo/.backstage/scheduler/v1/tasks']) {
    const response = await browser.page.goto(`http://rebind.test:${port}${target}`);
    assert.equal(response.status(), 403, `GET ${target} under a rebinding name`);
    if (target !== '/') assert.match(await response.text(), /"name":"NotAllowedError"/);
  }
  // The probes answer under any name (platforms address them by names of their own).
  assert.equal((await browser.page.goto(`http://rebind.test:${port}/healthz`)).status(), 200);
});
