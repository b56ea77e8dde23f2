// One real Backstage backend (@backstage/backend-defaults, pinned in package-lock.json) with one plugin,
// `interop`, whose global tasks log every run's start and end, for tests/backstage/interop.test.mjs.
//
// Configuration comes from the environment:
//   BS_CONFIG   path of an app-config YAML (backend.database, backend.listen, ...), written by the test
//   BS_TASKS    JSON [{id, frequency, timeout, runMs, firstRunMs}], frequency/timeout as Backstage's schedule
//               accepts; the first run of a task across all nodes (a flag file beside BS_LOG) lasts firstRunMs
//   BS_LOG      file the run lines are appended to: "S <node> <task> <epoch ms>" / "E <node> <task> <epoch ms> <how>"
//   BS_NODE     this node's name in those lines
// CommonJS because @backstage/backend-defaults is published as CommonJS only.
'use strict';
const fs = require('node:fs');
const { createBackend } = require('@backstage/backend-defaults');
const { createBackendPlugin, coreServices } = require('@backstage/backend-plugin-api');

process.argv.push('--config', process.env.BS_CONFIG);
const node = process.env.BS_NODE;
const log = fs.openSync(process.env.BS_LOG, 'a');
// One write per line on an O_APPEND file: lines of concurrent processes never interleave.
const line = (text) => fs.writeSync(log, `${text}\n`);

const interop = createBackendPlugin({
  pluginId: 'interop',
  register(env) {
    env.registerInit({
      deps: { scheduler: coreServices.scheduler, logger: coreServices.logger },
      async init({ scheduler }) {
        for (const task of JSON.parse(process.env.BS_TASKS)) {
          await scheduler.scheduleTask({
            id: task.id,
            frequency: task.frequency,
            timeout: task.timeout,
            scope: 'global',
            fn: async (signal) => {
              line(`S ${node} ${task.id} ${Date.now()}`);
              const flag = `${process.env.BS_LOG}.${task.id}.ran`;
              const first = task.firstRunMs !== undefined && !fs.existsSync(flag);
              if (first) fs.writeFileSync(flag, node);
              const how = await new Promise((resolve) => {
                const timer = setTimeout(() => resolve('done'), first ? task.firstRunMs : task.runMs);
                signal.addEventListener('abort', () => {
                  clearTimeout(timer);
                  resolve('aborted');
                });
              });
              line(`E ${node} ${task.id} ${Date.now()} ${how}`);
            },
          });
        }
        line(`READY ${node} 0 ${Date.now()}`);
      },
    });
  },
});

const backend = createBackend();
backend.add(interop);
backend.start().catch((error) => {
  console.error(`backstage-node: start failed: ${error.stack || error}`);
  process.exit(1);
});
