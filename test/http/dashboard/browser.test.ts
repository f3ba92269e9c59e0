import { mkdirSync, mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import OpenAI from 'openai';
import { type Browser, chromium, type Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { conversation } from '../../support/conversation.js';
import { FakeUpstream } from '../../support/fake-upstream.js';
import { type Proxy, startProxy } from '../../support/proxy.js';
import { SimulatedLlama } from '../../support/simulated-llama.js';

/**
 * Issue 17, the dashboard in a real browser: headless Chromium from the
 * Debian packages (`CHROMIUM_PATH`, else /usr/bin/chromium; `.ci/run`
 * installs it), driven by playwright-core with no browser download. A
 * conversation runs through compactor against the simulated llama-server;
 * the page must show what a person would check: the conversation's row, its
 * epochs and tokens saved as /metrics counts them, the chart drawn, no
 * console error, and updates without a reload. Screenshots go to
 * test-artifacts/ (git-ignored); the figures of the page to
 * test-artifacts/dashboard.json.
 */

const ARTIFACTS = join(import.meta.dirname, '../../../test-artifacts');
// The README shows these two: each run takes them again, so they show the page as it is.
// The screenshots README shows live in docs/; they carry a clock and a port, so a run rewrites them only when
// asked (COMPACTOR_UPDATE_SCREENSHOTS=1), and otherwise into a folder of its own: a test run leaves the tree clean.
const DOCS = process.env['COMPACTOR_UPDATE_SCREENSHOTS'] === '1' ? join(import.meta.dirname, '../../../docs') : mkdtempSync(join(tmpdir(), 'compactor-screenshots-'));
const EXECUTABLE = process.env['CHROMIUM_PATH'] ?? '/usr/bin/chromium';
const WINDOW = 8_192;

let upstream: FakeUpstream;
let proxy: Proxy;
let browser: Browser;
let client: OpenAI;

beforeAll(async () => {
  upstream = await FakeUpstream.start();
  new SimulatedLlama(upstream, { window: WINDOW });
  // soft_threshold = threshold: every epoch is written by the request that needs it, so the metrics' `compacted` count is the page's epoch count.
  proxy = await startProxy(upstream, { listen: true, config: { compaction: { enabled: true, soft_threshold: 0.85 } } });
  client = new OpenAI({ baseURL: `${proxy.url}/v1`, apiKey: 'sk-test', maxRetries: 0, timeout: 15_000 });
  // Chromium refuses to start its sandbox as root (CI containers).
  browser = await chromium.launch({ executablePath: EXECUTABLE, args: ['--no-sandbox'] });
  mkdirSync(ARTIFACTS, { recursive: true });
});

afterAll(async () => {
  await browser?.close();
  await proxy?.close();
  await upstream?.close();
});

/** A request of the conversation at `turns` turns: the client keeps sending its whole history. */
async function ask(turns: number): Promise<void> {
  const messages = conversation({ turns, stepsPerTurn: 2, resultBytes: 400 }) as OpenAI.Chat.ChatCompletionMessageParam[];
  await client.chat.completions.create({ model: 'sim', messages, max_tokens: 16 });
}

/**
 * The chart can be read (issue 22, item 4): the window is near the top (the
 * scale is the forwarded size's, not the client's), the limits' labels never
 * overlap, its text is at least 10 px as shown, and big totals read 2.47M.
 */
async function expectReadableChart(page: Page): Promise<void> {
  const chart = (await page.locator('#chart').boundingBox())!;
  const windowLine = (await page.locator('line[data-limit="window"]').boundingBox())!;
  expect(windowLine.y - chart.y).toBeLessThan(chart.height * 0.2);
  const threshold = (await page.locator('line[data-limit="threshold"]').boundingBox())!;
  expect(threshold.y - chart.y).toBeLessThan(chart.height * 0.5);
  const labels = await page.locator('text.limit-label').evaluateAll((nodes) => nodes.map((node) => {
    const box = node.getBoundingClientRect();
    return { top: box.top, bottom: box.bottom, left: box.left, right: box.right, height: box.height };
  }));
  expect(labels.length).toBe(3);
  for (const [index, a] of labels.entries()) {
    expect(a.height).toBeGreaterThanOrEqual(10);
    expect(a.right).toBeLessThanOrEqual(chart.x + chart.width + 1);
    for (const b of labels.slice(index + 1)) expect(a.bottom <= b.top || b.bottom <= a.top).toBe(true);
  }
  await expect(page.evaluate('tokens(2473000)')).resolves.toBe('2.47M');
  await expect(page.locator('#chart-client').textContent()).resolves.toMatch(/^last request: forwarded [\d.]+k of the client's [\d.]+k \(window [\d.]+k\)/);
}

function counter(metrics: string, pattern: RegExp): number {
  let total = 0;
  for (const line of metrics.split('\n')) if (pattern.test(line)) total += Number(line.slice(line.lastIndexOf(' ') + 1));
  return total;
}

describe('issue 17 item 3: the dashboard in headless Chromium', () => {
  it('the dashboard shows the conversation as /metrics counts it, draws the chart, and updates without reload', async () => {
    for (const turns of [4, 8, 12, 16, 20, 21, 22]) await ask(turns);
    const metrics = await (await fetch(`${proxy.url}/metrics`)).text();
    const epochs = counter(metrics, /^compactor_compactions_total\{.*outcome="compacted"/);
    const saved = counter(metrics, /^compactor_client_prompt_tokens_total/) - counter(metrics, /^compactor_forwarded_prompt_tokens_total/);
    expect(epochs).toBeGreaterThan(0);

    const page = await browser.newPage({ viewport: { width: 1280, height: 800 } });
    const problems: string[] = [];
    page.on('console', (message) => {
      if (message.type() === 'error' || message.type() === 'warning') problems.push(message.text());
    });
    page.on('pageerror', (error) => problems.push(error.message));
    const response = await page.goto(`${proxy.url}/dashboard`);
    const pageBytes = (await response!.body()).length;
    const row = page.locator('tr[data-conversation]');
    await row.first().waitFor();
    const firstRenderMs = await page.evaluate(() => performance.now());

    await expect(row.count()).resolves.toBe(1);
    await expect(row.locator('[data-field="requests"]').textContent()).resolves.toBe('7');
    await expect(row.locator('[data-field="turns"]').textContent()).resolves.toBe('22');
    await expect(row.locator('[data-field="epochs"]').textContent()).resolves.toMatch(new RegExp(`^${epochs} \\(`));
    await expect(row.locator('[data-field="saved"]').getAttribute('data-value')).resolves.toBe(String(saved));
    await expect(row.locator('[data-field="kv"]').textContent()).resolves.toMatch(/^\d+%$/);
    await expect(page.locator('[data-total="tokensSaved"] b').textContent()).resolves.not.toBe('0');
    await expect(page.locator('#compactions li').count()).resolves.toBe(epochs);
    await expect(page.locator('#compactions li').first().textContent()).resolves.toMatch(/summary \(\d+\.\ds\): summarized \d+ messages -> 1 summary/);

    // The chart: both series with one point per request, and the window and threshold lines.
    const sent = (await page.locator('polyline[data-series="sent"]').getAttribute('points')) ?? '';
    expect(sent.split(' ')).toHaveLength(7);
    await expect(page.locator('polyline[data-series="forwarded"]').count()).resolves.toBe(1);
    await expect(page.locator('line[data-limit="window"]').count()).resolves.toBe(1);
    await expect(page.locator('line[data-limit="threshold"]').count()).resolves.toBe(1);

    await expectReadableChart(page);
    await page.screenshot({ path: join(DOCS, 'dashboard.png'), fullPage: false });

    // Live: another request shows up without a reload (the marker set in this document survives).
    await page.evaluate(() => Object.assign(globalThis, { sameDocument: true }));
    await ask(23);
    await page.locator('tr[data-conversation] [data-field="requests"]', { hasText: /^8$/ }).waitFor();
    await expect(page.evaluate(() => (globalThis as unknown as { sameDocument?: boolean }).sameDocument)).resolves.toBe(true);

    await page.setViewportSize({ width: 390, height: 844 });
    await page.locator('#chart').waitFor();
    await expectReadableChart(page);
    await page.locator('#chart').scrollIntoViewIfNeeded();
    await page.screenshot({ path: join(DOCS, 'dashboard-phone.png'), fullPage: false });
    expect(problems).toEqual([]);
    writeFileSync(join(ARTIFACTS, 'dashboard.json'), JSON.stringify({ pageBytes, firstRenderMs: Math.round(firstRenderMs) }, null, 2));
    await page.close();
  });

  it('the dashboard behind auth.keys asks for a key in a form, keeps it in the tab, and shows only that key’s conversations', async () => {
    const guarded = await startProxy(upstream, { listen: true, config: { auth: { keys: ['sk-a', 'sk-b'] } } });
    try {
      for (const key of ['sk-a', 'sk-b']) {
        const keyed = new OpenAI({ baseURL: `${guarded.url}/v1`, apiKey: key, maxRetries: 0, timeout: 15_000 });
        await keyed.chat.completions.create({ model: 'sim', messages: [{ role: 'user', content: `hello from ${key}` }], max_tokens: 4 });
      }
      const page = await browser.newPage({ viewport: { width: 1280, height: 800 } });
      const problems: string[] = [];
      page.on('pageerror', (error) => problems.push(error.message));
      await page.goto(`${guarded.url}/dashboard`);
      await page.locator('#login').waitFor();
      await expect(page.locator('#content').isHidden()).resolves.toBe(true);
      await page.fill('#key', 'sk-a');
      await page.click('#login button');
      await page.locator('tr[data-conversation]').first().waitFor();
      await expect(page.locator('tr[data-conversation]').count()).resolves.toBe(1);
      await expect(page.evaluate(() => (globalThis as unknown as { sessionStorage: { getItem(key: string): string | null } }).sessionStorage.getItem('compactor.dashboard.key'))).resolves.toBe('sk-a');
      await expect(page.locator('#totals').isHidden()).resolves.toBe(true);
      expect(problems).toEqual([]);
      await page.close();
    } finally {
      await guarded.close();
    }
  });
});
