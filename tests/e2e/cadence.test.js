// Unit tests of the dashboard's pure formatting (src/web/format.js), loaded the way Node loads CommonJS.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createRequire } from 'node:module';

const require = createRequire(import.meta.url);
const F = require('../../src/web/format.js');

const words = (cadence, timeZone) => F.describeCadence({ version: 2, cadence, timeoutAfterDuration: 'PT1M', timeZone }).words;

test('durations in words', () => {
  assert.equal(words('PT10M'), 'every 10 minutes');
  assert.equal(words('PT15S'), 'every 15 seconds');
  assert.equal(words('PT1M'), 'every minute');
  assert.equal(words('PT1H'), 'every hour');
  assert.equal(words('P1D'), 'every day');
  assert.equal(words('PT1H30M'), 'every 1 hour 30 minutes');
  assert.equal(words('PT90M'), 'every 90 minutes');
  assert.equal(words('PT0.5S'), 'every 0.5 seconds');
  assert.equal(words('P1W'), 'every week');
  assert.equal(words('PT0S'), 'continuously (no pause between runs)');
  // Not an ISO duration after all: shown raw rather than guessed.
  assert.equal(words('PT'), 'PT');
  assert.equal(F.describeCadence({ cadence: 'Pxyz' }).phrased, false);
});

test('manual', () => {
  assert.deepEqual(F.describeCadence({ cadence: 'manual' }), { kind: 'manual', words: 'manual', raw: 'manual', phrased: true });
});

test('cron in words', () => {
  assert.equal(words('*/15 * * * * *'), 'every 15 seconds');
  assert.equal(words('* * * * * *'), 'every second');
  assert.equal(words('*/10 * * * *'), 'every 10 minutes');
  assert.equal(words('* * * * *'), 'every minute');
  assert.equal(words('0 * * * *'), 'every hour');
  assert.equal(words('5 * * * *'), 'every hour at :05');
  assert.equal(words('0 */6 * * *'), 'every 6 hours');
  assert.equal(words('15 */2 * * *'), 'every 2 hours at :15');
  assert.equal(words('0 2 * * *'), 'at 02:00 daily (server time)');
  assert.equal(words('0 2 * * *', 'Europe/Paris'), 'at 02:00 daily (Europe/Paris)');
  assert.equal(words('30 6 * * 1-5'), 'at 06:30 on weekdays (server time)');
  assert.equal(words('30 6 * * MON-FRI'), 'at 06:30 on weekdays (server time)');
  assert.equal(words('0 10 * * 0,6'), 'at 10:00 on weekends (server time)');
  assert.equal(words('0 9 * * 1'), 'at 09:00 on Mondays (server time)');
  assert.equal(words('0 9 * * mon,wed,FRI'), 'at 09:00 on Mondays, Wednesdays and Fridays (server time)');
  assert.equal(words('0 9,17 * * *'), 'at 09:00 and 17:00 daily (server time)');
  assert.equal(words('0 0 1 * *'), 'at 00:00 on the 1st of every month (server time)');
  assert.equal(words('0 0 22 * *'), 'at 00:00 on the 22nd of every month (server time)');
  assert.equal(words('0 0 1 1 *'), 'at 00:00 on 1 January (server time)');
  assert.equal(words('0 0 25 DEC *'), 'at 00:00 on 25 December (server time)');
  assert.equal(words('30 0 2 * * *'), 'at 02:00:30 daily (server time)');
  assert.equal(words('*/5 * * * 1-5'), 'every 5 minutes on weekdays (server time)');
  assert.equal(words('@daily'), 'at 00:00 daily (server time)');
  assert.equal(words('@hourly'), 'every hour');
  assert.equal(words('@weekdays'), 'at 00:00 on weekdays (server time)');
  assert.equal(words('@secondly'), 'every second');
});

test('phraseCron gives the bare words', () => {
  assert.equal(F.phraseCron('0 2 * * *'), 'at 02:00 daily');
  assert.equal(F.phraseCron('*/15 * * * * *'), 'every 15 seconds');
  assert.equal(F.phraseCron('5 4 * * 2-4'), null);
});

test('cron without a simple phrasing stays raw, with its time zone', () => {
  assert.equal(words('5 4 * * 2-4'), 'cron 5 4 * * 2-4');
  assert.equal(words('*/10 9-17 * * *'), 'cron */10 9-17 * * *');
  assert.equal(words('0 0 L * *', 'Asia/Tokyo'), 'cron 0 0 L * * (Asia/Tokyo)');
  assert.equal(F.describeCadence({ cadence: '5 4 * * 2-4' }).phrased, false);
  assert.equal(F.describeCadence({ cadence: '0 2 * * *' }).phrased, true);
});

test('relative times', () => {
  const now = 1_700_000_000_000;
  assert.equal(F.formatRelative(now + 3 * 60_000 + 5_000, now), 'in 3 min');
  assert.equal(F.formatRelative(now - 45_000, now), '45 s ago');
  assert.equal(F.formatRelative(now + 400, now), 'now');
  assert.equal(F.formatRelative(now - 400, now), 'just now');
  assert.equal(F.formatRelative(now + (2 * 60 + 5) * 60_000, now), 'in 2 h 5 min');
  assert.equal(F.formatRelative(now - 3 * 3_600_000, now), '3 h ago');
  assert.equal(F.formatRelative(now + 86_400_000 * 3 + 5, now), 'in 3 days');
});

test('absolute times: clock today, date otherwise', () => {
  const now = new Date(2026, 2, 10, 12, 0, 0).getTime();
  assert.equal(F.formatAbsolute(new Date(2026, 2, 10, 9, 5, 7).getTime(), now), '09:05:07');
  assert.equal(F.formatAbsolute(new Date(2026, 2, 11, 2, 0, 0).getTime(), now), 'Wed 11 Mar 02:00:00');
  assert.equal(F.formatAbsolute(new Date(2027, 0, 1, 0, 0, 0).getTime(), now), 'Fri 1 Jan 2027 00:00:00');
});

test('run errors are parsed from their serialized JSON', () => {
  const e = F.parseRunError('{"name":"Error","message":"command exited with status 3: upstream answered 503"}');
  assert.equal(e.name, 'Error');
  assert.equal(e.message, 'command exited with status 3: upstream answered 503');
  const nested = F.parseRunError('{"name":"TypeError","message":"outer","stack":"at x","cause":{"name":"Error","message":"inner"}}');
  assert.equal(nested.stack, 'at x');
  assert.equal(nested.cause.message, 'inner');
  assert.equal(F.parseRunError('not json').message, 'not json');
  assert.equal(F.parseRunError(undefined), null);
});

test('API errors become one readable line', () => {
  const body = (name, message, status) => JSON.stringify({ error: { name, message }, request: { method: 'POST', url: '/x' }, response: { statusCode: status } });
  assert.equal(F.describeApiError(404, body('NotFoundError', 'Task x does not exist', 404)), 'Not found: Task x does not exist (HTTP 404)');
  assert.equal(F.describeApiError(409, body('ConflictError', 'Task x is currently running', 409)), 'Conflict: Task x is currently running (HTTP 409)');
  assert.equal(F.describeApiError(401, body('AuthenticationError', 'Missing or invalid bearer token', 401)), 'Not authorized: Missing or invalid bearer token (HTTP 401)');
  assert.equal(F.describeApiError(502, '<html>bad gateway</html>'), 'Request failed: <html>bad gateway</html> (HTTP 502)');
  assert.equal(F.describeApiError(500, ''), 'Server error: no details given (HTTP 500)');
});
