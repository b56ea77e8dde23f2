#!/usr/bin/env node
// Differential test of octop::CronExpression against the npm `cron` package's CronTime, the version Backstage uses.
//
// Generates random cron expressions (valid and invalid), start instants (many of them near DST transitions, many
// with milliseconds) and time zones from a seeded PRNG, answers each case with the real package exactly the way
// Backstage calls it (`new CronTime(expr).sendAt()` with the process's local zone and clock, here luxon's
// Settings.defaultZone and Settings.now), streams the same cases through the C++ driver, and compares.
//
// Usage: node oracle.js --driver PATH [--seed N] [--count N] [--show N]
'use strict';

const { spawn } = require('node:child_process');
const { CronTime } = require('cron');
const { DateTime, Settings } = require('luxon');

function parseArgs(argv) {
  const args = { seed: 20240531, count: 10000, show: 10, driver: null };
  for (let i = 2; i < argv.length; i++) {
    const key = argv[i].replace(/^--/, '');
    args[key] = key === 'driver' ? argv[++i] : Number(argv[++i]);
  }
  if (!args.driver) throw new Error('--driver is required');
  return args;
}

// mulberry32: small, fast, and the same sequence on every machine.
function makeRng(seed) {
  let a = seed >>> 0;
  const next = () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
  const int = (lo, hi) => lo + Math.floor(next() * (hi - lo + 1));
  const pick = (xs) => xs[Math.floor(next() * xs.length)];
  const chance = (p) => next() < p;
  return { next, int, pick, chance };
}

const ZONES = [
  'UTC',
  'Europe/Paris',
  'America/New_York',
  'Australia/Lord_Howe', // 30-minute DST
  'America/Sao_Paulo', // DST used to start at midnight
  'America/Havana', // transitions at 00:00 and 01:00
  'America/Santiago', // transitions at 24:00
  'Asia/Tehran', // DST at midnight until 2022
  'Pacific/Chatham', // +12:45 / +13:45
  'Asia/Kolkata', // +05:30, no DST
];

const UNITS = [
  { name: 'second', lo: 0, hi: 59 },
  { name: 'minute', lo: 0, hi: 59 },
  { name: 'hour', lo: 0, hi: 23 },
  { name: 'dom', lo: 1, hi: 31 },
  { name: 'month', lo: 1, hi: 12 },
  { name: 'dow', lo: 0, hi: 7 },
];
const MONTHS = ['jan', 'feb', 'mar', 'apr', 'may', 'jun', 'jul', 'aug', 'sep', 'oct', 'nov', 'dec'];
const DAYS = ['sun', 'mon', 'tue', 'wed', 'thu', 'fri', 'sat'];
const JUNK = ['?', 'L', '#', '', '**', '5-', '-5', '1-', '/5', '*/', '1/0', '1-2-3', '*-1', '2*', 'x', 'W', '1,', ',1',
  '1.5', '+1', '0x1', '*/2/3', 'ja', 'mond', 'JANFEB', 'sunsat', '1 /2', '٣'];

function randomCase(s) {
  let v = s.next() * s.next();
  if (s.chance(0.3)) v = 0.95 + 0.05 * s.next();
  return v;
}

// A value biased towards the edges of the range, where DST, month ends and off-by-ones live.
function value(s, unit, outOfRange) {
  if (outOfRange && s.chance(0.5)) return s.pick([unit.lo - 1, unit.hi + 1, unit.hi + 7, 60, 99, 100]);
  if (unit.name === 'hour' && s.chance(0.5)) return s.int(0, 4);
  if (unit.name === 'dom' && s.chance(0.4)) return s.int(28, 31);
  if (unit.name === 'month' && s.chance(0.4)) return s.pick([2, 3, 4, 9, 10, 11]);
  if ((unit.name === 'minute' || unit.name === 'second') && s.chance(0.3)) return s.pick([0, 1, 29, 30, 45, 59]);
  const span = unit.hi - unit.lo;
  return unit.lo + Math.floor(randomCase(s) * (span + 1)) % (span + 1);
}

function named(s, unit, n) {
  const v = String(n);
  if (unit.name === 'month' && s.chance(0.2) && n >= 1 && n <= 12) return caseMix(s, MONTHS[n - 1]);
  if (unit.name === 'dow' && s.chance(0.2) && n >= 0 && n <= 6) return caseMix(s, DAYS[n]);
  if (s.chance(0.03)) return '0' + v;
  return v;
}

function caseMix(s, word) {
  return [...word].map((c) => (s.chance(0.3) ? c.toUpperCase() : c)).join('');
}

