import { mkdirSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import type { Step } from './scripted-llama.js';

/**
 * The small project the agents work on: a shop with two bugs (a discount
 * subtracted as an amount, a price printed without cents), a `node --test`
 * suite that catches them, and a few large files whose reads make tool
 * results big enough to force compaction mid-task.
 */

/** Lines of the large files: each read is a tool result of about 6 KB, under compactor's 8192-character pruning limit even with an agent's line numbers. */
const LARGE_FILE_LINES = 90;

function catalog(): string {
  const lines = ['// The catalog of the shop: id, name, price in cents, stock.', 'export const catalog = ['];
  for (let index = 1; index <= LARGE_FILE_LINES; index++) {
    lines.push(`  { id: 'sku-${String(index).padStart(4, '0')}', name: 'Item number ${index}', cents: ${index * 137}, stock: ${index % 17} },`);
  }
  lines.push('];', '');
  return lines.join('\n');
}

function prices(): string {
  const lines = ['sku,region,cents,currency,updated,warehouse,status'];
  for (let index = 1; index <= LARGE_FILE_LINES; index++) {
    lines.push(`sku-${String(index).padStart(4, '0')},region-${index % 7},${index * 211},USD,2026-0${(index % 9) + 1}-1${index % 10},warehouse-${index % 3},in stock`);
  }
  return `${lines.join('\n')}\n`;
}

function notes(title: string): string {
  const lines = [`# ${title}`, ''];
  for (let index = 1; index <= LARGE_FILE_LINES; index++) {
    lines.push(`- Entry ${index}: the shop keeps prices in cents and formats them only at the edge.`);
  }
  return `${lines.join('\n')}\n`;
}

/** A cart module of realistic size (about 1.4 KB): a re-read after an edit is a result worth compressing. */
const CART = `// The cart: line items in cents, totals, discounts. Prices stay in cents until they are printed.

/** One line of the cart: a catalog item and how many of it. */
export function lineItem(item, quantity) {
  if (!Number.isInteger(quantity) || quantity < 1) throw new Error('quantity must be a positive integer');
  return { id: item.id, cents: item.cents, quantity };
}

/** The cart with one more line, or the line's quantity raised when the item is already in it. */
export function addItem(items, item, quantity = 1) {
  const existing = items.find((line) => line.id === item.id);
  if (existing === undefined) return [...items, lineItem(item, quantity)];
  return items.map((line) => (line.id === item.id ? { ...line, quantity: line.quantity + quantity } : line));
}

/** The cart without the item. */
export function removeItem(items, id) {
  return items.filter((line) => line.id !== id);
}

/** How many of an item the cart holds. */
export function quantityOf(items, id) {
  return items.find((line) => line.id === id)?.quantity ?? 0;
}

/** How many items the cart holds in all. */
export function itemCount(items) {
  return items.reduce((count, line) => count + line.quantity, 0);
}

export function total(items) {
  return items.reduce((sum, item) => sum + item.cents * item.quantity, 0);
}

export function applyDiscount(subtotal, percent) {
  return subtotal - percent;
}
`;

const FORMAT = `// Formatting at the edge: the shop keeps cents everywhere else.

/** A count with its noun, singular or plural. */
export function formatCount(count, noun) {
  return count + ' ' + noun + (count === 1 ? '' : 's');
}

/** A percentage as the receipt prints it. */
export function formatPercent(percent) {
  return percent + '%';
}

/** A receipt line: name, quantity and price, padded into columns. */
export function formatLine(name, quantity, cents) {
  return name.padEnd(32) + String(quantity).padStart(4) + formatPrice(cents).padStart(12);
}

export function formatPrice(cents) {
  return '$' + cents / 100;
}
`;

const CART_TEST = `import { test } from 'node:test';
import assert from 'node:assert/strict';
import { total, applyDiscount } from '../src/cart.js';
import { formatPrice } from '../src/format.js';

test('total sums cents times quantity', () => {
  assert.equal(total([{ cents: 250, quantity: 2 }, { cents: 100, quantity: 1 }]), 600);
});

test('applyDiscount takes a percentage off', () => {
  assert.equal(applyDiscount(10000, 10), 9000);
});

test('formatPrice prints dollars and cents', () => {
  assert.equal(formatPrice(1234), '$12.34');
  assert.equal(formatPrice(500), '$5.00');
});
`;

/** Tests of the catalog, one per item: what makes each `node --test` run a result of realistic size (about 4 KB). */
export const CATALOG_TESTS = 30;

const CATALOG_TEST = `import { test } from 'node:test';
import assert from 'node:assert/strict';
import { catalog } from '../src/catalog.js';

for (const item of catalog.slice(0, ${CATALOG_TESTS})) {
  test(\`\${item.id} has a positive price in cents\`, () => {
    assert.ok(Number.isInteger(item.cents) && item.cents > 0);
  });
}
`;

export const TAX = `export function withTax(cents, rate) {
  return Math.round(cents * (1 + rate));
}
`;

export const TAX_TEST = `import { test } from 'node:test';
import assert from 'node:assert/strict';
import { withTax } from '../src/tax.js';

test('withTax adds the rate and rounds to a cent', () => {
  assert.equal(withTax(1000, 0.075), 1075);
});
`;

/** The files as the test writes them. */
export const PROJECT_FILES: Readonly<Record<string, string>> = {
  'package.json': `${JSON.stringify({ name: 'shop', version: '1.0.0', type: 'module', scripts: { test: 'node --test' } }, null, 2)}\n`,
  'src/cart.js': CART,
  'src/format.js': FORMAT,
  'src/catalog.js': catalog(),
  'test/cart.test.js': CART_TEST,
  'test/catalog.test.js': CATALOG_TEST,
  'data/prices.csv': prices(),
  'docs/notes.md': notes('Notes'),
  'docs/changelog.md': notes('Changelog'),
  'docs/design.md': notes('Design'),
  'docs/faq.md': notes('Questions'),
  'data/stock.csv': prices().replaceAll('USD', 'units'),
  'data/orders.csv': prices().replaceAll('USD', 'order'),
};

export const FIXED_DISCOUNT = 'return subtotal - (subtotal * percent) / 100;';
export const FIXED_FORMAT = "return '$' + (cents / 100).toFixed(2);";
export const CHANGELOG_LINE = '- Fixed applyDiscount and formatPrice; added withTax.';

/** Writes the project into `directory`. */
export function writeProject(directory: string): void {
  for (const [path, content] of Object.entries(PROJECT_FILES)) {
    mkdirSync(dirname(join(directory, path)), { recursive: true });
    writeFileSync(join(directory, path), content);
  }
}

export const TASK = 'Fix the failing tests of this shop project, add a withTax helper with a test, and note the changes in docs/changelog.md.';

/**
 * The agent's task, one step per main-task request: 30 requests, from
 * listing the files to the final answer. As coding agents do, it reads back
 * every file it edits and re-runs the same test command after each change
 * (five runs of about 4 KB: two failures, then one, then none), beside a
 * failing read and nine large results of distinct files (qwen-code answers a
 * second read of an unchanged file with a short notice, so only the reads
 * after an edit return the file again) (three steps make two calls at once,
 * as agents do when the calls do not depend on each other).
 */
export const SHOP_SCRIPT: readonly Step[] = [
  { calls: [{ kind: 'list', pattern: '**/*.js' }] },
  { calls: [{ kind: 'read', path: 'package.json' }] },
  { calls: [{ kind: 'shell', command: 'node --test' }] },
  { calls: [{ kind: 'read', path: 'src/cart.js' }] },
  { calls: [{ kind: 'read', path: 'src/catalog.js' }, { kind: 'read', path: 'docs/notes.md' }] },
  { calls: [{ kind: 'grep', pattern: 'applyDiscount' }] },
  { calls: [{ kind: 'read', path: 'src/discounts.js' }] },
  { calls: [{ kind: 'shell', command: 'cat data/prices.csv' }] },
  { calls: [{ kind: 'read', path: 'docs/changelog.md' }] },
  { calls: [{ kind: 'edit', path: 'src/cart.js', old: 'return subtotal - percent;', new: FIXED_DISCOUNT }] },
  { calls: [{ kind: 'read', path: 'src/cart.js' }] },
  { calls: [{ kind: 'shell', command: 'node --test' }] },
  { calls: [{ kind: 'read', path: 'src/format.js' }, { kind: 'grep', pattern: 'formatPrice' }] },
  { calls: [{ kind: 'edit', path: 'src/format.js', old: "return '$' + cents / 100;", new: FIXED_FORMAT }] },
  { calls: [{ kind: 'read', path: 'src/format.js' }] },
  { calls: [{ kind: 'shell', command: 'node --test' }] },
  { calls: [{ kind: 'read', path: 'test/cart.test.js' }] },
  { calls: [{ kind: 'read', path: 'docs/design.md' }, { kind: 'shell', command: 'cat data/stock.csv' }] },
  { calls: [{ kind: 'write', path: 'src/tax.js', content: TAX }] },
  { calls: [{ kind: 'write', path: 'test/tax.test.js', content: TAX_TEST }] },
  { calls: [{ kind: 'shell', command: 'node --test' }] },
  { calls: [{ kind: 'read', path: 'docs/faq.md' }] },
  { calls: [{ kind: 'read', path: 'src/tax.js' }] },
  { calls: [{ kind: 'shell', command: 'cat data/orders.csv' }] },
  { calls: [{ kind: 'grep', pattern: 'withTax' }] },
  { calls: [{ kind: 'shell', command: 'tail -n 5 docs/changelog.md' }] },
  { calls: [{ kind: 'edit', path: 'docs/changelog.md', old: '# Changelog\n', new: `# Changelog\n\n${CHANGELOG_LINE}\n` }] },
  { calls: [{ kind: 'read', path: 'docs/changelog.md' }] },
  { calls: [{ kind: 'shell', command: 'node --test' }] },
  { answer: 'Fixed applyDiscount and formatPrice, added withTax with a test, and noted it in docs/changelog.md. All tests pass.' },
];
