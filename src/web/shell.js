// OctopShell: what the dashboard's pages share -- the hash router (#/ Tasks, #/queue Queue), API requests
// with the bearer token (asked for once on a 401, kept in sessionStorage, retried), the live indicator, the
// connection banner and the per-row action messages. Pages register with `page(name, {start, stop})`; only
// the page on screen polls. Every value from the API is set as text, never as HTML.
(function () {
  'use strict';

  const F = window.OctopFormat;
  const REQUEST_TIMEOUT_MS = 8000;
  const TOKEN_KEY = 'octop.token';
  const MESSAGE_MS = { ok: 6000, error: 20000 };

  const $ = (id) => document.getElementById(id);

  function el(tag, className, text) {
    const e = document.createElement(tag);
    if (className) e.className = className;
    if (text !== undefined) e.textContent = text;
    return e;
  }
  function setText(e, text) {
    if (e.textContent !== text) e.textContent = text;
  }

  // ---- Requests ----------------------------------------------------------------------------------------

  function token() {
    try {
      return sessionStorage.getItem(TOKEN_KEY);
    } catch (e) {
      return null;
    }
  }
  function setToken(value) {
    try {
      if (value) sessionStorage.setItem(TOKEN_KEY, value);
      else sessionStorage.removeItem(TOKEN_KEY);
    } catch (e) {
      // Storage disabled: the token then lives only as long as this call chain.
    }
    renderTokenStatus();
  }

  async function request(method, url, bearer) {
    const controller = new AbortController();
    const timer = setTimeout(() => controller.abort(), REQUEST_TIMEOUT_MS);
    const headers = { Accept: 'application/json' };
    if (bearer) headers.Authorization = `Bearer ${bearer}`;
    try {
      const res = await fetch(url, { method, headers, signal: controller.signal, cache: 'no-store' });
      const body = await res.text();
      return { status: res.status, ok: res.ok, body };
    } finally {
      clearTimeout(timer);
    }
  }

  // A GET. An octopd with http.protectReads answers 401 without the token: ask for it (one form for every
  // request waiting on it) and retry; closing the form leaves the error to the caller.
  async function getJson(url) {
    let bearer = token();
    let r = await request('GET', url, bearer);
    while (r.status === 401) {
      const rejected = Boolean(bearer);
      if (rejected) setToken(null);
      bearer = await askForToken(rejected ? 'That token was rejected; enter the current one.'
        : 'This octopd requires a bearer token to read.');
      if (!bearer) break;
      r = await request('GET', url, bearer);
      if (r.status !== 401) setToken(bearer);
    }
    if (!r.ok) throw new Error(F.describeApiError(r.status, r.body));
    return F.parseJsonKeepingDigits(r.body);
  }

  // A POST; on 401 it asks for the token (again only if the one tried was rejected) and retries. Resolves to
  // {ok, status, message, body}; `cancelled` when the user closed the token form.
  async function post(url, what) {
    let bearer = token();
    let r = await request('POST', url, bearer);
    while (r.status === 401) {
      const rejected = Boolean(bearer);
      if (rejected) setToken(null);
      bearer = await askForToken(rejected ? 'That token was rejected; enter the current one.' : null);
      if (!bearer) {
        return { ok: false, status: 401, cancelled: true,
          message: `Not sent: this octopd requires a bearer token for ${what || 'trigger and cancel'}.` };
      }
      r = await request('POST', url, bearer);
      if (r.status !== 401) setToken(bearer);
    }
    return { ok: r.ok, status: r.status, body: r.body, message: r.ok ? '' : F.describeApiError(r.status, r.body) };
  }

  // ---- The token form ----------------------------------------------------------------------------------

  let pendingToken = null; // one form for every POST waiting on it

  function askForToken(errorText) {
    if (pendingToken) return pendingToken;
    const dialog = $('token-dialog');
    const input = $('token-input');
    const error = $('token-error');
    error.hidden = !errorText;
    error.textContent = errorText || '';
    input.value = '';
    pendingToken = new Promise((resolve) => {
      const finish = (value) => {
        $('token-form').removeEventListener('submit', onSubmit);
        $('token-cancel').removeEventListener('click', onCancel);
        dialog.removeEventListener('cancel', onCancel);
        if (dialog.open) dialog.close();
        pendingToken = null;
        resolve(value);
      };
      const onSubmit = (event) => {
        event.preventDefault();
        const value = input.value.trim();
        if (!value) {
          error.hidden = false;
          error.textContent = 'Enter the token configured as http.token.';
          return;
        }
        finish(value);
      };
      const onCancel = (event) => {
        event.preventDefault();
        finish(null);
      };
      $('token-form').addEventListener('submit', onSubmit);
      $('token-cancel').addEventListener('click', onCancel);
      dialog.addEventListener('cancel', onCancel);
    });
    dialog.showModal();
    input.focus();
    return pendingToken;
  }

  function renderTokenStatus() {
    $('token-status').hidden = !token();
  }
  $('forget-token').addEventListener('click', () => setToken(null));

  // ---- Live status, connection banner, row messages ----------------------------------------------------

  function setLive(kind, text) {
    const live = $('live');
    live.dataset.state = kind;
    setText($('live-text'), text);
  }

  function showConnectionError(banner, message, pollMs) {
    banner.hidden = !message;
    setText(banner, message ? `Cannot reach octopd: ${message}. Retrying every ${pollMs / 1000} s.` : '');
  }

  // `target` = {message: element, messageTimer}: the row's message line, an error one with a dismiss button.
  function showMessage(target, kind, text) {
    clearTimeout(target.messageTimer);
    target.message.hidden = false;
    target.message.dataset.kind = kind;
    target.message.replaceChildren(el('span', 'text', text));
    if (kind === 'error') {
      const close = el('button', 'link-button dismiss', '×');
      close.type = 'button';
      close.setAttribute('aria-label', 'Dismiss');
      close.addEventListener('click', () => { target.message.hidden = true; });
      target.message.append(close);
    }
    target.messageTimer = setTimeout(() => { target.message.hidden = true; }, MESSAGE_MS[kind] || MESSAGE_MS.ok);
  }

  function timeBlock(container, iso, now, prefix) {
    const ms = Date.parse(iso);
    container.replaceChildren();
    if (Number.isNaN(ms)) {
      container.append(el('span', 'muted', iso));
      return;
    }
    const abs = el('time', 'abs', (prefix || '') + F.formatAbsolute(ms, now));
    abs.dateTime = iso;
    abs.title = iso;
    container.append(abs, el('span', 'rel', F.formatRelative(ms, now)));
  }

  // ---- Pages and the router ----------------------------------------------------------------------------

  const pages = new Map(); // name -> {start(params), stop(), title}
  let current = null;

  function page(name, handlers) {
    pages.set(name, handlers);
  }

  function route() {
    const { name, params } = F.parseRoute(location.hash);
    const target = pages.has(name) ? name : 'tasks';
    if (current && current !== target) pages.get(current).stop();
    const changed = current !== target;
    current = target;
    for (const section of document.querySelectorAll('main[data-page]')) {
      section.hidden = section.dataset.page !== target;
    }
    for (const link of document.querySelectorAll('.nav-item[data-page]')) {
      const here = link.dataset.page === target;
      link.classList.toggle('current', here);
      if (here) link.setAttribute('aria-current', 'page');
      else link.removeAttribute('aria-current');
    }
    const handlers = pages.get(target);
    document.title = `octop · ${handlers.title}`;
    document.body.dataset.page = target;
    handlers.start(params, changed);
  }

  // A row's actions cell: a primary and a secondary button, each [label, data-action], then the row's message
  // line (role=status, hidden until showMessage). Returns [primary, secondary, message].
  function actionCell(container, primary, secondary) {
    const button = ([label, action], kind) => {
      const b = el('button', `button ${kind} small`, label);
      b.type = 'button';
      b.dataset.action = action;
      return b;
    };
    const first = button(primary, 'primary');
    const second = button(secondary, 'secondary');
    const buttons = el('div', 'buttons');
    buttons.append(first, second);
    const message = el('div', 'action-message');
    message.setAttribute('role', 'status');
    message.hidden = true;
    container.append(buttons, message);
    return [first, second, message];
  }

  // Live refresh of one page: `refresh()` every pollMs while the page is current and the tab visible; paused
  // while the tab is hidden (resumed at once when it shows again). tick() refreshes now and re-arms;
  // stop() disarms; armed() says whether a refresh is pending.
  function poller(name, pollMs, refresh) {
    let timer = null;
    function disarm() {
      clearTimeout(timer);
      timer = null;
    }
    function schedule() {
      disarm();
      if (document.hidden || current !== name) return;
      timer = setTimeout(tick, pollMs);
    }
    async function tick() {
      await refresh();
      schedule();
    }
    document.addEventListener('visibilitychange', () => {
      if (current !== name) return;
      if (document.hidden) {
        disarm();
        setLive('paused', 'Paused while the tab is hidden');
      } else {
        tick();
      }
    });
    return { tick, stop: disarm, armed: () => timer !== null };
  }

  // Rewrites the hash without a history entry per keystroke, and without re-running the router.
  function replaceHash(hash) {
    if (location.hash === hash) return;
    history.replaceState(null, '', hash);
  }

  function startRouter() {
    renderTokenStatus();
    window.addEventListener('hashchange', route);
    route();
  }

  window.OctopShell = {
    $, el, setText, token, setToken, request, getJson, post, setLive, showConnectionError, showMessage,
    timeBlock, page, poller, actionCell, startRouter, replaceHash, isCurrent: (name) => current === name,
  };
})();