function term(s, unit, bad) {
  if (bad && s.chance(0.3)) return s.pick(JUNK);
  const r = s.next();
  const lo = () => value(s, unit, bad && s.chance(0.2));
  if (r < 0.3) return named(s, unit, lo());
  if (r < 0.45) return '*/' + s.pick([1, 2, 3, 5, 7, 10, 15, 20, 30, 45, 70, s.int(1, 40)]);
  if (r < 0.7) {
    let a = lo();
    let b = lo();
    if (!bad || s.chance(0.7)) [a, b] = [Math.min(a, b), Math.max(a, b)];
    let t = named(s, unit, a) + '-' + named(s, unit, b);
    if (s.chance(0.35)) t += '/' + s.int(bad && s.chance(0.2) ? 0 : 1, 20);
    return t;
  }
  if (r < 0.8) return lo() + '/' + s.int(bad && s.chance(0.2) ? 0 : 1, 30);
  return '*';
}

function field(s, unit, bad) {
  // Wide-open fields are common in real schedules, and keep the expected next occurrence close.
  const star = { second: 0.5, minute: 0.35, hour: 0.35, dom: 0.6, month: 0.65, dow: 0.65 }[unit.name];
  if (!bad && s.chance(star)) return s.chance(0.1) ? '*' : unit.name === 'second' ? '0' : '*';
  const n = s.chance(0.75) ? 1 : s.int(2, 4);
  const terms = [];
  for (let i = 0; i < n; i++) terms.push(term(s, unit, bad));
  return terms.join(',');
}

function expression(s) {
  if (s.chance(0.04)) {
    const preset = s.pick(['@yearly', '@monthly', '@weekly', '@daily', '@hourly', '@minutely', '@secondly',
      '@weekdays', '@weekends', '@annually', '@midnight', '@reboot']);
    return s.chance(0.8) ? caseMix(s, preset) : s.pick([' ', '']) + preset + s.pick([' ', '\t', '']);
  }
  const bad = s.chance(0.15);
  const six = s.chance(0.4);
  let fields = UNITS.slice(six ? 0 : 1).map((u) => field(s, u, bad && s.chance(0.4)));
  if (bad && s.chance(0.15)) fields = s.chance(0.5) ? fields.slice(1) : fields.concat(['*']);
  const sep = () => (s.chance(0.9) ? ' ' : s.pick(['  ', '\t', ' \u00a0', '\u3000', '\n']));
  let text = fields.join('').length ? fields.map((f, i) => (i ? sep() : '') + f).join('') : '';
  if (s.chance(0.05)) text = s.pick([' ', '\t', '\u00a0']) + text + s.pick([' ', '\n', '']);
  return text;
}

// DST transitions (first instant with the new offset, ms) per zone, found by a daily scan and a bisection.
function transitions(zone, fromYear, toYear) {
  const offset = (ms) => DateTime.fromMillis(ms, { zone }).offset;
  const out = [];
  const day = 3 * 86400000; // a coarse step; two transitions within it cancel out and are merely not sampled
  let t = Date.UTC(fromYear, 0, 1);
  const end = Date.UTC(toYear + 1, 0, 1);
  let o = offset(t);
  for (; t < end; t += day) {
    const o2 = offset(t + day);
    if (o2 !== o) {
      let lo = t;
      let hi = t + day;
      while (hi - lo > 1000) {
        const mid = lo + Math.floor((hi - lo) / 2000) * 1000;
        if (offset(mid) === o) lo = mid;
        else hi = mid;
      }
      out.push(hi);
      o = o2;
    }
  }
  return out;
}

function startInstant(s, zoneTransitions) {
  let ms;
  if (zoneTransitions.length && s.chance(0.55)) {
    // Within a couple of days before (mostly) or after a transition.
    ms = s.pick(zoneTransitions) + s.int(-50 * 3600, 6 * 3600) * 1000;
  } else {
    ms = Date.UTC(1995, 0, 1) + Math.floor(s.next() * (Date.UTC(2045, 0, 1) - Date.UTC(1995, 0, 1)));
  }
  const r = s.next();
  if (r < 0.35) ms = Math.floor(ms / 1000) * 1000 + s.int(1, 999);
  else if (r < 0.55) ms = Math.floor(ms / 60000) * 60000; // on a minute: exercises "strictly after"
  else if (r < 0.7) ms = Math.floor(ms / 3600000) * 3600000;
  else ms = Math.floor(ms / 1000) * 1000;
  return ms;
}

// The package's search loops forever on a few inputs (see docs/cron.md). luxon's DateTime#set runs on every
// iteration of that loop, so a budget of calls per search turns a hang into an answer.
const originalSet = DateTime.prototype.set;
let setBudget = 0;
DateTime.prototype.set = function set(values) {
  if (--setBudget < 0) throw new Error('HANG');
  return originalSet.call(this, values);
};

