/**
 * autocannon in a process of its own, for bench/performance.ts: the load
 * generator shares no event loop with the script that drives the run (and
 * its tsx loader), as autocannon's CLI would run.
 *
 *   node load.js '{"url":…,"seconds":6,"connections":32,"headers":{…},"body":"…"}'
 *
 * Prints one JSON line: `{ average, total, non2xx, errors, timeouts }`.
 */
import autocannon from 'autocannon';

interface Job {
  readonly url: string;
  readonly seconds: number;
  readonly connections: number;
  readonly headers: Record<string, string>;
  readonly body: string;
  /** Requests per second offered in all (a fixed load); as many as answered when absent. */
  readonly rate?: number;
}

const job = JSON.parse(process.argv[2]!) as Job;
const result = await autocannon({
  url: job.url,
  method: 'POST',
  headers: job.headers,
  body: job.body,
  connections: job.connections,
  duration: job.seconds,
  ...(job.rate === undefined ? {} : { overallRate: job.rate }),
});
process.stdout.write(
  `${JSON.stringify({ average: result.requests.average, total: result.requests.total, non2xx: result.non2xx, errors: result.errors, timeouts: result.timeouts })}\n`,
);
