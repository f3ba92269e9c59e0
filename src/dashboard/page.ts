import { CHART_SCRIPT } from './chart.js';

/**
 * The dashboard page (`GET /dashboard`): one hand-written HTML document with
 * its style and script inline, so nothing is fetched from the network at run
 * time and the build (tsc only) needs no step to copy assets. It polls
 * `GET /dashboard/state` every {@link POLL_MS} ms and draws the chart as
 * inline SVG. Every text that came from a client (model names) is set with
 * `textContent`, never as HTML.
 */

/** How often the page asks for the state: live enough to watch a conversation, ~1 small JSON request per 2 s per open tab. */
const POLL_MS = 2_000;

const STYLE = `
:root{color-scheme:light dark;--fg:#1d2330;--muted:#667085;--bg:#f7f8fa;--card:#fff;--line:#e3e6eb;--sent:#d9480f;--fwd:#1971c2;--win:#868e96;--thr:#e03131;--soft:#f08c00}
@media (prefers-color-scheme:dark){:root{--fg:#e9ecef;--muted:#98a2b3;--bg:#14171c;--card:#1d2128;--line:#2c313a}}
*{box-sizing:border-box}body{margin:0;font:14px/1.45 system-ui,-apple-system,"Segoe UI",sans-serif;color:var(--fg);background:var(--bg)}
header{display:flex;flex-wrap:wrap;gap:.5rem 1rem;align-items:baseline;padding:.9rem 1.2rem;border-bottom:1px solid var(--line);background:var(--card)}
h1{font-size:1.15rem;margin:0}h2{font-size:.95rem;margin:0 0 .6rem}.muted{color:var(--muted)}
.badge{font-size:.75rem;padding:.1rem .5rem;border-radius:1rem;background:var(--line)}.badge.observe{background:#fff3bf;color:#5c3c00}
main{padding:1rem 1.2rem;max-width:1400px}
#content{display:grid;grid-template-columns:minmax(0,1fr);gap:1rem}
.cards{display:grid;grid-template-columns:repeat(auto-fill,minmax(150px,1fr));gap:.6rem}
.card,section{background:var(--card);border:1px solid var(--line);border-radius:.5rem;padding:.7rem .9rem}
.card b{display:block;font-size:1.25rem}.card span{color:var(--muted);font-size:.8rem}
.wrap{overflow-x:auto}table{border-collapse:collapse;width:100%;font-variant-numeric:tabular-nums}
th,td{text-align:left;padding:.35rem .5rem;border-bottom:1px solid var(--line);white-space:nowrap}th{font-weight:600;color:var(--muted);font-size:.8rem}
tr[data-conversation]{cursor:pointer}tr.selected{background:rgba(25,113,194,.12)}td.report{white-space:normal;min-width:16rem}
code{font-family:ui-monospace,monospace}
svg{width:100%;height:auto;display:block}#chart-client{margin:0 0 .3rem;font-size:.85rem}.legend{display:flex;flex-wrap:wrap;gap:.8rem;font-size:.8rem;margin-top:.4rem}
.legend i{display:inline-block;width:.9rem;height:.2rem;vertical-align:middle;margin-right:.3rem}
ol{margin:0;padding-left:1.2rem}li{margin:.25rem 0}pre{white-space:pre-wrap;font-size:.8rem;max-height:16rem;overflow:auto}
form{display:flex;gap:.5rem;flex-wrap:wrap}input{font:inherit;padding:.35rem .5rem;min-width:16rem}button{font:inherit;padding:.35rem .8rem}
.error{color:var(--thr)}[hidden]{display:none!important}
@media (max-width:600px){header,main{padding:.7rem}.cards{grid-template-columns:repeat(2,1fr)}}
`;

/**
 * The conversation the page opens on: the most recent one that did
 * something (two requests or more, or a compaction), not a one-request "hi"
 * sent to try the proxy; the most recent of all when none did. The list comes
 * most recent first. Written in plain JavaScript: its source goes into the
 * page as it is.
 */
