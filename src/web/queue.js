// The Queue page (#/queue): per-queue counts by status with the paused state (GET /jobs/summary), the last
// hour's throughput and pickup latency as two hand-drawn SVG sparklines (GET /jobs/stats, every 10 s: it
// scans the hour's finished rows), and a table of jobs -- by default the latest failed and frozen -- with
// their error and payload, Retry / Cancel, and Pause / Resume per queue. The kind and status filters live in
// the URL hash (#/queue?kind=greet&status=frozen), so a reload keeps them. Polls every 2 s while on screen
// and visible; rows are keyed by job id and updated in place, so an expanded error or payload stays open.
(function () {
  'use strict';

  const F = window.OctopFormat;
  const S = window.OctopShell;
  const { $, el, setText, getJson, post, setLive, timeBlock } = S;
  const POLL_MS = 2000;
  const STATS_EVERY_MS = 10000;
  const JOB_LIMIT = 50;
  const STATUSES = ['pending', 'running', 'success', 'failed', 'frozen'];
  const STATUS_FILTERS = ['', 'failed', 'frozen', 'pending', 'running', 'success', 'all'];
  const API = 'api/octop/v1';

  const pageEl = $('page-queue');
  const countsBody = $('queue-counts').querySelector('tbody');
  const jobsBody = $('jobs').querySelector('tbody');
  const statusSelect = $('job-status');
  const kindInput = $('job-kind');

  const view = {
    filter: { status: '', kind: '' },
    queues: new Map(), // name -> {tr, cells, pause, message, messageTimer}
    rows: new Map(), // job id -> row
    kinds: new Set(),
    stats: null,
    statsAt: 0,
    statsKey: null,
    started: 0, // loads begun, and `refreshes` the loads finished (data-started / data-refreshes, for tests)
    refreshes: 0,
    lastOk: null,
    generation: 0, // bumped on a filter change: a poll started before it is not rendered
  };

  function jobsUrl(params) {
    const search = new URLSearchParams();
    for (const [k, v] of Object.entries(params)) if (v) search.set(k, v);
    return `${API}/jobs?${search}`;
  }

  // ---- Filters and the hash ----------------------------------------------------------------------------

  function applyParams(params) {
    const status = STATUS_FILTERS.includes(params.status || '') ? params.status || '' : '';
    const kind = params.kind || '';
    const changed = status !== view.filter.status || kind !== view.filter.kind;
    view.filter = { status, kind };
    statusSelect.value = status;
    if (kindInput.value.trim() !== kind) kindInput.value = kind;
    return changed;
  }

  function filterChanged() {
    const next = { status: statusSelect.value, kind: kindInput.value.trim() };
    if (next.status === view.filter.status && next.kind === view.filter.kind) return;
    view.filter = next;
    S.replaceHash(F.formatRoute('queue', { kind: next.kind, status: next.status }));
    view.generation++;
    view.statsKey = null;
    refresh();
  }

  let kindTimer = null;
  statusSelect.addEventListener('change', filterChanged);
  kindInput.addEventListener('change', filterChanged);
  kindInput.addEventListener('input', () => {
    clearTimeout(kindTimer);
    kindTimer = setTimeout(filterChanged, 350);
  });

  // ---- Loading -----------------------------------------------------------------------------------------

  async function loadJobs(filter) {
    const kind = filter.kind || undefined;
    if (filter.status === '') {
      // The dead letters and the ones waiting for a retry, merged newest first (the API lists one status).
      const [failed, frozen] = await Promise.all([
        getJson(jobsUrl({ status: 'failed', kind, limit: JOB_LIMIT })),
        getJson(jobsUrl({ status: 'frozen', kind, limit: JOB_LIMIT })),
      ]);
      return [...failed.jobs, ...frozen.jobs]
        .sort((a, b) => (a.createdAt < b.createdAt ? 1 : a.createdAt > b.createdAt ? -1 : a.id < b.id ? 1 : -1))
        .slice(0, JOB_LIMIT);
    }
    const status = filter.status === 'all' ? undefined : filter.status;
    return (await getJson(jobsUrl({ status, kind, limit: JOB_LIMIT }))).jobs;
  }

  async function loadOnce() {
    const generation = view.generation;
    const filter = { ...view.filter };
    pageEl.dataset.loading = 'true';
    view.started++;
    pageEl.dataset.started = String(view.started);
    const statsKey = filter.kind;
    const wantStats = view.statsKey !== statsKey || Date.now() - view.statsAt >= STATS_EVERY_MS;
    try {
      const statsUrl = `${API}/jobs/stats?window=1h&bucket=60s${filter.kind ? `&kind=${encodeURIComponent(filter.kind)}` : ''}`;
      const [summary, jobs, stats] = await Promise.all([
        getJson(`${API}/jobs/summary`),
        loadJobs(filter).catch((e) => ({ error: e.message })),
        wantStats ? getJson(statsUrl).catch((e) => ({ error: e.message })) : Promise.resolve(null),
      ]);
      if (generation === view.generation) {
        renderCounts(summary);
        // Redrawn only when fetched, so a tooltip being read is not replaced every 2 s.
        if (stats && !stats.error) {
          view.stats = stats;
          view.statsAt = Date.now();
          view.statsKey = statsKey;
          renderStats(null);
        } else if (stats) {
          renderStats(stats.error);
        }
        renderJobs(jobs);
      }
      view.lastOk = Date.now();
      S.showConnectionError($('queue-connection-error'), null, POLL_MS);
      if (!document.hidden && S.isCurrent('queue')) {
        setLive('live', `Live · updated ${F.formatAbsolute(view.lastOk, view.lastOk)}`);
      }
    } catch (e) {
      const reason = e.name === 'AbortError' ? 'the request timed out' : e.message;
      S.showConnectionError($('queue-connection-error'), reason, POLL_MS);
      if (S.isCurrent('queue')) setLive('error', 'Disconnected');
    }
    view.refreshes++;
    pageEl.dataset.refreshes = String(view.refreshes);
    delete pageEl.dataset.loading;
  }

  let inFlight = null;
  let again = false;
  // One load at a time; a refresh asked for during one (a filter change, an action) runs right after it.
  function refresh() {
    if (inFlight) {
      again = true;
      return inFlight.then(() => inFlight || Promise.resolve());
    }
    inFlight = loadOnce().finally(() => {
      inFlight = null;
      if (again) {
        again = false;
        refresh();
      }
    });
    return inFlight;
  }

  const live = S.poller('queue', POLL_MS, refresh);

  // ---- Counts per queue --------------------------------------------------------------------------------

  function createQueueRow(name) {
    const tr = el('tr', 'queue');
    tr.dataset.queue = name;
    const nameCell = el('td', 'queue-name');
    const label = el('span', 'queue-id', name);
    const paused = el('span', 'badge paused', 'paused');
    paused.hidden = true;
    nameCell.append(label, paused);
    tr.append(nameCell);
    const cells = {};
    for (const status of STATUSES) {
      const td = el('td', `num count`);
      td.dataset.status = status;
      tr.append(td);
      cells[status] = td;
    }
    const actions = el('td', 'actions');
    const pause = el('button', 'button secondary small', 'Pause');
    pause.type = 'button';
    pause.dataset.action = 'pause';
    const message = el('div', 'action-message');
    message.setAttribute('role', 'status');
    message.hidden = true;
    const buttons = el('div', 'buttons');
    buttons.append(pause);
    actions.append(buttons, message);
    tr.append(actions);
    const row = { tr, cells, paused, pause, message, messageTimer: null, name, isPaused: false };
    pause.addEventListener('click', () => pauseOrResume(row));
    return row;
  }

  function renderCounts(summary) {
    const byQueue = new Map();
    for (const line of summary.counts || []) {
      if (!byQueue.has(line.queue)) byQueue.set(line.queue, {});
      byQueue.get(line.queue)[line.status] = line;
    }
    const paused = new Set(summary.pausedQueues || []);
    for (const q of paused) if (!byQueue.has(q)) byQueue.set(q, {});
    const names = [...byQueue.keys()].sort();
    const totals = Object.fromEntries(STATUSES.map((s) => [s, 0]));
    let previous = null;
    for (const name of names) {
      let row = view.queues.get(name);
      if (!row) {
        row = createQueueRow(name);
        view.queues.set(name, row);
      }
      const expected = previous ? previous.tr.nextSibling : countsBody.firstChild;
      if (expected !== row.tr) countsBody.insertBefore(row.tr, expected);
      previous = row;
      const lines = byQueue.get(name);
      for (const status of STATUSES) {
        const line = lines[status];
        const n = line ? line.count : 0;
        totals[status] += n;
        setText(row.cells[status], String(n));
        row.cells[status].dataset.zero = n === 0 ? 'true' : 'false';
        const delay = line && line.averageDelaySeconds !== null && line.averageDelaySeconds !== undefined
          ? `; average ${status === 'pending' || status === 'failed' ? 'wait so far' : 'pickup delay'} ` +
            F.formatMs(line.averageDelaySeconds * 1000)
          : '';
        row.cells[status].title = `${n} ${status}${delay}`;
      }
      row.isPaused = paused.has(name);
      row.paused.hidden = !row.isPaused;
      row.tr.dataset.paused = String(row.isPaused);
      setText(row.pause, row.isPaused ? 'Resume' : 'Pause');
      row.pause.dataset.action = row.isPaused ? 'resume' : 'pause';
    }
    for (const [name, row] of view.queues) {
      if (!byQueue.has(name)) {
        row.tr.remove();
        view.queues.delete(name);
      }
    }
    $('queue-counts-empty').hidden = names.length !== 0;
    $('queue-counts').hidden = names.length === 0;
    const parts = [`${names.length} queue${names.length === 1 ? '' : 's'}`];
    for (const status of STATUSES) if (totals[status]) parts.push(`${totals[status]} ${status}`);
    if (paused.size) parts.push(`${paused.size} paused`);
    setText($('queue-summary'), parts.join(' · '));
  }

  async function pauseOrResume(row) {
    const action = row.isPaused ? 'resume' : 'pause';
    row.pause.disabled = true;
    try {
      const result = await post(`${API}/queues/${encodeURIComponent(row.name)}/${action}`, 'queue actions');
      if (result.ok) S.showMessage(row, 'ok', action === 'pause' ? 'Paused: nothing new starts.' : 'Resumed.');
      else S.showMessage(row, 'error', result.message);
    } catch (e) {
      S.showMessage(row, 'error', `Request failed: ${e.name === 'AbortError' ? 'timed out' : e.message}`);
    } finally {
      row.pause.disabled = false;
    }
    await refresh();
  }

  // ---- Sparklines --------------------------------------------------------------------------------------

  const SVG_NS = 'http://www.w3.org/2000/svg';
  function svgEl(tag, attrs) {
    const e = document.createElementNS(SVG_NS, tag);
    for (const [k, v] of Object.entries(attrs || {})) e.setAttribute(k, String(v));
    return e;
  }

  // Redraws one sparkline: a baseline, the path, and a circle per bucket with data (its title the bucket's
  // time and value), so a hover reads the figure and a test can find the point.
  function drawSpark(figure, buckets, valueOf, describe) {
    const svg = figure.querySelector('svg');
    // The drawing's width is the element's own, so the points stay round (no non-uniform scaling).
    const height = Number(svg.getAttribute('viewBox').split(' ')[3]);
    const width = Math.max(120, Math.round(svg.clientWidth || 360));
    svg.setAttribute('viewBox', `0 0 ${width} ${height}`);
    const desc = svg.querySelector('desc');
    svg.replaceChildren(desc);
    const values = buckets.map(valueOf);
    const geometry = F.sparkline(values, { width, height, pad: 4 });
    svg.append(svgEl('line', { class: 'spark-base', x1: 0, x2: width, y1: height - 4, y2: height - 4 }));
    if (geometry.path) svg.append(svgEl('path', { class: 'spark-line', d: geometry.path }));
    const now = Date.now();
    for (const p of geometry.points) {
      const bucket = buckets[p.index];
      if (!p.value) continue; // zero buckets are on the baseline: the path shows them
      const c = svgEl('circle', { class: 'spark-point', cx: p.x, cy: p.y, r: 2.4 });
      c.dataset.t = bucket.t;
      c.dataset.value = String(p.value);
      const title = svgEl('title');
      title.textContent = `${F.formatAbsolute(Date.parse(bucket.t), now)}: ${describe(bucket)}`;
      c.append(title);
      svg.append(c);
    }
    figure.dataset.points = String(svg.querySelectorAll('circle.spark-point').length);
  }

  function renderStats(error) {
    const stats = view.stats;
    setText($('activity-note'), error ? `cannot load: ${error}` :
      view.filter.kind ? `finished ${view.filter.kind} jobs per minute` : 'finished jobs per minute');
    if (!stats) return;
    const buckets = stats.buckets || [];
    drawSpark($('spark-throughput'), buckets, (b) => b.succeeded + b.frozen,
      (b) => `${b.succeeded} succeeded, ${b.frozen} frozen`);
    drawSpark($('spark-latency'), buckets, (b) => b.avgLatencyMs,
      (b) => `pickup ${F.formatMs(b.avgLatencyMs)} (max ${F.formatMs(b.maxLatencyMs)}), run ${F.formatMs(b.avgRunMs)}`);
    const totals = stats.totals || { succeeded: 0, frozen: 0 };
    setText($('spark-throughput-value'),
      `${totals.succeeded} succeeded · ${totals.frozen} frozen`);
    let weighted = 0;
    let n = 0;
    for (const b of buckets) {
      if (b.avgLatencyMs !== null && b.succeeded) {
        weighted += b.avgLatencyMs * b.succeeded;
        n += b.succeeded;
      }
    }
    setText($('spark-latency-value'), n ? `avg ${F.formatMs(weighted / n)}` : 'no jobs succeeded');
  }

  // ---- The jobs table ----------------------------------------------------------------------------------

  function createJobRow(id) {
    const tr = el('tr', 'job');
    tr.dataset.job = id;
    const cells = {};
    for (const name of ['job', 'queue', 'status', 'attempts', 'when', 'error', 'payload', 'actions']) {
      cells[name] = el('td', name);
      tr.append(cells[name]);
    }
    const kind = el('span', 'job-kind');
    const idText = el('code', 'job-id', id.slice(0, 8));
    idText.title = id;
    cells.job.append(kind, idText);
    const queue = el('span', 'queue-id');
    cells.queue.append(queue);
    const status = el('span', 'badge status');
    cells.status.append(status);
    cells.attempts.classList.add('num');
    const when = el('div', 'when');
    cells.when.append(when);

    const [retry, cancel, message] = S.actionCell(cells.actions, ['Retry', 'retry'], ['Cancel', 'cancel']);

    const row = { tr, id, cells, kind, queue, status, when, retry, cancel, message, messageTimer: null,
      errorKey: undefined, payloadKey: undefined };
    retry.addEventListener('click', () => act(row, 'retry'));
    cancel.addEventListener('click', () => act(row, 'cancel'));
    return row;
  }

  // The last error behind a <details>; rebuilt only when it changes, so an expanded one stays open.
  function renderError(row, text) {
    const key = text === null || text === undefined ? null : String(text);
    if (key === row.errorKey) return;
    row.errorKey = key;
    row.cells.error.replaceChildren();
    if (key === null) {
      row.cells.error.append(el('span', 'muted', '—'));
      return;
    }
    const firstLine = key.split('\n')[0];
    const details = el('details', 'run-error job-error');
    const summary = el('summary');
    summary.append(el('span', 'error-summary', firstLine.length > 70 ? `${firstLine.slice(0, 69)}…` : firstLine));
    const body = el('div', 'error-body');
    body.append(el('pre', 'error-message', key));
    details.append(summary, body);
    row.cells.error.append(details);
  }

  function renderPayload(row, payload, omittedBytes) {
    const key = omittedBytes !== undefined ? `omitted:${omittedBytes}`
      : JSON.stringify(payload === undefined ? null : payload);
    if (key === row.payloadKey) return;
    row.payloadKey = key;
    row.cells.payload.replaceChildren();
    if (omittedBytes !== undefined) {
      // Left out of the list for its size (the API's byte budget); the job's own page has it.
      row.cells.payload.append(el('span', 'payload-omitted', `${omittedBytes.toLocaleString('en')} bytes, not listed`));
      return;
    }
    const details = el('details', 'payload');
    const summary = el('summary');
    summary.append(el('code', 'payload-preview', F.jsonPreview(payload, 48)));
    const pre = el('pre', 'payload-json', F.prettyJson(payload));
    details.append(summary, pre);
    row.cells.payload.append(details);
  }

  function renderJobRow(row, job, now) {
    setText(row.kind, job.kind);
    setText(row.queue, job.queue);
    setText(row.status, job.status);
    row.status.dataset.value = job.status;
    row.tr.dataset.status = job.status;
    row.tr.dataset.kind = job.kind;
    setText(row.cells.attempts, `${job.attempt} / ${job.maxRetries}`);
    row.cells.attempts.title = `${job.attempt} attempt${job.attempt === 1 ? '' : 's'} used; max retries ${job.maxRetries}`;
    if (job.completedAt) timeBlock(row.when, job.completedAt, now, job.status === 'success' ? 'done ' : 'ended ');
    else if (job.status === 'running' && job.startedAt) timeBlock(row.when, job.startedAt, now, 'started ');
    else timeBlock(row.when, job.scheduledAt, now, Date.parse(job.scheduledAt) > now ? 'due ' : 'due since ');
    renderError(row, job.lastError);
    renderPayload(row, job.payload, job.payloadOmittedBytes);
  }

  function renderJobs(jobs) {
    const errorBanner = $('jobs-error');
    if (jobs && jobs.error) {
      errorBanner.hidden = false;
      setText(errorBanner, `Cannot load the jobs: ${jobs.error}`);
      return; // keep the last rows shown
    }
    errorBanner.hidden = true;
    const now = Date.now();
    const seen = new Set();
    let previous = null;
    for (const job of jobs) {
      seen.add(job.id);
      view.kinds.add(job.kind);
      let row = view.rows.get(job.id);
      if (!row) {
        row = createJobRow(job.id);
        view.rows.set(job.id, row);
      }
      const expected = previous ? previous.tr.nextSibling : jobsBody.firstChild;
      if (expected !== row.tr) jobsBody.insertBefore(row.tr, expected);
      previous = row;
      renderJobRow(row, job, now);
    }
    for (const [id, row] of view.rows) {
      if (seen.has(id)) {
        delete row.tr.dataset.stale;
      } else if (!row.message.hidden && row.tr.dataset.acted === 'true') {
        // It left the filtered list because of an action here: kept, marked, until its message goes.
        row.tr.dataset.stale = 'true';
      } else {
        row.tr.remove();
        view.rows.delete(id);
      }
    }
    const list = $('job-kinds');
    if (list.childElementCount !== view.kinds.size) {
      list.replaceChildren(...[...view.kinds].sort().map((k) => {
        const o = el('option');
        o.value = k;
        return o;
      }));
    }
    const what = statusSelect.options[statusSelect.selectedIndex].textContent;
    const kind = view.filter.kind ? ` of kind ${view.filter.kind}` : '';
    setText($('jobs-note'), `${jobs.length === JOB_LIMIT ? `latest ${JOB_LIMIT}` : jobs.length} · ${what}${kind}`);
    const empty = $('jobs-empty');
    empty.hidden = jobs.length !== 0;
    setText(empty, `No ${view.filter.status === '' ? 'failed or frozen' : view.filter.status === 'all' ? '' : view.filter.status} jobs${kind}.`.replace('No  jobs', 'No jobs'));
    $('jobs').hidden = jobsBody.childElementCount === 0; // a dimmed row an action just moved out still shows
  }

  async function act(row, action) {
    const button = action === 'retry' ? row.retry : row.cancel;
    button.disabled = true;
    button.setAttribute('aria-busy', 'true');
    try {
      const result = await post(`${API}/jobs/${encodeURIComponent(row.id)}/${action}`, 'retry and cancel');
      if (result.ok) {
        row.tr.dataset.acted = 'true';
        let status = '';
        try {
          const job = F.parseJsonKeepingDigits(result.body); // the API answers with the job as it is now
          status = job.status;
          renderJobRow(row, job, Date.now());
        } catch (e) {
          // Not the job's JSON: the next refresh shows it.
        }
        // A running job is asked to stop on whichever node runs it (docs/jobs.md, "Cancelling a running job").
        S.showMessage(row, 'ok', action === 'retry' ? 'Retrying: it runs again within moments.'
          : status === 'running' ? 'Stop requested: it ends frozen unless it finishes first.' : 'Cancelled.');
      } else {
        S.showMessage(row, 'error', result.message);
      }
    } catch (e) {
      S.showMessage(row, 'error', `Request failed: ${e.name === 'AbortError' ? 'timed out' : e.message}`);
    } finally {
      button.disabled = false;
      button.removeAttribute('aria-busy');
    }
    await refresh();
  }

  S.page('queue', {
    title: 'Queue',
    start(params, changed) {
      if (applyParams(params)) {
        view.generation++;
        view.statsKey = null;
      }
      if (changed || !live.armed()) live.tick();
      else refresh();
    },
    stop() {
      live.stop();
    },
  });
})();
