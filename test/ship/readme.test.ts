import { existsSync, readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { USAGE } from '../../src/config/help-text.js';
import { defaultConfig } from '../../src/config/schema.js';
import { leafPaths } from '../support/config-paths.js';
import { Metrics } from '../../src/http/ops/metrics.js';

/** The README stays true to the code: its commands, keys, variables, flags, metrics and paths exist. */

const ROOT = join(dirname(fileURLToPath(import.meta.url)), '../..');
const README = readFileSync(join(ROOT, 'README.md'), 'utf8');

describe('README.md', () => {
  it('opens with the two commands: start and test', () => {
    const firstBlock = /```sh\n([\s\S]*?)```/.exec(README)?.[1] ?? '';
    expect(firstBlock).toMatch(/^npm ci && npm start\b/m);
    expect(firstBlock).toMatch(/^npm ci && npm test\b/m);
  });

  it('runs only npm scripts that exist', () => {
    const scripts = Object.keys((JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as { scripts: Record<string, string> }).scripts);
    const used = [...README.matchAll(/npm run ([\w:-]+)/g)].map((match) => match[1]!);
    expect(used.length).toBeGreaterThan(0);
    for (const script of used) expect(scripts, script).toContain(script);
  });

  it('has every configuration key in its table, and every variable and flag of --help', () => {
    const table = README.slice(README.indexOf('| key | default |'));
    for (const path of leafPaths(defaultConfig())) expect(table, path).toContain(`| \`${path}\` |`);
    const names = [...USAGE.matchAll(/(COMPACTOR_[A-Z_]+|--[a-z-]+)/g)].map((match) => match[1]!);
    for (const name of new Set(names)) if (!['--config', '--help'].includes(name)) expect(README, name).toContain(name);
  });

  it('lists every metric compactor registers', () => {
    for (const metric of new Metrics().registry.getMetricsAsArray()) expect(README, metric.name).toContain(`\`${metric.name}\``);
  });

  it('links only to files that exist, and each page of docs/ it links to links back', () => {
    const links = [...README.matchAll(/\]\((?!https?:|#)([^)#\s]+)/g)].map((match) => match[1]!);
    expect(links.length).toBeGreaterThan(0);
    for (const link of links) expect(existsSync(join(ROOT, link)), link).toBe(true);
    for (const page of links.filter((link) => /^docs\/[\w-]+\.md$/.test(link))) {
      const text = readFileSync(join(ROOT, page), 'utf8');
      expect(text, page).toContain('](../README.md');
      for (const [, target] of text.matchAll(/\]\((?!https?:|#)([^)#\s]+)/g)) expect(existsSync(join(ROOT, 'docs', target!)), `${page}: ${target}`).toBe(true);
    }
  });

  it('names only files that exist', () => {
    const paths = [...README.matchAll(/`((?:docker|test|src|bench|scripts)\/[\w./-]*[\w/]|[\w.-]+\.(?:yaml|md)|LICENSE)`/g)].map((match) => match[1]!);
    expect(paths).toContain('docker/README.md');
    expect(paths).toContain('DESIGN.md');
    for (const path of paths) expect(existsSync(join(ROOT, path)), path).toBe(true);
  });
});

describe('first contact (issue 37)', () => {
  const firstScreen = README.split('\n').slice(0, 60).join('\n');

  it('README says in its first screen which servers are supported and how the window is found for each', () => {
    for (const server of ['llama-server', 'router mode', 'Ollama', 'vLLM', 'LM Studio', 'OpenAI-compatible']) expect(firstScreen, server).toContain(server);
    for (const source of ['/props', '/api/ps', '/api/show', 'max_model_len', 'loaded_context_length', 'status.args']) expect(firstScreen, source).toContain(source);
  });

  it('README mentions the three chat formats compactor reads', () => {
    for (const route of ['/v1/chat/completions', '/v1/messages', '/v1/responses']) expect(README, route).toContain(route);
  });

  it('docker/README.md calls no minor-line tag pinned', () => {
    const docker = readFileSync(join(ROOT, 'docker/README.md'), 'utf8').replace(/\s+/g, ' ');
    for (const sentence of docker.split(/(?<=\.) /)) {
      if (!/\bpinned\b/.test(sentence)) continue;
      // A tag named in a sentence that says "pinned" has a full version (x.y.z) or a build number.
      for (const [, tag] of sentence.matchAll(/`[\w./-]+:([\w.-]+)`/g)) expect(tag, sentence).toMatch(/^\d+\.\d+\.\d+|b\d+/);
    }
  });
});
