/**
 * CPU per print of a known conversation (issue 40): KnownPrefixes.printOf on
 * own-cost.ts's agent body, a new body Buffer each time as the server reads
 * one, for each compiled build named (side-by-side.ts leaves them in
 * node_modules/.cache/), in turns so that the machine's load falls on each
 * alike. The body's own allocation and its `messages` scan are in every
 * figure; the difference between builds is the proof's.
 *
 *   npx tsx bench/known-prefix-proof.ts --builds=node_modules/.cache/compactor-main,node_modules/.cache/compactor-this --body=36k
 */
import { resolve } from 'node:path';
import { agentBody } from './load-client.js';

const option = (name: string, fallback: string): string => process.argv.find((arg) => arg.startsWith(`--${name}=`))?.slice(name.length + 3) ?? fallback;
const builds = option('builds', '').split(',').filter((build) => build !== '');
const size = option('body', '36k') === '200k' ? 200_000 : 36_000;
const rounds = Number(option('rounds', '2000'));
const turns = Number(option('turns', '2'));

interface Prefixes {
  printOf(seed: { tenant: string; model: string }, messages: unknown[], source?: Buffer): unknown;
}
const raw = Buffer.from(agentBody('bench', false, size));
const messages = (JSON.parse(raw.toString()) as { messages: unknown[] }).messages;
const seed = { tenant: 't', model: 'bench' };
const made = await Promise.all(
  builds.map(async (build) => {
    const module = (await import(resolve(build, 'src/compaction/epochs/known-prefixes.js'))) as { KnownPrefixes: new () => Prefixes };
    const prefixes = new module.KnownPrefixes();
    for (let index = 0; index < 200; index++) prefixes.printOf(seed, messages, Buffer.from(raw));
    return { build, prefixes };
  }),
);
console.log(`| build | µs CPU per print (${raw.length} byte body, ${rounds} prints a turn, load average ${(await import('node:os')).loadavg()[0]!.toFixed(2)}) |`);
console.log('|---|---|');
for (let turn = 0; turn < turns; turn++) {
  for (const { build, prefixes } of made) {
    const before = process.cpuUsage();
    for (let index = 0; index < rounds; index++) prefixes.printOf(seed, messages, Buffer.from(raw));
    const spent = process.cpuUsage(before);
    console.log(`| ${build} | ${((spent.user + spent.system) / rounds).toFixed(1)} |`);
  }
}
