// Preloaded (`node --import`) into a bench server by bench/async-resources.ts: counts the asynchronous resources
// the process creates (promises, ticks, immediates, timers, …, by async_hooks type), answered over IPC.
// A count no load moves: what an `await` or an `async` function costs a request is made of these.
import { createHook } from 'node:async_hooks';

const counts = new Map();
let counting = false;
createHook({
  init(_id, type) {
    if (counting) counts.set(type, (counts.get(type) ?? 0) + 1);
  },
}).enable();
process.on('message', (message) => {
  if (message?.asyncCounts === 'reset') {
    counts.clear();
    counting = true;
    process.send?.({ asyncCounts: 'reset' });
  } else if (message?.asyncCounts === 'read') {
    counting = false;
    process.send?.({ asyncCounts: Object.fromEntries(counts) });
  }
});
