/**
 * The dashboard's chart, as page script (see page.ts): the forwarded size of
 * each request of the selected conversation against the window, the
 * threshold and the soft threshold, on a scale of its own (the window at
 * the top), so what one sees at a glance is how close the forwarded prompt
 * comes to the window. The client's size, often many times the window, is a
 * figure above the chart and a line that leaves the scale at its top, never
 * the scale itself. The SVG is drawn at the size it is shown (its viewBox is
 * its width in CSS pixels), so its text is 11 px on a phone as on a desktop,
 * and the limits' labels are moved apart until none overlaps another.
 */

/** Vertical room of one label, in CSS pixels (11 px text, its box about 14 px, and a gap). */
const LABEL_GAP = 16;

export const CHART_SCRIPT = `
const LABEL_GAP = ${LABEL_GAP};

/** Label positions, in order, moved down until each is LABEL_GAP below the one above it, and up again if the last left the chart. */
function spreadLabels(positions, top, bottom) {
  const order = positions.map((y, index) => ({ y, index })).sort((a, b) => a.y - b.y);
  for (let i = 0; i < order.length; i++) order[i].y = Math.max(order[i].y, i === 0 ? top : order[i - 1].y + LABEL_GAP);
  for (let i = order.length - 1; i >= 0; i--) order[i].y = Math.min(order[i].y, i === order.length - 1 ? bottom : order[i + 1].y - LABEL_GAP);
  const spread = [];
  for (const item of order) spread[item.index] = item.y;
  return spread;
}

function drawChart(conversation, models) {
  const svg = $('chart');
  const NS = 'http://www.w3.org/2000/svg';
  while (svg.firstChild) svg.removeChild(svg.firstChild);
  $('chart-title').textContent = conversation ? 'Conversation ' + conversation.id + ' (' + conversation.model + '): tokens forwarded per request' : 'No conversation yet';
  $('chart-client').textContent = '';
  if (!conversation) return;
  const model = models.find((m) => m.model === conversation.model) || {};
  const points = conversation.points;
  const W = Math.max(300, Math.round(svg.getBoundingClientRect().width) || 640);
  const H = W < 500 ? 220 : 260;
  svg.setAttribute('viewBox', '0 0 ' + W + ' ' + H);
  // Room on the right for the limits' labels ("soft threshold 8.4k").
  const narrow = W < 500;
  const L = 8, R = narrow ? 92 : 124, T = 10, B = 22;
  const forwardedMax = Math.max(1, ...points.map((p) => p.forwarded));
  const top = Math.max(forwardedMax, model.window || 0) * 1.08;
  const x = (i) => L + (points.length <= 1 ? 0 : (i * (W - L - R)) / (points.length - 1));
  const y = (v) => T + (H - T - B) * (1 - Math.min(v, top) / top);
  const add = (tag, attributes, text) => {
    const node = document.createElementNS(NS, tag);
    for (const [name, value] of Object.entries(attributes)) node.setAttribute(name, String(value));
    if (text !== undefined) node.textContent = text;
    svg.appendChild(node);
    return node;
  };
  add('line', { x1: L, y1: H - B, x2: W - R, y2: H - B, stroke: 'currentColor', 'stroke-opacity': 0.3 });
  const limits = [[model.window, 'var(--win)', 'window'], [model.threshold, 'var(--thr)', 'threshold'], [model.softThreshold, 'var(--soft)', 'soft threshold']].filter(([value]) => value);
  const labelY = spreadLabels(limits.map(([value]) => y(value) + 4), T + 8, H - B - 2);
  limits.forEach(([value, color, name], index) => {
    add('line', { x1: L, y1: y(value), x2: W - R, y2: y(value), stroke: color, 'stroke-dasharray': '5 4', class: 'limit', 'data-limit': name });
    // On a phone "soft threshold" is "soft": the legend under the chart names it whole.
    add('text', { x: W - R + 6, y: labelY[index], fill: color, 'font-size': 11, class: 'limit-label' }, (narrow ? name.replace(' threshold', '') : name) + ' ' + tokens(value));
  });
  // The client's size leaves the scale at its top: drawn faint, clipped, and said as a figure.
  const sentLine = points.map((p, i) => x(i).toFixed(1) + ',' + y(p.sent).toFixed(1)).join(' ');
  add('polyline', { points: sentLine, fill: 'none', stroke: 'var(--sent)', 'stroke-width': 1.5, 'stroke-opacity': 0.55, 'stroke-dasharray': '2 3', class: 'series', 'data-series': 'sent' });
  const fwdLine = points.map((p, i) => x(i).toFixed(1) + ',' + y(p.forwarded).toFixed(1)).join(' ');
  add('polyline', { points: fwdLine, fill: 'none', stroke: 'var(--fwd)', 'stroke-width': 2.5, class: 'series', 'data-series': 'forwarded' });
  for (let i = 0; i < points.length; i++) add('circle', { cx: x(i), cy: y(points[i].forwarded), r: 2.5, fill: 'var(--fwd)' });
  add('text', { x: L, y: H - 6, fill: 'currentColor', 'font-size': 11, 'fill-opacity': 0.7 }, 'last ' + points.length + ' requests');
  const last = points[points.length - 1];
  if (last) {
    const largest = Math.max(...points.map((p) => p.sent));
    $('chart-client').textContent = 'last request: forwarded ' + tokens(last.forwarded) + ' of the client\\'s ' + tokens(last.sent) + (model.window ? ' (window ' + tokens(model.window) + ')' : '') + '; largest the client sent: ' + tokens(largest) + (largest > top ? ', above the top of the chart' : '');
  }
}
`;
