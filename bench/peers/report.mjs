// Renders one benchmark run (the JSON lines of the contract in docs/performance.md) as markdown tables:
// throughput, the sustained figure, latency, scheduler, the pgbench reference, and the targets met / not met.
//   node report.mjs --results build/bench/results.jsonl [--meta build/bench/meta.json] [--md report.md]
// Prints the report on stdout; with --md also writes it to that file.
import fs from 'node:fs';

function ParseArgs(argv) {
  const args = { results: '', meta: '', md: '' };
  for (let i = 0; i < argv.length; ++i) {
    if (argv[i] === '--results') args.results = argv[++i];
    else if (argv[i] === '--meta') args.meta = argv[++i];
    else if (argv[i] === '--md') args.md = argv[++i];
    else throw new Error(`unknown argument ${argv[i]}`);
  }
  if (!args.results) throw new Error('usage: report.mjs --results FILE [--meta FILE] [--md FILE]');
  return args;
}

function ReadLines(file) {
  if (!fs.existsSync(file)) return [];
  const lines = [];
  for (const text of fs.readFileSync(file, 'utf8').split('\n')) {
    if (!text.trim()) continue;
    try {
      lines.push(JSON.parse(text));
    } catch {
      console.error(`report: skipping a line that is not JSON: ${text.slice(0, 80)}`);
    }
  }
  return lines;
}

// The last line whose system/backend/metric match and whose params contain `params` (sizes such as
// "jobs" are not matched, so a --quick run renders the same way).
function Find(lines, system, backend, metric, params = {}) {
  let found;
  for (const l of lines) {
    if (l.system !== system || (l.backend || 'postgres') !== backend || l.metric !== metric) continue;
    if (Object.entries(params).every(([k, v]) => l.params && l.params[k] === v)) found = l;
  }
  return found;
}

function Value(line) {
  return line && Number.isFinite(line.value) ? line.value : undefined;
}

function Fmt(v, digits) {
  if (v === undefined) return '–';
  if (digits === undefined) digits = Math.abs(v) >= 100 ? 0 : Math.abs(v) >= 10 ? 1 : 2;
  return v.toLocaleString('en-US', { minimumFractionDigits: digits, maximumFractionDigits: digits });
}

function Table(header, rows) {
  const widths = header.map((h, i) => Math.max(h.length, ...rows.map((r) => String(r[i]).length)));
  const line = (cells) => '| ' + cells.map((c, i) => String(c).padEnd(widths[i])).join(' | ') + ' |';
  return [line(header), '|' + widths.map((w) => '-'.repeat(w + 2)).join('|') + '|', ...rows.map(line)].join('\n');
}

function Sizes(lines, metric) {
  const l = lines.find((x) => x.metric === metric && x.params);
  return l ? l.params : {};
}

