// OctopFormat: the dashboard's pure formatting functions -- a task's cadence in words, absolute and relative
// times, a run's serialized error, and an API error body as a readable line. No DOM access, so the same file is
// loaded by the page (as window.OctopFormat) and by the Node unit tests (as a CommonJS module).
(function (root, factory) {
  const api = factory();
  if (typeof module === 'object' && module.exports) module.exports = api;
  else root.OctopFormat = api;
})(typeof self !== 'undefined' ? self : this, function () {
  'use strict';

  // ---- Durations ---------------------------------------------------------------------------------------

  const ISO_DURATION =
    /^P(?:(\d+(?:[.,]\d+)?)Y)?(?:(\d+(?:[.,]\d+)?)M)?(?:(\d+(?:[.,]\d+)?)W)?(?:(\d+(?:[.,]\d+)?)D)?(?:T(?:(\d+(?:[.,]\d+)?)H)?(?:(\d+(?:[.,]\d+)?)M)?(?:(\d+(?:[.,]\d+)?)S)?)?$/;
  const DURATION_UNITS = ['year', 'month', 'week', 'day', 'hour', 'minute', 'second'];

  // "PT1H30M" -> [{n: 1, unit: 'hour'}, {n: 30, unit: 'minute'}]; null when it is not an ISO duration.
  function parseIsoDuration(iso) {
    if (typeof iso !== 'string' || iso === 'P' || iso.endsWith('T')) return null;
    const m = ISO_DURATION.exec(iso);
    if (!m) return null;
    const parts = [];
    DURATION_UNITS.forEach((unit, i) => {
      if (m[i + 1] !== undefined) parts.push({ n: Number(m[i + 1].replace(',', '.')), unit });
    });
    return parts;
  }

  function plural(n, unit) {
    return `${n} ${unit}${n === 1 ? '' : 's'}`;
  }

  // "every 10 minutes", "every hour", "every 1 hour 30 minutes"; null when `iso` is not a duration.
  function describeDuration(iso) {
    const parts = parseIsoDuration(iso);
    if (!parts) return null;
    const nonZero = parts.filter((p) => p.n !== 0);
    if (nonZero.length === 0) return 'continuously (no pause between runs)';
    if (nonZero.length === 1 && nonZero[0].n === 1) return `every ${nonZero[0].unit}`;
    return 'every ' + nonZero.map((p) => plural(p.n, p.unit)).join(' ');
  }

  // ---- Cron --------------------------------------------------------------------------------------------

  // The npm cron package's macros (what octop's parser accepts), expanded to its six-field form.
  const CRON_MACROS = {
    '@yearly': '0 0 0 1 1 *',
    '@annually': '0 0 0 1 1 *',
    '@monthly': '0 0 0 1 * *',
    '@weekly': '0 0 0 * * 0',
    '@daily': '0 0 0 * * *',
    '@hourly': '0 0 * * * *',
    '@minutely': '0 * * * * *',
    '@secondly': '* * * * * *',
    '@weekdays': '0 0 0 * * 1-5',
    '@weekends': '0 0 0 * * 0,6',
  };
  const DAY_NAMES = ['Sunday', 'Monday', 'Tuesday', 'Wednesday', 'Thursday', 'Friday', 'Saturday'];
  const DAY_ABBREV = ['SUN', 'MON', 'TUE', 'WED', 'THU', 'FRI', 'SAT'];
  const MONTH_NAMES = ['January', 'February', 'March', 'April', 'May', 'June', 'July', 'August',
    'September', 'October', 'November', 'December'];
  const MONTH_ABBREV = ['JAN', 'FEB', 'MAR', 'APR', 'MAY', 'JUN', 'JUL', 'AUG', 'SEP', 'OCT', 'NOV', 'DEC'];

  const isAny = (f) => f === '*' || f === '?';
  const isNumber = (f) => /^\d+$/.test(f);
  // "*/15" or "0/15" (a step from the field's start) -> 15.
  function everyStep(f) {
    const m = /^(?:\*|0)\/(\d+)$/.exec(f);
    return m ? Number(m[1]) : null;
  }
  const pad2 = (n) => String(n).padStart(2, '0');

  function dayOfWeek(f) {
    const upper = f.toUpperCase();
    if (DAY_ABBREV.includes(upper)) return DAY_ABBREV.indexOf(upper);
    if (isNumber(f) && Number(f) <= 7) return Number(f) % 7;
    return null;
  }
  function month(f) {
    const upper = f.toUpperCase();
    if (MONTH_ABBREV.includes(upper)) return MONTH_ABBREV.indexOf(upper);
    if (isNumber(f) && Number(f) >= 1 && Number(f) <= 12) return Number(f) - 1;
    return null;
  }
  function ordinal(n) {
    const s = n % 100 >= 11 && n % 100 <= 13 ? 'th' : ['th', 'st', 'nd', 'rd'][n % 10] || 'th';
    return `${n}${s}`;
  }
  function joinWords(words) {
    if (words.length <= 1) return words.join('');
    return words.slice(0, -1).join(', ') + ' and ' + words[words.length - 1];
  }

  // The day part of a cron phrase: '' for every day, 'on weekdays', 'on Mondays and Fridays',
  // 'on the 1st of every month', 'on 1 January'; null when it has no simple phrasing.
  function describeDays(dom, mon, dow) {
    if (isAny(dom) && isAny(mon) && isAny(dow)) return '';
    if (isAny(dom) && isAny(mon)) {
      const d = dow.toUpperCase();
      if (d === '1-5' || d === 'MON-FRI') return 'on weekdays';
      if (['0,6', '6,0', 'SAT,SUN', 'SUN,SAT', '6,7', '7,6'].includes(d)) return 'on weekends';
      const days = dow.split(',').map(dayOfWeek);
      if (days.some((x) => x === null)) return null;
      return 'on ' + joinWords(days.map((x) => DAY_NAMES[x] + 's'));
    }
    if (isNumber(dom) && isAny(dow)) {
      if (isAny(mon)) return `on the ${ordinal(Number(dom))} of every month`;
      const m = month(mon);
      if (m !== null) return `on ${Number(dom)} ${MONTH_NAMES[m]}`;
    }
    return null;
  }

  // A cron expression in words, or null when it has no simple phrasing. Times are the expression's own wall
  // clock (the caller adds the time zone).
  function phraseCron(expr) {
    const p = phraseCronDetailed(expr);
    return p ? p.words : null;
  }

  // {words, wallClock}: wallClock when the phrase names times of day or days, so the zone matters.
  function phraseCronDetailed(expr) {
    const w = phraseCronWords(expr);
    if (w === null) return null;
    return { words: w, wallClock: /^at |\bon /.test(w) };
  }

  function phraseCronWords(expr) {
    let text = expr.trim();
    if (text.startsWith('@')) {
      text = CRON_MACROS[text.toLowerCase()];
      if (!text) return null;
    }
    let fields = text.split(/\s+/);
    if (fields.length === 5) fields = ['0', ...fields];
    if (fields.length !== 6) return null;
    const [sec, min, hour, dom, mon, dow] = fields;
    const days = describeDays(dom, mon, dow);
    if (days === null) return null;
    const withDays = (phrase) => (days ? `${phrase} ${days}` : phrase);

    const secStep = everyStep(sec);
    const minStep = everyStep(min);
    const hourStep = everyStep(hour);
    const secNote = isNumber(sec) && Number(sec) !== 0 ? ` at second ${Number(sec)}` : '';

    // Fixed wall-clock times: "at 02:00 daily", "at 09:00 and 17:00 on weekdays".
    if (isNumber(sec) && isNumber(min) && /^\d+(,\d+)*$/.test(hour)) {
      const times = hour.split(',').map((h) => {
        let t = `${pad2(Number(h))}:${pad2(Number(min))}`;
        if (Number(sec) !== 0) t += `:${pad2(Number(sec))}`;
        return t;
      });
      return `at ${joinWords(times)} ${days || 'daily'}`;
    }
    if (isAny(hour) || hourStep !== null) {
      if (isAny(min) && isAny(hour)) {
        if (isAny(sec)) return withDays('every second');
        if (secStep !== null) return withDays(secStep === 1 ? 'every second' : `every ${secStep} seconds`);
        if (isNumber(sec)) return withDays('every minute' + secNote);
      }
      if (minStep !== null && isAny(hour) && isNumber(sec)) {
        return withDays((minStep === 1 ? 'every minute' : `every ${minStep} minutes`) + secNote);
      }
      if (isNumber(min) && isNumber(sec)) {
        const at = Number(min) === 0 && Number(sec) === 0 ? '' : ` at :${pad2(Number(min))}${secNote}`;
        if (isAny(hour)) return withDays('every hour' + at);
        return withDays((hourStep === 1 ? 'every hour' : `every ${hourStep} hours`) + at);
      }
    }
    return null;
  }

  // A task's settings.cadence in words: {kind: 'manual'|'duration'|'cron', words, raw, phrased}. A cron
  // names its zone: settings.timeZone when set, otherwise "(server time)" when the phrase has times of day.
  // `phrased` is false when the words are the raw cron (no simple phrasing exists).
  function describeCadence(settings) {
    const cadence = settings && typeof settings.cadence === 'string' ? settings.cadence : '';
    const timeZone = settings && typeof settings.timeZone === 'string' ? settings.timeZone : null;
    if (cadence === 'manual') {
      return { kind: 'manual', words: 'manual', raw: cadence, phrased: true };
    }
    if (cadence.startsWith('P')) {
      const words = describeDuration(cadence);
      return { kind: 'duration', words: words || cadence, raw: cadence, phrased: words !== null };
    }
    const phrase = phraseCronDetailed(cadence);
    const zone = timeZone ? ` (${timeZone})` : '';
    if (phrase === null) return { kind: 'cron', words: `cron ${cadence}${zone}`, raw: cadence, phrased: false };
    // Without settings.timeZone a cron runs in octopd's own local zone, which may not be the browser's.
    const where = zone || (phrase.wallClock ? ' (server time)' : '');
    return { kind: 'cron', words: phrase.words + where, raw: cadence, phrased: true };
  }

  // ---- Times -------------------------------------------------------------------------------------------

  // "in 3 min", "45 s ago", "in 2 h 5 min", "now" / "just now".
  function formatRelative(thenMs, nowMs) {
    const delta = thenMs - nowMs;
    const abs = Math.abs(delta);
    let amount;
    if (abs < 1000) return delta > 0 ? 'now' : 'just now';
    if (abs < 60 * 1000) amount = `${Math.floor(abs / 1000)} s`;
    else if (abs < 60 * 60 * 1000) amount = `${Math.floor(abs / 60000)} min`;
    else if (abs < 24 * 60 * 60 * 1000) {
      const h = Math.floor(abs / 3600000);
      const m = Math.floor((abs % 3600000) / 60000);
      amount = m ? `${h} h ${m} min` : `${h} h`;
    } else {
      const d = Math.floor(abs / 86400000);
      amount = d === 1 ? '1 day' : `${d} days`;
    }
    return delta > 0 ? `in ${amount}` : `${amount} ago`;
  }

  // The browser's local time: "14:03:05" today, "Tue 3 Dec 01:59:59" otherwise (year added when it differs).
  // Seconds always show: a cron task's first run is due one second before the occurrence (Backstage's
  // sendAt() minus 1 s), and "01:59" for a 02:00 job would look like a bug.
  function formatAbsolute(thenMs, nowMs) {
    const t = new Date(thenMs);
    const now = new Date(nowMs);
    const clock = `${pad2(t.getHours())}:${pad2(t.getMinutes())}:${pad2(t.getSeconds())}`;
    if (t.toDateString() === now.toDateString()) return clock;
    const day = `${DAY_NAMES[t.getDay()].slice(0, 3)} ${t.getDate()} ${MONTH_NAMES[t.getMonth()].slice(0, 3)}`;
    const year = t.getFullYear() === now.getFullYear() ? '' : ` ${t.getFullYear()}`;
    return `${day}${year} ${clock}`;
  }

  // ---- Errors ------------------------------------------------------------------------------------------

  // A taskState.lastRunError (serialized-error JSON text) as {name, message, stack, cause, raw}.
  function parseRunError(text) {
    if (text === undefined || text === null) return null;
    const raw = typeof text === 'string' ? text : JSON.stringify(text);
    let value = text;
    if (typeof text === 'string') {
      try {
        value = JSON.parse(text);
      } catch (e) {
        return { name: 'Error', message: text, stack: null, cause: null, raw };
      }
    }
    if (value && typeof value === 'object' && !Array.isArray(value)) {
      const message = typeof value.message === 'string' ? value.message : JSON.stringify(value);
      return {
        name: typeof value.name === 'string' ? value.name : 'Error',
        message,
        stack: typeof value.stack === 'string' ? value.stack : null,
        cause: value.cause === undefined || value.cause === null ? null : parseRunError(value.cause),
        raw,
      };
    }
    return { name: 'Error', message: String(value), stack: null, cause: null, raw };
  }

  const ERROR_TITLES = {
    NotFoundError: 'Not found',
    ConflictError: 'Conflict',
    InputError: 'Invalid request',
    AuthenticationError: 'Not authorized',
    NotAllowedError: 'Not allowed',
    ServiceUnavailableError: 'Unavailable',
  };
  const STATUS_TITLES = { 400: 'Invalid request', 401: 'Not authorized', 403: 'Not allowed', 404: 'Not found',
    405: 'Not allowed', 409: 'Conflict', 413: 'Too large', 500: 'Server error', 503: 'Unavailable' };

  // A failed API call as one readable line: "Conflict: Task x is currently running (HTTP 409)".
  function describeApiError(status, bodyText) {
    let name = null;
    let message = null;
    try {
      const body = JSON.parse(bodyText);
      if (body && body.error) {
        name = typeof body.error.name === 'string' ? body.error.name : null;
        message = typeof body.error.message === 'string' ? body.error.message : null;
      }
    } catch (e) {
      message = bodyText && bodyText.length < 300 ? bodyText.trim() : null;
    }
    const title = (name && ERROR_TITLES[name]) || STATUS_TITLES[status] || 'Request failed';
    return `${title}: ${message || 'no details given'} (HTTP ${status})`;
  }

  // ---- Routes ------------------------------------------------------------------------------------------

  // "#/queue?kind=greet&status=frozen" -> {name: 'queue', params: {kind: 'greet', status: 'frozen'}};
  // "", "#", "#/" -> the Tasks page.
  function parseRoute(hash) {
    const text = typeof hash === 'string' ? hash.replace(/^#\/?/, '') : '';
    const q = text.indexOf('?');
    const path = q < 0 ? text : text.slice(0, q);
    const params = {};
    if (q >= 0) {
      for (const [k, v] of new URLSearchParams(text.slice(q + 1))) if (v !== '') params[k] = v;
    }
    return { name: path.replace(/\/+$/, '') || 'tasks', params };
  }

  // The inverse for the pages' own filters: empty values are left out, keys in the given order.
  function formatRoute(name, params) {
    const search = new URLSearchParams();
    for (const [k, v] of Object.entries(params || {})) if (v !== undefined && v !== null && v !== '') search.set(k, v);
    const qs = search.toString();
    return `#/${name === 'tasks' ? '' : name}${qs ? `?${qs}` : ''}`;
  }

  // ---- Queue page ---------------------------------------------------------------------------------------

  // A duration in milliseconds for a latency: "850 ms", "2.4 s", "3 min 5 s", "—" when absent.
  function formatMs(ms) {
    if (ms === null || ms === undefined || !Number.isFinite(ms)) return '—';
    if (ms < 1) return `${ms.toFixed(2)} ms`;
    if (ms < 1000) return `${Math.round(ms)} ms`;
    if (ms < 60000) return `${(ms / 1000).toFixed(ms < 10000 ? 1 : 0)} s`;
    const min = Math.floor(ms / 60000);
    const sec = Math.round((ms % 60000) / 1000);
    return sec ? `${min} min ${sec} s` : `${min} min`;
  }

  // A JSON number literal as sign, significant digits and exponent ("19.90", "1.99e1" and "199E-1" all give
  // "199e-1"), so that two spellings of one decimal compare equal; anything else is returned as it is.
  function decimalKey(literal) {
    const m = /^(-?)(\d+)(?:\.(\d+))?(?:[eE]([+-]?\d+))?$/.exec(literal);
    if (!m) return literal;
    const fraction = m[3] || '';
    let digits = (m[2] + fraction).replace(/^0+/, '');
    if (!digits) return '0';
    let exponent = Number(m[4] || 0) - fraction.length;
    const kept = digits.replace(/0+$/, '');
    exponent += digits.length - kept.length;
    digits = kept;
    return `${m[1]}${digits}e${exponent}`;
  }

  // JSON.parse, except that a number whose value a double would change (12345678901234567890,
  // 0.1000000000000000001) stays as its text, which JSON.stringify then writes back unchanged: the API answers
  // with a payload's digits as they were enqueued (docs/jobs.md "Payloads"), and the dashboard shows them so.
  // Other numbers, all of octopd's own among them, are numbers as before (19.90 shows as 19.9: the same value).
  // Needs the browser's JSON.rawJSON and the reviver's source text (Chromium 114, Firefox 135); elsewhere it is
  // plain JSON.parse.
  function parseJsonKeepingDigits(text) {
    if (typeof JSON.rawJSON !== 'function') return JSON.parse(text);
    return JSON.parse(text, (key, value, context) => {
      if (typeof value !== 'number' || !context || typeof context.source !== 'string') return value;
      return decimalKey(String(value)) === decimalKey(context.source) ? value : JSON.rawJSON(context.source);
    });
  }

  // A job's payload (any JSON value) as indented text; a one-line preview for the collapsed form.
  function prettyJson(value) {
    if (value === undefined) return '';
    return JSON.stringify(value, null, 2);
  }
  function jsonPreview(value, max = 80) {
    const text = value === undefined ? '' : JSON.stringify(value);
    return text.length > max ? `${text.slice(0, max - 1)}…` : text;
  }

  // The sparkline's geometry: `values` (numbers or null for "no data") over `width` x `height` with `pad`
  // pixels inside the edges. Returns {points: [{x, y, value, index}], path, max}: one point per non-null
  // value, `path` an SVG path that breaks at nulls. The vertical scale starts at 0 and tops at the largest
  // value (at least `minMax`, so a few jobs do not look like a flood).
  function sparkline(values, { width = 240, height = 40, pad = 3, minMax = 1 } = {}) {
    const n = values.length;
    let max = minMax;
    for (const v of values) if (v !== null && v !== undefined && v > max) max = v;
    const step = n > 1 ? (width - 2 * pad) / (n - 1) : 0;
    const points = [];
    let path = '';
    let pen = false;
    values.forEach((v, index) => {
      if (v === null || v === undefined || !Number.isFinite(v)) {
        pen = false;
        return;
      }
      const x = Math.round((pad + index * step) * 10) / 10;
      const y = Math.round((height - pad - (v / max) * (height - 2 * pad)) * 10) / 10;
      points.push({ x, y, value: v, index });
      path += `${pen ? 'L' : 'M'}${x} ${y} `;
      pen = true;
    });
    return { points, path: path.trim(), max };
  }

  return {
    parseIsoDuration,
    describeDuration,
    phraseCron,
    describeCadence,
    formatRelative,
    formatAbsolute,
    parseRunError,
    describeApiError,
    parseRoute,
    formatRoute,
    formatMs,
    decimalKey,
    parseJsonKeepingDigits,
    prettyJson,
    jsonPreview,
    sparkline,
  };
});
