import { type ChildProcess, execFile } from 'node:child_process';
import { cpSync, existsSync, mkdirSync, mkdtempSync, readFileSync, readdirSync, rmSync, statSync, symlinkSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { createServer } from 'node:net';
import { builtinModules } from 'node:module';
import { dirname, join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parse } from 'yaml';
import { spawnOwned } from '../support/child-processes.js';
import { type Lock, installedFromLock } from '../support/lock-tree.js';

/**
 * The container files, checked without a Docker engine: the Dockerfile's
 * stages use files that exist and its start command runs from a build with
 * production dependencies only; its health check works against the real
 * process; docker/compose.yaml parses with the expected services.
 */

const ROOT = join(dirname(fileURLToPath(import.meta.url)), '../..');
const run = promisify(execFile);

interface Instruction {
  readonly keyword: string;
  readonly argument: string;
}

interface Stage {
  readonly from: string;
  readonly name: string;
  readonly instructions: Instruction[];
}

/** The Dockerfile as stages of instructions (comments dropped, continuation lines joined). */
function dockerfile(): { args: Map<string, string>; stages: Stage[] } {
  const text = readFileSync(join(ROOT, 'Dockerfile'), 'utf8');
  const lines = text
    .replace(/\\\n/g, ' ')
    .split('\n')
    .map((line) => line.trim())
    .filter((line) => line !== '' && !line.startsWith('#'));
  const args = new Map<string, string>();
  const stages: Stage[] = [];
  for (const line of lines) {
    const [keyword = '', ...rest] = line.split(/\s+/);
    const argument = rest.join(' ');
    if (keyword === 'ARG' && stages.length === 0) {
      const [name = '', value = ''] = argument.split('=');
      args.set(name, value);
    } else if (keyword === 'FROM') {
      const match = /^(\S+)\s+AS\s+(\S+)$/i.exec(argument);
      stages.push({ from: match?.[1] ?? argument, name: match?.[2] ?? '', instructions: [] });
    } else {
      stages.at(-1)?.instructions.push({ keyword, argument });
    }
  }
  return { args, stages };
}

function instructions(stage: Stage, keyword: string): string[] {
  return stage.instructions.filter((instruction) => instruction.keyword === keyword).map((instruction) => instruction.argument);
}

/** Files under `directory`, relative to the repository. */
function filesUnder(directory: string): string[] {
  return readdirSync(directory, { recursive: true, encoding: 'utf8' })
    .map((entry) => join(directory, entry))
    .filter((path) => statSync(path).isFile());
}

describe('Dockerfile', () => {
  const { args, stages } = dockerfile();
  const [build, runtime] = stages;

  it("builds and runs on the exact Node LTS release .ci/run tests, the build stage installing only what tsc needs", () => {
    expect(stages.map((stage) => stage.name)).toEqual(['build', 'runtime']);
    const node = args.get('NODE_VERSION') ?? '';
    // An exact release of an LTS line (the even ones), the one the suite also runs on.
    expect(node).toMatch(/^\d+\.\d+\.\d+$/);
    expect(Number(node.split('.')[0]) % 2).toBe(0);
    expect(/^LTS_NODE_VERSION=(\S+)$/m.exec(readFileSync(join(ROOT, '.ci/run'), 'utf8'))?.[1]).toBe(node);
    for (const stage of stages) expect(stage.from).toBe('node:${NODE_VERSION}-slim');
    const manifest = JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as { scripts: Record<string, string>; devDependencies: Record<string, string> };
    const [production, compiler, compile, ...rest] = instructions(build!, 'RUN');
    expect(rest).toEqual([]);
    expect(production).toMatch(/^npm ci --omit=dev --ignore-scripts /);
    // The compiler and Node's types, at the versions the tests compile with, and no other package.
    const packages = compiler!.split(/\s+/).filter((word) => /^(@[\w-]+\/)?[\w.-]+@/.test(word));
    expect(compiler).toMatch(/^npm install --prefix (\S+) --ignore-scripts /);
    expect(packages.sort()).toEqual([`@types/node@${manifest.devDependencies['@types/node']}`, `typescript@${manifest.devDependencies['typescript']}`]);
    const prefix = /--prefix (\S+)/.exec(compiler!)![1]!;
    expect(compile).toBe(`${prefix}/node_modules/.bin/tsc -p tsconfig.build.json --typeRoots ${prefix}/node_modules/@types`);
    expect(manifest.scripts['build']).toBe('tsc -p tsconfig.build.json');
    expect(instructions(runtime!, 'RUN')).toEqual([expect.stringMatching(/^npm ci --omit=dev /)]);
  });

  it('avoids the mistakes hadolint flags', () => {
    for (const stage of stages) {
      // DL3006/DL3007: a tag, never latest. DL3020: COPY, not ADD. DL3000: an absolute WORKDIR. DL3003: no cd.
      expect(stage.from).toMatch(/:[^:]+$/);
      expect(stage.from).not.toMatch(/:latest\b/);
      expect(instructions(stage, 'ADD')).toEqual([]);
      for (const workdir of instructions(stage, 'WORKDIR')) expect(workdir).toMatch(/^\//);
      for (const command of instructions(stage, 'RUN')) {
        expect(command).not.toMatch(/(^|&&\s*)cd\s/);
        // DL3016: npm install names exact versions; DL3008-style floating system packages: none at all.
        expect(command).not.toMatch(/apt-get|apk add/);
        if (/^npm install\b/.test(command)) for (const word of command.split(/\s+/).slice(2).filter((w) => !w.startsWith('-') && !w.startsWith('/'))) expect(word).toMatch(/@\d+\.\d+\.\d+$/);
      }
      // DL4003/DL4004: one CMD at most; JSON form.
      expect(instructions(stage, 'CMD').length).toBeLessThanOrEqual(1);
      for (const command of instructions(stage, 'CMD')) expect(() => JSON.parse(command)).not.toThrow();
    }
    expect(new Set(stages.map((stage) => stage.name)).size).toBe(stages.length);
  });

  it('copies only files that exist and that .dockerignore lets through, and the build output the start command runs', () => {
    const ignored = readFileSync(join(ROOT, '.dockerignore'), 'utf8')
      .split('\n')
      .map((line) => line.trim())
      .filter((line) => line !== '' && !line.startsWith('#'));
    const isIgnored = (path: string): boolean =>
      ignored.some((pattern) => (pattern.startsWith('*') ? path.endsWith(pattern.slice(1)) : path === pattern || path.startsWith(`${pattern}/`)));
    for (const stage of stages) {
      for (const copy of instructions(stage, 'COPY')) {
        const parts = copy.split(/\s+/);
        if (parts[0]!.startsWith('--from=')) continue;
        for (const source of parts.slice(0, -1)) {
          expect(existsSync(join(ROOT, source)), source).toBe(true);
          expect(isIgnored(source), `${source} is in .dockerignore`).toBe(false);
        }
      }
    }
    // The runtime copies the build stage's output, where tsconfig.build.json puts it.
    expect(instructions(runtime!, 'COPY')).toContain('--from=build /app/dist ./dist');
    expect(instructions(build!, 'WORKDIR')).toEqual(['/app']);
    expect(JSON.parse(readFileSync(join(ROOT, 'tsconfig.build.json'), 'utf8')).compilerOptions.outDir).toBe('dist');
  });

  it('runs as a non-root user, on 0.0.0.0:8081 inside the container, with a health check that needs no curl', () => {
    const user = instructions(runtime!, 'USER');
    expect(user).toHaveLength(1);
    expect(user[0]).not.toMatch(/^(root|0)(:|$)/);
    expect(instructions(runtime!, 'EXPOSE')).toEqual(['8081']);
    expect(instructions(runtime!, 'ENV').join(' ')).toMatch(/COMPACTOR_HOST=0\.0\.0\.0/);
    const healthcheck = instructions(runtime!, 'HEALTHCHECK')[0] ?? '';
    expect(healthcheck).toMatch(/CMD \["node", "-e", /);
    expect(healthcheck).not.toMatch(/curl|wget/);
    expect(instructions(runtime!, 'CMD')).toEqual(['["node", "dist/main.js"]']);
  });
});

describe('the image start command, engine-free', () => {
  // The build stage as the Dockerfile lays it out, without an engine or a download: the sources and
  // the tsconfig files, the production dependencies the lock installs with --omit=dev (linked from
  // this install), and beside them only the compiler and Node's types. It compiles there, and the
  // start command runs from what it built.
  let stage: string;
  let outDir: string;
  let child: ChildProcess | undefined;

  beforeAll(async () => {
    stage = mkdtempSync(join(tmpdir(), 'compactor-image-'));
    for (const file of ['package.json', 'tsconfig.json', 'tsconfig.build.json']) cpSync(join(ROOT, file), join(stage, file));
    cpSync(join(ROOT, 'src'), join(stage, 'src'), { recursive: true });
    const lock = JSON.parse(readFileSync(join(ROOT, 'package-lock.json'), 'utf8')) as Lock;
    const target = { platform: process.platform, arch: process.arch, libc: 'glibc' };
    const link = (from: string, to: string): void => {
      mkdirSync(dirname(to), { recursive: true });
      symlinkSync(from, to, 'dir');
    };
    // Top-level packages only: a nested one comes with the folder of the package it is nested in.
    for (const path of installedFromLock(lock, target, { omitDev: true })) if (!path.slice('node_modules/'.length).includes('/node_modules/')) link(join(ROOT, path), join(stage, path));
    for (const name of ['typescript', '@types/node']) link(join(ROOT, 'node_modules', name), join(stage, 'compiler/node_modules', name));
    const compiler = join(stage, 'compiler/node_modules');
    await run(process.execPath, [join(compiler, 'typescript/bin/tsc'), '-p', join(stage, 'tsconfig.build.json'), '--typeRoots', join(compiler, '@types')], { cwd: stage });
    outDir = join(stage, 'dist');
  }, 180_000);
  afterAll(() => {
    child?.kill('SIGKILL');
    rmSync(stage, { recursive: true, force: true });
  });

  it('compiles with the production dependencies and the compiler alone, as the build stage has them', () => {
    expect(existsSync(join(outDir, 'main.js'))).toBe(true);
    expect(existsSync(join(stage, 'node_modules/typescript'))).toBe(false);
    expect(existsSync(join(stage, 'node_modules/fastify'))).toBe(true);
  });

  it('imports nothing at run time beyond Node built-ins and the production dependencies', () => {
    const manifest = JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as { dependencies: Record<string, string> };
    const allowed = new Set([...Object.keys(manifest.dependencies), ...builtinModules]);
    const imported = new Set<string>();
    for (const file of filesUnder(outDir).filter((path) => path.endsWith('.js'))) {
      const code = readFileSync(file, 'utf8');
      for (const match of code.matchAll(/(?:^|\n)\s*(?:import|export)\s[^'"]*?from\s+['"]([^'"]+)['"]|import\(\s*['"]([^'"]+)['"]\s*\)/g)) {
        const specifier = match[1] ?? match[2]!;
        if (specifier.startsWith('.')) continue;
        const name = specifier.startsWith('node:') ? specifier.slice(5) : specifier.startsWith('@') ? specifier.split('/').slice(0, 2).join('/') : specifier.split('/')[0]!;
        imported.add(name);
        expect(allowed.has(name), `${relative(outDir, file)} imports ${specifier}`).toBe(true);
      }
    }
    expect(imported).toContain('fastify');
    expect(imported).toContain('prom-client');
  });

  it('`node dist/main.js --print-config` runs from the build, with the image environment', async () => {
    const { stdout } = await run(process.execPath, [join(outDir, 'main.js'), '--print-config'], {
      cwd: ROOT,
      env: { ...process.env, NODE_ENV: 'production', COMPACTOR_HOST: '0.0.0.0', COMPACTOR_PORT: '8081', COMPACTOR_CONFIG: '' },
    });
    const printed = parse(stdout) as { listen: unknown; upstream: { url: string } };
    expect(printed.listen).toEqual({ host: '0.0.0.0', port: 8081 });
    expect(printed.upstream.url).toBe('http://127.0.0.1:8080');
  });

  it("the Dockerfile's HEALTHCHECK command passes against the running process, and fails once it is gone", async () => {
    const healthcheck = dockerfile().stages.at(-1)!.instructions.find((instruction) => instruction.keyword === 'HEALTHCHECK')!.argument;
    const command = JSON.parse(healthcheck.slice(healthcheck.indexOf('CMD ') + 4)) as string[];
    expect(command[0]).toBe('node');
    const port = await freePort();
    const env = { ...process.env, COMPACTOR_HOST: '127.0.0.1', COMPACTOR_PORT: String(port), COMPACTOR_CONFIG: '', COMPACTOR_LOG_LEVEL: 'info' };
    child = spawnOwned(process.execPath, [join(outDir, 'main.js')], { cwd: ROOT, env });
    await new Promise<void>((resolve, reject) => {
      let output = '';
      child!.stdout!.on('data', (chunk: Buffer) => {
        output += chunk.toString();
        if (/"msg":"compactor [^"]* listening on /.test(output)) resolve();
      });
      child!.once('exit', () => reject(new Error(`exited before listening:\n${output}`)));
    });
    const check = async (): Promise<number> => {
      try {
        await run(process.execPath, command.slice(1), { env, timeout: 10_000 });
        return 0;
      } catch (error) {
        return (error as { code?: number }).code ?? -1;
      }
    };
    expect(await check()).toBe(0);
    const exited = new Promise((resolve) => child!.once('exit', resolve));
    child.kill('SIGTERM');
    await exited;
    child = undefined;
    expect(await check()).toBe(1);
  });
});

describe('docker/compose.yaml', () => {
  const compose = parse(readFileSync(join(ROOT, 'docker/compose.yaml'), 'utf8')) as {
    services: Record<string, Record<string, unknown>>;
  };
  const llama = compose.services['llama-server']!;
  const compactor = compose.services['compactor']!;

  /** The services `docker compose up` starts: those of no profile (the replicas profile is optional). */
  const byDefault = Object.keys(compose.services).filter((name) => compose.services[name]!['profiles'] === undefined);

  it('has llama-server and compactor, and publishes compactor alone', () => {
    expect(byDefault.sort()).toEqual(['compactor', 'llama-server']);
    expect(llama['ports']).toBeUndefined();
    expect(compactor['ports']).toEqual([expect.stringMatching(/^(127\.0\.0\.1:)?8081:8081$/)]);
  });

  it('runs llama-server from the official image with a mounted model, --port 8080, -c, -np and a /health check', () => {
    // The build the recordings in test/fixtures/llama-server/ were made with.
    const build = /build (b\d+)/.exec(readFileSync(join(ROOT, 'test/fixtures/llama-server/README.md'), 'utf8'))?.[1];
    expect(llama['image']).toBe(`ghcr.io/ggml-org/llama.cpp:server-${build}`);
    const command = llama['command'] as string[];
    const valueOf = (flag: string): string | undefined => command[command.indexOf(flag) + 1];
    expect(valueOf('--port')).toBe('8080');
    expect(valueOf('-c')).toMatch(/^\$\{CONTEXT_SIZE:-\d+\}$/);
    expect(valueOf('-np')).toBeDefined();
    expect(valueOf('-m')).toMatch(/^\/models\//);
    expect(llama['volumes']).toEqual([expect.stringMatching(/:\/models:ro$/)]);
    const healthcheck = llama['healthcheck'] as { test: string[] };
    expect(healthcheck.test.join(' ')).toContain('http://127.0.0.1:8080/health');
  });

  it('starts compactor from this repository once llama-server is healthy, pointed at it', () => {
    const build = compactor['build'] as { context: string; dockerfile: string };
    expect(existsSync(join(ROOT, 'docker', build.context, build.dockerfile))).toBe(true);
    expect(compactor['depends_on']).toEqual({ 'llama-server': { condition: 'service_healthy' } });
    expect((compactor['environment'] as Record<string, string>)['COMPACTOR_UPSTREAM_URL']).toBe('http://llama-server:8080');
  });

  it('has an optional replicas profile: Valkey and two compactor replicas sharing it, on loopback ports', () => {
    const profile = Object.keys(compose.services).filter((name) => (compose.services[name]!['profiles'] as string[] | undefined)?.includes('replicas'));
    expect(profile.sort()).toEqual(['compactor-a', 'compactor-b', 'valkey']);
    for (const name of ['compactor-a', 'compactor-b']) {
      const replica = compose.services[name]!;
      const environment = replica['environment'] as Record<string, string>;
      expect(environment['COMPACTOR_CACHE_STORE']).toBe('redis');
      expect(environment['COMPACTOR_REDIS_URL']).toBe('redis://valkey:6379');
      expect(replica['ports']).toEqual([expect.stringMatching(/^127\.0\.0\.1:\d+:8081$/)]);
      expect(replica['depends_on']).toEqual({ 'llama-server': { condition: 'service_healthy' }, valkey: { condition: 'service_healthy' } });
    }
  });

  it('pins every image it pulls: llama.cpp by build number, Valkey by minor', () => {
    for (const [name, service] of Object.entries(compose.services)) {
      const image = String(service['image']);
      if (service['build'] !== undefined) {
        // Built here from the Dockerfile (whose FROM is pinned): a local name, never pulled.
        expect(image, name).toBe('compactor:local');
        continue;
      }
      expect(image, name).not.toMatch(/:latest$|^[^:]+$/);
    }
    expect(compose.services['llama-server']!['image']).toMatch(/:server-b\d+$/);
    expect(compose.services['valkey']!['image']).toMatch(/^valkey\/valkey:\d+\.\d+$/);
  });

  it('builds every compactor service, gives each a health check, and lets it drain before being killed', () => {
    const main = readFileSync(join(ROOT, 'src/main.ts'), 'utf8');
    const constant = (name: string): number => Number(new RegExp(`const ${name} = ([\\d_]+);`).exec(main)![1]!.replace(/_/g, ''));
    const drainMs = constant('SHUTDOWN_GRACE_MS') + constant('END_IN_FLIGHT_MS');
    for (const name of ['compactor', 'compactor-a', 'compactor-b']) {
      const service = compose.services[name]!;
      expect(service['build'], name).toEqual({ context: '..', dockerfile: 'Dockerfile' });
      const grace = /^(\d+)s$/.exec(String(service['stop_grace_period']))?.[1];
      expect(Number(grace) * 1000, `${name} stop_grace_period`).toBeGreaterThan(drainMs);
    }
    for (const [name, service] of Object.entries(compose.services)) {
      const healthcheck = service['healthcheck'] as { test?: string[] } | undefined;
      expect(healthcheck?.test?.[0], `${name} healthcheck`).toBe('CMD');
    }
    // compactor's own check is the image's: the same request, also where HEALTHCHECK is not read.
    const imageCheck = dockerfile().stages.at(-1)!.instructions.find((instruction) => instruction.keyword === 'HEALTHCHECK')!.argument;
    const composeCheck = (compose.services['compactor']!['healthcheck'] as { test: string[] }).test;
    expect(composeCheck.slice(1, 3)).toEqual(['node', '-e']);
    expect(imageCheck).toContain('/healthz');
    expect(composeCheck[3]).toContain('http://127.0.0.1:8081/healthz');
  });
});

describe("README's docker run", () => {
  const readme = readFileSync(join(ROOT, 'README.md'), 'utf8');
  const commands = [...readme.matchAll(/docker run [^`\n]*/g)].map((match) => match[0]);

  it('reaches a llama-server on the Linux host as it is usually started (on its loopback)', () => {
    const linux = commands.find((command) => command.includes('--network host'));
    expect(linux, commands.join('\n')).toBeDefined();
    // Host networking: the image's 0.0.0.0 would publish compactor on every interface; loopback, as natively.
    expect(linux).toContain('-e COMPACTOR_HOST=127.0.0.1');
    expect(linux).not.toContain('-p ');
    // host.docker.internal resolves on Linux only with host-gateway, and then reaches no 127.0.0.1-bound server.
    for (const command of commands) if (command.includes('host.docker.internal') && !command.includes('host-gateway')) expect(readme).toMatch(/Docker Desktop/);
  });
});


function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const address = server.address();
      server.close(() => resolve(typeof address === 'object' && address !== null ? address.port : 0));
    });
  });
}

describe('docker/fleet.yaml (issue 39, docs/fleet.md)', () => {
  const fleet = parse(readFileSync(join(ROOT, 'docker/fleet.yaml'), 'utf8')) as { services: Record<string, Record<string, unknown>> };

  it('runs two llama-servers and one compactor that lists both, publishing only compactor, on loopback', () => {
    expect(Object.keys(fleet.services).sort()).toEqual(['compactor', 'llama-a', 'llama-b']);
    const environment = fleet.services['compactor']!['environment'] as Record<string, string>;
    expect(environment['COMPACTOR_UPSTREAM_URL']).toBe('http://llama-a:8080,http://llama-b:8080');
    expect(fleet.services['compactor']!['ports']).toEqual(['127.0.0.1:8081:8081']);
    for (const name of ['llama-a', 'llama-b']) {
      expect(fleet.services[name]!['ports']).toBeUndefined();
      expect(fleet.services[name]!['command']).toEqual(expect.arrayContaining(['--slot-save-path', '/slots']));
    }
  });
});