function Render(lines, meta) {
  const out = [];
  const peers = ['graphile-worker', 'pg-boss'];
  out.push('# octop benchmark run');
  out.push('');
  if (meta) {
    out.push(`${meta.date} — ${meta.machine}; PostgreSQL ${meta.postgres} (${meta.pg_settings}); ` +
             `node ${meta.node}; graphile-worker ${meta.graphile_worker}, pg-boss ${meta.pg_boss}; ` +
             `load average ${meta.load_at_start} at the start, ${meta.load_at_end || '?'} at the end` +
             (meta.quick ? '; **quick run (--quick): smaller sizes, not the reference figures**' : ''));
    out.push('');
  }

  // Throughput.
  const jobs = Sizes(lines, 'throughput_preinserted').jobs || Sizes(lines, 'throughput_enqueue_drain').jobs;
  out.push(`## Queue throughput (jobs/s, ${jobs ? jobs.toLocaleString('en-US') : '?'} no-op jobs; higher is better)`);
  out.push('');
  const throughput_rows = [];
  const ratios = {};
  for (const concurrency of [1, 10, 32]) {
    for (const [metric, label] of [['throughput_preinserted', 'pre-inserted'],
                                   ['throughput_enqueue_drain', 'enqueue+drain']]) {
      const octop = Value(Find(lines, 'octop', 'postgres', metric, { concurrency }));
      const peer_values = peers.map((p) => Value(Find(lines, p, 'postgres', metric, { concurrency })));
      const known = peer_values.filter((v) => v !== undefined);
      const faster = known.length ? Math.max(...known) : undefined;
      const ratio = octop !== undefined && faster ? octop / faster : undefined;
      ratios[`${metric}/${concurrency}`] = ratio;
      const sqlite = Value(Find(lines, 'octop', 'sqlite', metric, { concurrency }));
      throughput_rows.push([concurrency, label, Fmt(octop), ...peer_values.map((v) => Fmt(v)),
                            ratio === undefined ? '–' : `${Fmt(ratio, 2)}×`, Fmt(sqlite)]);
    }
  }
  out.push(Table(['concurrency', 'figure', 'octop (PG)', ...peers, 'octop / faster peer', 'octop (SQLite)'],
                 throughput_rows));
  out.push('');

  // Sustained: the same enqueue+drain into an empty table and into one holding a history of finished jobs.
  const history = lines.filter((l) => l.system === 'octop' && l.metric === 'throughput_sustained')
      .map((l) => l.params.history).sort((a, b) => a - b);
  let sustained_ratio;
  if (history.length) {
    const sjobs = Sizes(lines, 'throughput_sustained').jobs;
    out.push(`## Sustained (octop on PostgreSQL, enqueue+drain of ${Fmt(sjobs, 0)} jobs at concurrency 10)`);
    out.push('');
    const rows = history.map((h) => {
      const mb = (metric) => {
        const b = Value(Find(lines, 'octop', 'postgres', metric, { history: h }));
        return b === undefined ? undefined : b / 1048576;
      };
      return [Fmt(h, 0), Fmt(Value(Find(lines, 'octop', 'postgres', 'throughput_sustained', { history: h }))),
              Fmt(mb('jobs_table_bytes'), 1), Fmt(mb('jobs_index_bytes'), 1), Fmt(mb('job_sets_bytes'), 1)];
    });
    out.push(Table(['finished jobs already in the table', 'jobs/s', 'octop_jobs table (MiB)',
                    'its indexes (MiB)', 'working sets (MiB)'], rows));
    out.push('');
    const empty = Value(Find(lines, 'octop', 'postgres', 'throughput_sustained', { history: history[0] }));
    const full = Value(Find(lines, 'octop', 'postgres', 'throughput_sustained',
                            { history: history[history.length - 1] }));
    if (empty && full && history.length > 1) sustained_ratio = full / empty;
  }

  // Latency.
  const samples = Sizes(lines, 'latency_p50').jobs;
  out.push(`## Enqueue→start latency on an idle worker (ms, concurrency 10, ${samples || '?'} jobs one at a time; lower is better)`);
  out.push('');
  const latency_rows = [];
  for (const p of [50, 95, 99]) {
    const metric = `latency_p${p}`;
    latency_rows.push([`p${p}`, Fmt(Value(Find(lines, 'octop', 'postgres', metric))),
                       ...peers.map((s) => Fmt(Value(Find(lines, s, 'postgres', metric)))),
                       Fmt(Value(Find(lines, 'octop', 'sqlite', metric)))]);
  }
  out.push(Table(['percentile', 'octop (PG)', ...peers, 'octop (SQLite)'], latency_rows));
  out.push('');

  // Scheduler (octop only).
  out.push('## Scheduler (octop)');
  out.push('');
  const backends = ['postgres', 'sqlite'].filter((b) => lines.some((l) => l.system === 'octop' && l.backend === b &&
      /^(trigger_start|cron_lateness|idle_statements|memory_per_task)/.test(l.metric)));
  const scheduler_figures = [
    ['trigger→start p50 (ms)', 'trigger_start_p50', {}],
    ['trigger→start p99 (ms)', 'trigger_start_p99', {}],
    ['cron fire lateness p50 (ms)', 'cron_lateness_p50', {}],
    ['cron fire lateness p99 (ms)', 'cron_lateness_p99', {}],
    ['idle load, 10 tasks (stmt/s)', 'idle_statements_per_s', { tasks: 10 }],
    ['idle load, 1,000 tasks (stmt/s)', 'idle_statements_per_s', { tasks: 1000 }],
    ['idle load, 10,000 tasks (stmt/s)', 'idle_statements_per_s', { tasks: 10000 }],
    ['memory per registered task (bytes)', 'memory_per_task', {}],
  ];
  const scheduler_backends = backends.length ? backends : ['postgres'];
  out.push(Table(['figure', ...scheduler_backends.map((b) => (b === 'postgres' ? 'PostgreSQL' : 'SQLite'))],
                 scheduler_figures.map(([label, metric, params]) =>
                     [label, ...scheduler_backends.map((b) => Fmt(Value(Find(lines, 'octop', b, metric, params))))])));
  out.push('');

  // Per-job budget: what each pre-inserted figure cost in CPU, against what the 2× target leaves. When a
  // ratio is short, this says whether the CPU ran out (cores busy near the machine's) or the work waited.
  const cpus = meta && Number.isFinite(meta.cpus) ? meta.cpus : undefined;
  const budget_systems = ['octop', 'graphile-worker'];
  // octop's claim cycle in the same figure (octop_jobs_claim_duration_seconds and octop_jobs_claimed_total).
  const ClaimCycle = (concurrency) => {
    const params = { figure: 'preinserted', concurrency };
    const share = Value(Find(lines, 'octop', 'postgres', 'claim_share', params));
    const size = Value(Find(lines, 'octop', 'postgres', 'jobs_per_claim', params));
    const per_job = Value(Find(lines, 'octop', 'postgres', 'claim_us_per_job', params));
    if (share === undefined || size === undefined || per_job === undefined) return '';
    return ` Its producer was inside claims for ${Fmt(share * 100, 0)} % of the span: claims of ${Fmt(size, 0)} ` +
           `jobs on average, ${Fmt(per_job, 1)} µs of round trip per job claimed.`;
  };
  const budget_rows = [];
  const budget_notes = [];
  for (const concurrency of [1, 10, 32]) {
    const params = { figure: 'preinserted', concurrency };
    const cost = {};
    for (const system of budget_systems) {
      const rate = Value(Find(lines, system, 'postgres', 'throughput_preinserted', { concurrency }));
      const machine = Value(Find(lines, system, 'postgres', 'cpu_us_per_job', params));
      const own = Value(Find(lines, system, 'postgres', 'client_cpu_us_per_job', params));
      const server = Value(Find(lines, system, 'postgres', 'server_exec_us_per_job', params));
      if (machine === undefined) continue;
      const rest = own !== undefined && server !== undefined ? machine - own - server : undefined;
      const busy = rate !== undefined ? (machine * rate) / 1e6 : undefined;
      cost[system] = { rate, machine, busy };
      budget_rows.push([concurrency, system, Fmt(rate), Fmt(machine, 1), Fmt(own, 1), Fmt(server, 1), Fmt(rest, 1),
                        Fmt(busy, 2)]);
    }
    const octop = cost.octop;
    const peer = cost['graphile-worker'];
    if (cpus && octop && peer && peer.rate) {
      const target = 2 * peer.rate;
      const leaves = (cpus * 1e6) / target;
      budget_notes.push(`- concurrency ${concurrency}: 2× graphile-worker is ${Fmt(target, 0)} jobs/s, which leaves ` +
                        `${Fmt(leaves, 1)} µs of CPU per job on ${cpus} CPUs; octop's ${Fmt(octop.machine, 1)} µs at that ` +
                        `rate would keep ${Fmt((octop.machine * target) / 1e6, 2)} CPUs busy; it ran at ` +
                        `${Fmt(octop.rate, 0)} jobs/s with ${Fmt(octop.busy, 2)} busy.` + ClaimCycle(concurrency));
    }
  }
  if (budget_rows.length) {
    out.push(`## Per-job budget of the pre-inserted figures (µs of CPU or server time per job${cpus ? `; ${cpus} CPUs` : ''})`);
    out.push('');
    out.push(Table(['concurrency', 'system', 'jobs/s', 'machine CPU', 'its own process', 'server statements',
                    'the rest', 'CPUs busy'], budget_rows));
    out.push('');
    out.push('Machine CPU: every process\'s busy time from t0 to t1 (/proc/stat); its own process: the benchmark ' +
             'process (the worker, its threads); server statements: execution time of the figure\'s statements ' +
             '(pg_stat_statements, commits\' flush waits left out); the rest: machine − the two (the server\'s ' +
             'other work, WAL writer, kernel). docs/performance.md, "Figure definitions".');
    out.push('');
    if (budget_notes.length) {
      out.push(...budget_notes);
      out.push('');
    }
  }

  // Physical reference.
  out.push('## Physical reference: pgbench single-row UPDATE, same server, same run');
  out.push('');
  const pgbench_rows = lines.filter((l) => l.system === 'pgbench' && l.metric === 'tps')
      .map((l) => [l.params.clients, l.params.phase || '', Fmt(l.value), Fmt(1000 / (l.value / l.params.clients), 2)]);
  out.push(pgbench_rows.length ? Table(['clients', 'when', 'tps', 'ms per transaction'], pgbench_rows)
                               : '(not measured)');
  out.push('');

  // Targets.
  out.push('## Targets');
  out.push('');
  const Ratio = (x) => (x === undefined ? '–' : `${Fmt(x, 2)}×`);
  const Check = (value, ok) => (value === undefined ? 'not measured' : ok(value) ? 'met' : 'NOT met');
  const v = (metric, params = {}) => Value(Find(lines, 'octop', 'postgres', metric, params));
  const graphile = (concurrency) => {
    const octop = v('throughput_preinserted', { concurrency });
    const peer = Value(Find(lines, 'graphile-worker', 'postgres', 'throughput_preinserted', { concurrency }));
    return octop !== undefined && peer ? octop / peer : undefined;
  };
  const target_rows = [
    ...[1, 10, 32].map((c) => [`throughput pre-inserted ≥ 2× graphile-worker, concurrency ${c}`, Ratio(graphile(c)),
                               Check(graphile(c), (x) => x >= 2)]),
    ['throughput enqueue+drain ≥ 2× faster peer, concurrency 10', Ratio(ratios['throughput_enqueue_drain/10']),
     Check(ratios['throughput_enqueue_drain/10'], (x) => x >= 2)],
    ['sustained with the history ≥ 85 % of the empty table', sustained_ratio === undefined ? '–' :
     `${Fmt(sustained_ratio * 100, 0)} %`, Check(sustained_ratio, (x) => x >= 0.85)],
    ['enqueue→start p50 ≤ 2 ms', Fmt(v('latency_p50')), Check(v('latency_p50'), (x) => x <= 2)],
    ['enqueue→start p99 ≤ 10 ms', Fmt(v('latency_p99')), Check(v('latency_p99'), (x) => x <= 10)],
    ['trigger→start p99 ≤ 50 ms', Fmt(v('trigger_start_p99')), Check(v('trigger_start_p99'), (x) => x <= 50)],
    ['idle load ≤ 2 stmt/s per node at 10,000 tasks', Fmt(v('idle_statements_per_s', { tasks: 10000 })),
     Check(v('idle_statements_per_s', { tasks: 10000 }), (x) => x <= 2)],
    ['cron lateness p99 ≤ 20 ms', Fmt(v('cron_lateness_p99')), Check(v('cron_lateness_p99'), (x) => x <= 20)],
  ];
  out.push(Table(['target (octop on PostgreSQL)', 'measured', 'result'], target_rows));
  out.push('');
  return out.join('\n');
}

const args = ParseArgs(process.argv.slice(2));
const lines = ReadLines(args.results);
const meta = args.meta && fs.existsSync(args.meta) ? JSON.parse(fs.readFileSync(args.meta, 'utf8')) : null;
const text = Render(lines, meta);
process.stdout.write(text + '\n');
if (args.md) fs.writeFileSync(args.md, text + '\n');
