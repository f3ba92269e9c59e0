#!/usr/bin/env node
import { readFileSync } from 'node:fs';
import { buildApp } from './app.js';
import { loadConfig, printableConfig } from './config/load.js';
import { USAGE } from './config/help-text.js';
import { connectionBoundOf } from './http/edge/connection-cap.js';
import { listenProblem, logInspection, pointsAtItself, probeUntilReady, startLine } from './http/ops/start.js';
import { inspectUpstream } from './upstream/inspect.js';

/**
 * The command line: read the configuration (exit 2 when it is invalid),
 * listen, and shut down gracefully on SIGTERM / SIGINT: stop taking requests
 * (503 + Retry-After + Connection: close, still listening), let those in
 * flight finish, then exit 0. When the grace period runs out, those still in
 * flight are ended in terms a client reads as a failure (an SSE error event,
 * a 503), then it exits 0 as well. A second signal exits at once.
 */

// Long enough for most answers in flight to finish; a local model's longest
// streams would need more, and a second signal ends them at once.
const SHUTDOWN_GRACE_MS = 30_000;

// Ending what is in flight is immediate (an abort, one event written): past this, something hangs.
const END_IN_FLIGHT_MS = 5_000;

/** The upstream URL as it may be logged: without credentials in it. */
function displayUrl(url: string): string {
  const parsed = new URL(url);
  parsed.username = '';
  parsed.password = '';
  return parsed.toString().replace(/\/$/, '');
}

/** The version in package.json, one folder above both src/main.ts and dist/main.js. */
function packageVersion(): string {
  const manifest = JSON.parse(readFileSync(new URL('../package.json', import.meta.url), 'utf8')) as { version: string };
  return manifest.version;
}

/** The version for the start line: a build copied without its package.json beside it still starts. */
function startVersion(): string {
  try {
    return packageVersion();
  } catch {
    return '(version unknown)';
  }
}

function exitInvalid(errors: readonly string[]): never {
  process.stderr.write(`compactor: invalid configuration\n${errors.map((error) => `  ${error}`).join('\n')}\n`);
  process.exit(2);
}

/** The replacement summary prompt, read once at start: a file that cannot be read is a configuration error. */
function readSummaryPrompt(file: string | null): string | undefined {
  if (file === null) return undefined;
  let text: string;
  try {
    text = readFileSync(file, 'utf8');
  } catch (error) {
    const code = error instanceof Error && 'code' in error ? String(error.code) : 'unreadable';
    exitInvalid([`compaction.summary.prompt_file: cannot read ${file} (${code})`]);
  }
  if (text.trim() === '') exitInvalid([`compaction.summary.prompt_file: ${file} is empty`]);
  return text;
}

async function main(): Promise<void> {
  if (process.argv[2] === 'doctor') {
    // Loaded only for the doctor, so the proxy's start pays nothing for it.
    const { runDoctor } = await import('./doctor/command.js');
    process.exitCode = await runDoctor(process.argv.slice(3), process.env, (text) => process.stdout.write(text));
    return;
  }
  const loaded = loadConfig({ argv: process.argv.slice(2), env: process.env });
  if (!loaded.ok) exitInvalid(loaded.errors);
  if (loaded.help) {
    process.stdout.write(`${USAGE}\n`);
    return;
  }
  if (loaded.version) {
    process.stdout.write(`compactor ${packageVersion()}\n`);
    return;
  }
  const { config } = loaded;
  const summaryPrompt = readSummaryPrompt(config.compaction.summary.prompt_file);
  if (loaded.printConfig) {
    process.stdout.write(printableConfig(config));
    return;
  }
  const app = buildApp(config, summaryPrompt === undefined ? {} : { summaryPrompt });

  const shutdown = shutdownOn(app);
  process.on('SIGTERM', shutdown);
  process.on('SIGINT', shutdown);

  let address: string;
  try {
    address = await app.listen({ host: config.listen.host, port: config.listen.port });
  } catch (error) {
    const problem = listenProblem(error, config.listen.host, config.listen.port);
    if (problem === null) {
      app.log.fatal({ err: error }, 'cannot listen');
      process.exit(1);
    }
    // A configuration error like the others: said on stderr, exit 2, no stack trace.
    exitInvalid([problem]);
  }
  for (const notice of loaded.notices) app.log.warn(notice);
  const upstreamUrl = displayUrl(config.upstream.url);
  const store = await app.proxy.describeStore();
  const version = startVersion();
  const connections = connectionBoundOf(config.limits.max_connections).why;
  app.log.info({ version, mode: config.compaction.mode, store, upstream: upstreamUrl, connections, config: loaded.file ?? '(defaults)' }, startLine({ version, address, config, store, upstream: upstreamUrl }));
  const found = await inspectUpstream(app.proxy.upstream);
  if (pointsAtItself(found)) {
    await app.close();
    exitInvalid([`upstream.url points at compactor itself (${upstreamUrl} answered its own 508 loop_detected); set it to the llama-server's address`]);
  }
  logInspection(app.log, upstreamUrl, found);
  if (found.state !== 'ready') {
    const probe = probeUntilReady(app.proxy.upstream, app.log, upstreamUrl);
    process.once('SIGTERM', () => probe.stop());
    process.once('SIGINT', () => probe.stop());
  }
}

/** The signal handler: drain the requests in flight (a grace period, then end them), close, exit; a second signal exits at once. */
function shutdownOn(app: ReturnType<typeof buildApp>): (signal: NodeJS.Signals) => void {
  let stopping = false;
  return (signal: NodeJS.Signals): void => {
    if (stopping) {
      app.log.warn({ signal }, 'second signal: exiting now');
      process.exit(1);
    }
    stopping = true;
    app.log.info({ signal }, 'shutting down: draining requests in flight');
    app.proxy.startDraining();
    const timer = setTimeout(() => {
      app.log.warn('requests still in flight after the grace period: ending them');
      app.proxy.endInFlight();
      setTimeout(() => {
        app.log.warn('requests still in flight after ending them: exiting');
        process.exit(1);
      }, END_IN_FLIGHT_MS).unref();
    }, SHUTDOWN_GRACE_MS);
    timer.unref();
    // Still listening until then, so a new request gets its 503 rather than a refused connection.
    void app.proxy
      .whenIdle()
      .then(() => app.close())
      .then(
        () => {
          app.log.info('stopped');
          process.exit(0);
        },
        (error: unknown) => {
          app.log.error({ err: error }, 'error while shutting down');
          process.exit(1);
        },
      );
  };
}

await main();