export function openingConversation(conversations: ReadonlyArray<{ readonly id: string; readonly requests: number; readonly epochs: number }>): string | null {
  const busy = conversations.find((c) => c.requests >= 2 || c.epochs > 0);
  return busy !== undefined ? busy.id : conversations.length > 0 ? conversations[0]!.id : null;
}

const SCRIPT = `
'use strict';
const POLL_MS = ${POLL_MS};
const openingConversation = ${openingConversation.toString()};
const KEY = 'compactor.dashboard.key';
const $ = (id) => document.getElementById(id);
let selected = null;
let polls = 0;
let timer = null;
let polling = false;
const el = (tag, text, attributes) => {
  const node = document.createElement(tag);
  if (text !== undefined && text !== null) node.textContent = String(text);
  for (const [name, value] of Object.entries(attributes || {})) node.setAttribute(name, value);
  return node;
};
const tokens = (n) => (n === null || n === undefined ? '-' : n < 1000 ? String(Math.round(n)) : n < 999950 ? (n / 1000).toFixed(1) + 'k' : (n / 1e6).toFixed(2) + 'M');
const seconds = (ms) => (ms / 1000).toFixed(1) + 's';
const percent = (x) => (x === null ? '-' : Math.round(x * 100) + '%');
const time = (at) => new Date(at).toLocaleTimeString();
const secs = (s) => (s === null || s === undefined ? '-' : s < 10 ? s.toFixed(2) + 's' : s.toFixed(1) + 's');
const breakText = (b) => b.cause + ' at message ' + b.index + ' (' + tokens(b.keptTokens) + ' kept, ' + tokens(b.recomputedTokens) + ' read again)';
const kinds = (record) => Object.entries(record).map(([k, v]) => k + ' ' + v).join(', ') || '-';

function card(label, value, field) {
  const node = el('div', null, { class: 'card', 'data-total': field });
  node.append(el('b', value), el('span', label));
  return node;
}

${CHART_SCRIPT}
let lastState = null;
// The chart is drawn at its shown size: a turned phone or a resized window redraws it.
window.addEventListener('resize', () => { if (lastState) render(lastState); });

function render(state) {
  lastState = state;
  $('upstream').textContent = state.upstream;
  const mode = $('mode');
  mode.textContent = state.mode;
  mode.className = 'badge ' + state.mode;
  const models = $('models');
  models.replaceChildren(
    ...state.models.map((m) => el('span', m.model + ': ' + (m.window === null ? 'window unknown' : tokens(m.window) + ' window'), { class: 'badge', 'data-model': m.model })),
    ...(state.speeds || []).map((s) => el('span', s.model + ': prefill ' + (s.prefill === null ? '-' : Math.round(s.prefill)) + ' t/s, decode ' + (s.decode === null ? '-' : Math.round(s.decode)) + ' t/s', { class: 'badge', 'data-speed': s.model })),
  );
  const totals = $('totals');
  totals.hidden = !state.totals;
  if (state.totals) {
    const t = state.totals;
    totals.replaceChildren(
      card('requests', t.requests, 'requests'),
      card('tokens saved', tokens(t.tokensSaved), 'tokensSaved'),
      card('summary time', seconds(t.summaryMs), 'summaryMs'),
      card('summary calls', t.summaryCalls, 'summaryCalls'),
      card('requests that waited', t.waits, 'waits'),
      card('refused requests', t.refused, 'refused'),
      card('failed requests', t.failed, 'failed'),
      card('summary failures', t.failures, 'failures'),
      card('truncations', t.truncations, 'truncations'),
      ...(state.mode === 'observe' ? [card('would compact', t.observed, 'observed')] : []),
    );
  }
  // Server seconds beside the tokens: the viewer's own (a tenant's conversations, or all of them for an admin).
  const server = $('server');
  const own = state.server || { prefill: 0, decode: 0, reprocess: 0 };
  const summaries = state.totals && state.totals.summarySeconds;
  server.replaceChildren(
    card('server s on answers (prefill + decode)', secs(own.prefill + own.decode), 'serverAnswers'),
    card('server s reading again after compactor changes', secs(own.reprocess), 'serverReprocess'),
    ...(summaries ? [card('server s on summaries', secs(summaries.prefill + summaries.decode), 'serverSummaries')] : []),
  );
  // A fleet's servers (issue 39): shown to an admin when there are two or more.
  $('fleet').hidden = !state.servers;
  $('servers').replaceChildren(...(state.servers || []).map((s) => {
    const row = el('tr', null, { 'data-server': s.server });
    row.append(el('td', s.server), el('td', s.up ? 'up' : 'taken out'), el('td', s.conversations), el('td', s.queued), el('td', s.slotsInUse), el('td', s.requests), el('td', s.failures));
    return row;
  }));
  const rows = $('conversations');
  if (!state.conversations.some((c) => c.id === selected)) selected = openingConversation(state.conversations);
  rows.replaceChildren(...state.conversations.map((c) => {
    const row = el('tr', null, { 'data-conversation': c.id });
    if (c.id === selected) row.className = 'selected';
    const tiers = Object.entries(c.tiers).map(([k, v]) => k + ' ' + v).join(', ');
    row.append(
      el('td', null), el('td', c.model), el('td', c.requests, { 'data-field': 'requests' }), el('td', c.refused + ' / ' + c.failed, { 'data-field': 'refused' }), el('td', c.turns, { 'data-field': 'turns' }),
      el('td', c.epochs + (tiers ? ' (' + tiers + ')' : ''), { 'data-field': 'epochs' }), el('td', c.reused, { 'data-field': 'reused' }),
      el('td', tokens(c.saved), { 'data-field': 'saved', 'data-value': String(c.saved) }), el('td', percent(c.kvReuse), { 'data-field': 'kv' }),
      el('td', c.slot === null || c.slot === undefined ? '-' : c.slot, { 'data-field': 'slot' }), el('td', kinds(c.repairs), { 'data-field': 'repairs' }), el('td', c.report || '-', { class: 'report', 'data-field': 'report' }),
      el('td', c.server ? secs(c.server.prefill + c.server.decode) + ' / ' + secs(c.server.reprocess) : '-', { 'data-field': 'server' }),
      el('td', c.breaks && c.breaks.length > 0 ? breakText(c.breaks[c.breaks.length - 1]) : '-', { 'data-field': 'breaks' }),
    );
    row.firstChild.append(el('code', c.id));
    row.addEventListener('click', () => { selected = c.id; render(state); });
    return row;
  }));
  $('empty').hidden = state.conversations.length > 0;
  const shown = state.conversations.find((c) => c.id === selected);
  drawChart(shown, state.models);
  const breaks = $('breaks');
  breaks.replaceChildren(...((shown && shown.breaks) || []).slice().reverse().map((b) => {
    const item = el('li', null, { 'data-cause': b.cause });
    item.append(el('span', time(b.at) + ' ', { class: 'muted' }), document.createTextNode(breakText(b)));
    return item;
  }));
  $('no-breaks').hidden = breaks.childElementCount > 0;
  const list = $('compactions');
  list.replaceChildren(...state.compactions.map((event) => {
    const item = el('li', null, { 'data-conversation': event.conversation });
    item.append(el('span', time(event.at) + ' ', { class: 'muted' }), el('code', event.conversation), document.createTextNode(' ' + event.tier + (event.background ? ' (background, ' : ' (') + seconds(event.milliseconds) + '): ' + event.report));
    if (state.showText && event.notes) {
      const details = el('details');
      details.append(el('summary', 'notes'), el('pre', event.notes));
      item.append(details);
    }
    return item;
  }));
  $('no-compactions').hidden = state.compactions.length > 0;
}

async function poll() {
  // One poll at a time: a key submitted while one is running is used by the next.
  if (polling) return;
  polling = true;
  const key = sessionStorage.getItem(KEY);
  try {
    const response = await fetch('dashboard/state', { headers: key ? { authorization: 'Bearer ' + key } : {}, cache: 'no-store' });
    if (response.status === 401) {
      $('login').hidden = false;
      $('content').hidden = true;
      $('login-error').hidden = !key;
      return;
    }
    if (!response.ok) throw new Error('state: HTTP ' + response.status);
    const state = await response.json();
    $('login').hidden = true;
    $('content').hidden = false;
    $('status').textContent = 'updated ' + new Date().toLocaleTimeString();
    $('status').className = 'muted';
    render(state);
    polls++;
    document.body.dataset.polls = String(polls);
  } catch (error) {
    $('status').textContent = 'cannot reach compactor (' + error.message + ')';
    $('status').className = 'error';
  } finally {
    polling = false;
    timer = setTimeout(poll, POLL_MS);
  }
}

$('login').addEventListener('submit', (event) => {
  event.preventDefault();
  sessionStorage.setItem(KEY, $('key').value.trim());
  clearTimeout(timer);
  poll();
});
poll();
`;

