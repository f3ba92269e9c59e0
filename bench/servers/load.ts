/**
 * autocannon in a process of its own, for bench/performance.ts: the load
 * generator shares no event loop with the script that drives the run (and
 * its tsx loader), as autocannon's CLI would run.
 *
 *   node load.js '{"url":…,"seconds":6,"connections":32,"headers":{…},"body":"…"}'
 *
 * Prints one JSON line: `{ average, total, non2xx, errors, timeouts }`.
 */
import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { join } from 'node:path';
import type autocannonType from 'autocannon';
import type { LoadJob, LoadResult } from '../load-client.js';

// autocannon is installed in bench/node_modules (npm run bench:install), which this
// file, compiled into node_modules/.cache/, would not find by itself: the bench runs from the root.
const autocannon = createRequire(join(process.cwd(), 'bench', 'package.json'))('autocannon') as typeof autocannonType;

// `@path`: the job is in that file (a large body does not fit in one argument).
const argument = process.argv[2]!;
const job = JSON.parse(argument.startsWith('@') ? readFileSync(argument.slice(1), 'utf8') : argument) as LoadJob;
const result = await autocannon({
  url: job.url,
  method: 'POST',
  headers: job.headers,
  body: job.body,
  connections: job.connections,
  duration: job.seconds,
  ...(job.rate === undefined ? {} : { overallRate: job.rate }),
  ...(job.amount === undefined ? {} : { amount: job.amount }),
});
const answer: LoadResult = { average: result.requests.average, total: result.requests.total, non2xx: result.non2xx, errors: result.errors, timeouts: result.timeouts };
process.stdout.write(`${JSON.stringify(answer)}\n`);
