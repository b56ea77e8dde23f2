// The Tasks page (#/): polls every plugin's scheduler API every 2 s while the page is on screen and the tab
// is visible, renders one table per plugin, and sends Trigger / Cancel. Rows are keyed by plugin and task id
// and updated in place, so an open error, a pressed button or a message survives the refresh. Requests, the
// bearer token, the live indicator and messages come from OctopShell (shell.js).
(function () {
  'use strict';

  const F = window.OctopFormat;
  const S = window.OctopShell;
  const { $, el, setText, getJson, post, setLive, timeBlock } = S;
  const POLL_MS = 2000;

  const pluginsEl = $('plugins');

  const view = {
    plugins: new Map(), // pluginId -> {section, tbody, count, error, rows: Map taskId -> row}
    data: new Map(), // pluginId -> {tasks} | {error}
    order: [],
    lastOk: null,
    refreshes: 0,
  };

  function tasksUrl(pluginId) {
    return `api/${encodeURIComponent(pluginId)}/.backstage/scheduler/v1/tasks`;
  }

  // ---- Rendering ---------------------------------------------------------------------------------------

  function createPluginSection(pluginId) {
    const section = el('section', 'plugin');
    section.dataset.plugin = pluginId;
    const head = el('div', 'plugin-head');
    const title = el('h2', null);
    title.append(el('span', 'plugin-label', 'plugin'), el('span', 'plugin-id', pluginId));
    const count = el('span', 'plugin-count');
    head.append(title, count);
    const error = el('div', 'banner error');
    error.hidden = true;
    const wrap = el('div', 'table-wrap');
    const table = el('table', 'tasks');
    const thead = el('thead');
    const hr = el('tr');
    for (const h of ['Task', 'Cadence', 'State', 'Next run', 'Last run', 'Worker', '']) hr.append(el('th', null, h));
    thead.append(hr);
    const tbody = el('tbody');
    table.append(thead, tbody);
    wrap.append(table);
    const empty = el('p', 'empty', 'No tasks registered on this node for this plugin.');
    empty.hidden = true;
    section.append(head, error, wrap, empty);
    return { section, tbody, count, error, wrap, empty, rows: new Map() };
  }

  function createRow(pluginId, taskId) {
    const tr = el('tr', 'task');
    tr.dataset.plugin = pluginId;
    tr.dataset.task = taskId;
    const cells = {};
    for (const name of ['task', 'cadence', 'state', 'next', 'last', 'worker', 'actions']) {
      cells[name] = el('td', name);
      tr.append(cells[name]);
    }
    // Ids up to 40 characters never break; longer ones wrap anywhere rather than widen the table.
    const id = el('span', taskId.length > 40 ? 'task-id long' : 'task-id', taskId);
    const scope = el('span', 'badge scope');
    cells.task.append(id, scope);

    const words = el('div', 'cadence-words');
    const raw = el('code', 'cadence-raw');
    cells.cadence.append(words, raw);

    const status = el('span', 'badge status');
    const stateLines = el('div', 'lines');
    cells.state.append(status, stateLines);

    const next = el('div', 'when');
    cells.next.append(next);

    const lastWhen = el('div', 'when');
    const result = el('div', 'result');
    cells.last.append(lastWhen, result);

    const worker = el('span', 'badge worker');
    cells.worker.append(worker);

    const [trigger, cancel, message] = S.actionCell(cells.actions, ['Trigger', 'trigger'], ['Cancel', 'cancel']);

    const row = { tr, pluginId, taskId, scope, words, raw, status, stateLines, next, lastWhen, result, worker,
      trigger, cancel, message, resultKey: null, messageTimer: null };
    trigger.addEventListener('click', () => act(row, 'trigger'));
    cancel.addEventListener('click', () => act(row, 'cancel'));
    return row;
  }

  // The last run's outcome: "succeeded", or "failed" with the parsed error behind a <details>. Rebuilt only
  // when the outcome changes, so an expanded error stays open across refreshes.
  function renderResult(row, errorText, ended) {
    const hasError = errorText !== undefined && errorText !== null;
    const key = hasError ? `error:${errorText}` : ended ? 'ok' : 'none';
    if (key === row.resultKey) return;
    row.resultKey = key;
    row.result.replaceChildren();
    if (!hasError) {
      if (ended) row.result.append(el('span', 'badge ok', 'succeeded'));
      return;
    }
    const err = F.parseRunError(errorText);
    const details = el('details', 'run-error');
    const summary = el('summary');
    const firstLine = err.message.split('\n')[0];
    summary.append(el('span', 'badge fail', 'failed'),
      el('span', 'error-summary', firstLine.length > 90 ? firstLine.slice(0, 89) + '…' : firstLine));
    const body = el('div', 'error-body');
    body.append(el('div', 'error-name', err.name), el('pre', 'error-message', err.message));
    for (let cause = err.cause; cause; cause = cause.cause) {
      body.append(el('div', 'error-name', `caused by ${cause.name}`), el('pre', 'error-message', cause.message));
    }
    if (err.stack) body.append(el('div', 'error-name', 'stack'), el('pre', 'error-stack', err.stack));
    details.append(summary, body);
    row.result.append(details);
  }

  function renderRow(row, task, now) {
    const scope = task.scope || 'global';
    setText(row.scope, scope);
    row.scope.dataset.value = scope;

    const cadence = F.describeCadence(task.settings);
    setText(row.words, cadence.words);
    row.words.dataset.kind = cadence.kind;
    const timeout = task.settings && task.settings.timeoutAfterDuration;
    const rawText = cadence.phrased && cadence.kind !== 'manual' ? cadence.raw : '';
    setText(row.raw, rawText);
    row.raw.hidden = !rawText;
    row.words.title = `cadence ${cadence.raw}` + (timeout ? ` · timeout ${timeout}` : '') +
      (task.settings && task.settings.initialDelayDuration ? ` · initial delay ${task.settings.initialDelayDuration}` : '');

    const st = task.taskState;
    const status = st ? st.status : 'unknown';
    setText(row.status, st ? status : 'no state');
    row.status.dataset.value = status;
    row.tr.dataset.status = status;
    row.stateLines.replaceChildren();
    if (st && st.status === 'running') {
      if (st.startedAt) {
        const since = el('div', 'line');
        since.append(el('span', 'label', 'since '));
        const t = el('span');
        timeBlock(t, st.startedAt, now);
        since.append(t);
        row.stateLines.append(since);
      }
      if (st.timesOutAt) {
        const out = el('div', 'line');
        out.append(el('span', 'label', 'times out '));
        const t = el('span');
        timeBlock(t, st.timesOutAt, now);
        out.append(t);
        row.stateLines.append(out);
      }
    } else if (!st) {
      row.stateLines.append(el('div', 'line muted', 'its row is gone from the database'));
    }

    if (st && st.status === 'idle' && st.startsAt) {
      timeBlock(row.next, st.startsAt, now);
      if (Date.parse(st.startsAt) <= now) row.next.lastChild.textContent = 'due now';
    } else if (st && st.status === 'running') {
      row.next.replaceChildren(el('span', 'muted', 'after this run'));
    } else if (cadence.kind === 'manual') {
      row.next.replaceChildren(el('span', 'muted', 'when triggered'));
    } else {
      row.next.replaceChildren(el('span', 'muted', '—'));
    }

    if (st && st.lastRunEndedAt) {
      timeBlock(row.lastWhen, st.lastRunEndedAt, now, 'ended ');
    } else {
      row.lastWhen.replaceChildren(el('span', 'muted', 'never ran'));
    }
    renderResult(row, st ? st.lastRunError : undefined, Boolean(st && st.lastRunEndedAt));

    const worker = task.workerState ? task.workerState.status : 'none';
    setText(row.worker, worker === 'none' ? '—' : worker);
    row.worker.dataset.value = worker;
  }

  function matchesFilter(pluginId, taskId) {
    const q = $('filter').value.trim().toLowerCase();
    return !q || taskId.toLowerCase().includes(q) || pluginId.toLowerCase().includes(q);
  }

  function render() {
    const now = Date.now();
    let total = 0;
    let running = 0;
    let failed = 0;
    // Sections in the API's plugin order; sections of plugins that went away are removed.
    for (const [pluginId, p] of view.plugins) {
      if (!view.order.includes(pluginId)) {
        p.section.remove();
        view.plugins.delete(pluginId);
      }
    }
    let previous = null;
    for (const pluginId of view.order) {
      let p = view.plugins.get(pluginId);
      if (!p) {
        p = createPluginSection(pluginId);
        view.plugins.set(pluginId, p);
      }
      const expectedPosition = previous ? previous.nextSibling : pluginsEl.firstChild;
      if (expectedPosition !== p.section) pluginsEl.insertBefore(p.section, expectedPosition);
      previous = p.section;

      const data = view.data.get(pluginId);
      p.error.hidden = !(data && data.error);
      if (data && data.error) setText(p.error, `Cannot load this plugin's tasks: ${data.error}`);
      const tasks = data && data.tasks ? data.tasks : null;
      if (!tasks) continue; // keep the last rows shown when a refresh fails
      const seen = new Set();
      let previousRow = null;
      let shown = 0;
      for (const task of tasks) {
        seen.add(task.taskId);
        let row = p.rows.get(task.taskId);
        if (!row) {
          row = createRow(pluginId, task.taskId);
          p.rows.set(task.taskId, row);
        }
        const expected = previousRow ? previousRow.tr.nextSibling : p.tbody.firstChild;
        if (expected !== row.tr) p.tbody.insertBefore(row.tr, expected);
        previousRow = row;
        renderRow(row, task, now);
        row.tr.hidden = !matchesFilter(pluginId, task.taskId);
        if (!row.tr.hidden) shown++;
        total++;
        if (task.taskState && task.taskState.status === 'running') running++;
        if (task.taskState && task.taskState.lastRunError) failed++;
      }
      for (const [taskId, row] of p.rows) {
        if (!seen.has(taskId)) {
          row.tr.remove();
          p.rows.delete(taskId);
        }
      }
      setText(p.count, tasks.length === 1 ? '1 task' : `${tasks.length} tasks`);
      p.wrap.hidden = tasks.length === 0;
      p.empty.hidden = tasks.length !== 0;
      p.section.hidden = tasks.length > 0 && shown === 0;
    }
    $('empty').hidden = view.order.length !== 0 || view.lastOk === null;
    const parts = [`${view.order.length} plugin${view.order.length === 1 ? '' : 's'}`,
      `${total} task${total === 1 ? '' : 's'}`];
    if (running) parts.push(`${running} running`);
    if (failed) parts.push(`${failed} failed last run`);
    setText($('summary'), view.lastOk === null ? '' : parts.join(' · '));
  }

  function showConnectionError(message) {
    S.showConnectionError($('connection-error'), message, POLL_MS);
  }

  // ---- Polling -----------------------------------------------------------------------------------------

  let inFlight = null;

  async function loadOnce() {
    document.body.dataset.loading = 'true';
    try {
      const { plugins } = await getJson('api/octop/v1/plugins');
      const order = Array.isArray(plugins) ? plugins : [];
      const results = await Promise.all(order.map(async (pluginId) => {
        try {
          return [pluginId, await getJson(tasksUrl(pluginId))];
        } catch (e) {
          return [pluginId, { error: e.message }];
        }
      }));
      view.order = order;
      for (const [pluginId, data] of results) {
        const previous = view.data.get(pluginId);
        // A failed refresh keeps the last tasks shown, with the error above them.
        view.data.set(pluginId, data.error && previous ? { tasks: previous.tasks, error: data.error } : data);
      }
      for (const pluginId of [...view.data.keys()]) if (!order.includes(pluginId)) view.data.delete(pluginId);
      view.lastOk = Date.now();
      showConnectionError(null);
      if (!document.hidden && S.isCurrent('tasks')) {
        setLive('live', `Live · updated ${F.formatAbsolute(view.lastOk, view.lastOk)}`);
      }
    } catch (e) {
      const reason = e.name === 'AbortError' ? 'the request timed out' : e.message;
      showConnectionError(reason);
      if (S.isCurrent('tasks')) setLive('error', 'Disconnected');
    }
    view.refreshes++;
    document.body.dataset.refreshes = String(view.refreshes);
    delete document.body.dataset.loading;
    render();
  }

  function refresh() {
    if (!inFlight) inFlight = loadOnce().finally(() => { inFlight = null; });
    return inFlight;
  }

  const live = S.poller('tasks', POLL_MS, refresh);

  // ---- Actions -----------------------------------------------------------------------------------------

  function showMessage(row, kind, text) {
    S.showMessage(row, kind, text);
  }

  async function act(row, action) {
    const button = action === 'trigger' ? row.trigger : row.cancel;
    button.disabled = true;
    button.setAttribute('aria-busy', 'true');
    try {
      const url = `${tasksUrl(row.pluginId)}/${encodeURIComponent(row.taskId)}/${action}`;
      const result = await post(url);
      if (result.ok) {
        showMessage(row, 'ok', action === 'trigger' ? 'Triggered: it starts within moments.' : 'Cancel requested.');
      } else {
        showMessage(row, 'error', result.message);
      }
    } catch (e) {
      showMessage(row, 'error', `Request failed: ${e.name === 'AbortError' ? 'timed out' : e.message}`);
    } finally {
      button.disabled = false;
      button.removeAttribute('aria-busy');
    }
    await refresh();
  }

  $('filter').addEventListener('input', render);

  S.page('tasks', {
    title: 'Tasks',
    start() {
      live.tick();
    },
    stop() {
      live.stop();
    },
  });
})();
