import { type ChildProcess, execFile } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, readdirSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { builtinModules } from 'node:module';
import { dirname, join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parse } from 'yaml';
import { spawnOwned } from '../support/child-processes.js';

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

  it('builds on the Node LTS slim image with dev dependencies, and runs on it with production ones only', () => {
    expect(stages.map((stage) => stage.name)).toEqual(['build', 'runtime']);
    // Node's LTS lines are the even ones.
    expect(Number(args.get('NODE_VERSION')) % 2).toBe(0);
    for (const stage of stages) expect(stage.from).toBe('node:${NODE_VERSION}-slim');
    expect(instructions(build!, 'RUN')).toEqual(expect.arrayContaining([expect.stringMatching(/^npm ci (?!.*--omit)/), 'npm run build']));
    expect(instructions(runtime!, 'RUN')).toEqual([expect.stringMatching(/^npm ci --omit=dev /)]);
    expect(JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')).scripts.build).toBe('tsc -p tsconfig.build.json');
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
  // Built once into a folder inside node_modules (so the packages resolve as they do in /app), then removed.
  let outDir: string;
  let child: ChildProcess | undefined;

  beforeAll(async () => {
    outDir = mkdtempSync(join(ROOT, 'node_modules', '.compactor-image-'));
    await run(process.execPath, [join(ROOT, 'node_modules/typescript/bin/tsc'), '-p', join(ROOT, 'tsconfig.build.json'), '--outDir', outDir], { cwd: ROOT });
    // /app/package.json says "type": "module"; the folder here has none of its own.
    writeFileSync(join(outDir, 'package.json'), JSON.stringify({ type: 'module' }));
  }, 120_000);
  afterAll(() => {
    child?.kill('SIGKILL');
    rmSync(outDir, { recursive: true, force: true });
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
    expect(llama['image']).toBe('ghcr.io/ggml-org/llama.cpp:server');
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