export const DASHBOARD_PAGE = `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>compactor dashboard</title>
<link rel="icon" href="data:,">
<style>${STYLE}</style>
</head>
<body>
<header>
  <h1>compactor</h1>
  <span class="muted">upstream <code id="upstream">…</code></span>
  <span id="mode" class="badge">…</span>
  <span id="models"></span>
  <span id="status" class="muted"></span>
</header>
<main>
  <form id="login" hidden>
    <label for="key">Key (one of auth.keys; kept in this tab only)</label>
    <input id="key" type="password" autocomplete="off" required>
    <button type="submit">Open</button>
    <span id="login-error" class="error" hidden>That key was refused.</span>
  </form>
  <div id="content" hidden>
    <div id="totals" class="cards"></div>
    <section>
      <h2 id="chart-title">Conversation</h2>
      <p id="chart-client" class="muted"></p>
      <svg id="chart" viewBox="0 0 640 260" role="img" aria-label="forwarded tokens per request, against the window and thresholds; the client's size as a faint line"></svg>
      <div class="legend"><span><i style="background:var(--fwd)"></i>forwarded</span><span><i style="background:var(--sent);opacity:.55"></i>sent by the client (leaves the chart above the window)</span><span><i style="background:var(--win)"></i>window</span><span><i style="background:var(--thr)"></i>threshold</span><span><i style="background:var(--soft)"></i>soft threshold</span></div>
    </section>
    <section>
      <h2>Conversations</h2>
      <div class="wrap"><table>
        <thead><tr><th>id</th><th>model</th><th>requests</th><th title="refused (4xx) / failed (5xx)">refused / failed</th><th>turns</th><th>epochs</th><th>reused</th><th>tokens saved</th><th>KV reuse</th><th>slot</th><th>pair repairs</th><th>last report</th><th title="server seconds on its answers / reading again after compactor's own changes">server s</th><th>last prefix break</th></tr></thead>
        <tbody id="conversations"></tbody>
      </table></div>
      <p id="empty" class="muted">No conversation yet: send a chat request through compactor.</p>
    </section>
    <section id="fleet" hidden>
      <h2>Servers</h2>
      <div class="wrap"><table>
        <thead><tr><th>server</th><th>up</th><th>conversations</th><th title="requests queued or in flight now">queued</th><th>slots in use</th><th>requests</th><th title="requests with no answer (refused, reset, 5xx), each sent to the next server">failures</th></tr></thead>
        <tbody id="servers"></tbody>
      </table></div>
    </section>
    <section>
      <h2>Server seconds</h2>
      <div id="server" class="cards"></div>
      <h2>Prefix breaks of the conversation</h2>
      <ol id="breaks"></ol>
      <p id="no-breaks" class="muted">None: every request kept the one before it as its prefix.</p>
    </section>
    <section>
      <h2>Recent compactions</h2>
      <ol id="compactions"></ol>
      <p id="no-compactions" class="muted">None yet.</p>
    </section>
  </div>
</main>
<script>${SCRIPT}</script>
</body>
</html>
`;