function expected(expr, zone, ms) {
  let ct;
  try {
    ct = new CronTime(expr);
  } catch (e) {
    return 'I\t' + e.message;
  }
  Settings.defaultZone = zone;
  Settings.now = () => ms;
  setBudget = 40000; // a search that ends takes at most a few thousand
  try {
    return 'N\t' + ct.sendAt().toMillis();
  } catch (e) {
    if (e.message === 'HANG') return 'X\thang';
    return /8 years/.test(e.message) ? 'H' : 'X\terror';
  }
}

function describe(line) {
  if (line === undefined) return '(no answer)';
  if (line.startsWith('N\t')) {
    const ms = Number(line.slice(2));
    return `${ms} (${new Date(ms).toISOString()})`;
  }
  return JSON.stringify(line);
}

async function main() {
  const args = parseArgs(process.argv);
  const s = makeRng(args.seed);
  const realNow = Settings.now;
  const realZone = Settings.defaultZone;

  const byZone = new Map(ZONES.map((z) => [z, transitions(z, 1994, 2046)]));
  const cases = [];
  for (let i = 0; i < args.count; i++) {
    const zone = s.pick(ZONES);
    const expr = expression(s);
    cases.push({ zone, expr, ms: startInstant(s, byZone.get(zone)) });
  }
  const began = Date.now();
  for (const c of cases) {
    if (process.env.CRON_ORACLE_TRACE) console.error(JSON.stringify(c));
    c.want = expected(c.expr, c.zone, c.ms);
  }
  const nodeMs = Date.now() - began;
  Settings.now = realNow;
  Settings.defaultZone = realZone;

  const input = cases.map((c) => `${c.zone}\t${c.ms}\t${JSON.stringify(c.expr)}\n`).join('');
  const driverBegan = Date.now();
  const answers = await new Promise((resolve, reject) => {
    const child = spawn(args.driver, [], { stdio: ['pipe', 'pipe', 'inherit'] });
    let out = '';
    child.stdout.setEncoding('utf8');
    child.stdout.on('data', (d) => (out += d));
    child.on('error', reject);
    child.on('close', (code) => (code === 0 ? resolve(out.split('\n')) : reject(new Error(`driver exited ${code}`))));
    child.stdin.end(input);
  });
  const driverMs = Date.now() - driverBegan;

  let agree = 0;
  let wentBack = 0; // the package answered a time not after the start; octop answers a later one on purpose
  let validityAgree = 0;
  const counts = { N: 0, I: 0, H: 0, X: 0 };
  const mismatches = [];
  cases.forEach((c, i) => {
    const got = answers[i];
    counts[c.want[0]]++;
    if ((c.want[0] === 'I') === (got !== undefined && got[0] === 'I')) validityAgree++;
    if (got === c.want) agree++;
    else if (c.want[0] === 'N' && Number(c.want.slice(2)) <= c.ms && got && got[0] === 'N' &&
             Number(got.slice(2)) > c.ms) wentBack++; // docs/cron.md, "it never goes back"
    else mismatches.push({ ...c, got });
  });
  const pct = (n) => ((100 * n) / cases.length).toFixed(2);
  console.log(`cron-oracle: seed ${args.seed}, ${cases.length} cases over ${ZONES.length} zones ` +
    `(package: ${counts.N} next times, ${counts.I} rejected, ${counts.H} none within 8 years, ${counts.X} errors); ` +
    `node ${nodeMs} ms, driver ${driverMs} ms`);
  console.log(`cron-oracle: validity ${validityAgree}/${cases.length} agree (${pct(validityAgree)}%)`);
  console.log(`cron-oracle: ${agree}/${cases.length} agree (${pct(agree)}%); ${wentBack} where the package ` +
    'went back in time and octop answers the next occurrence after the start');
  for (const m of mismatches.slice(0, args.show)) {
    console.log(`  MISMATCH expr=${JSON.stringify(m.expr)} zone=${m.zone} start=${m.ms} ` +
      `(${new Date(m.ms).toISOString()})\n    cron package: ${describe(m.want)}\n    octop:        ${describe(m.got)}`);
  }
  if (mismatches.length) {
    console.log(`cron-oracle: FAILED, ${mismatches.length} mismatches; reproduce with --seed ${args.seed} ` +
      `--count ${args.count}`);
    process.exit(1);
  }
}

main().catch((e) => {
  console.error(`cron-oracle: ${e.stack || e}`);
  process.exit(2);
});
