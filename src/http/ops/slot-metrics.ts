import { Counter, Gauge, type Registry } from 'prom-client';
import type { SlotStats } from '../../slots/scheduler.js';

/**
 * The slot scheduler's figures at `/metrics` (issue 28), read from the
 * schedulers when Prometheus scrapes: nothing moves on the request path.
 * Labelled by the served model (the file name of llama-server's
 * `model_path`) and, for the per-slot ones, the slot id.
 */

/** `server`: the fleet server the slots are on (upstream.servers, issue 39); absent with one server, whose metrics carry no server label. */
export type SlotStatsSource = () => ReadonlyArray<{ readonly served: string; readonly stats: SlotStats; readonly server?: string }>;

/** `/models/qwen-7b.gguf` → `qwen-7b.gguf`: the label a person recognizes, without the server's folders. */
function servedLabel(served: string): string {
  return served.slice(served.lastIndexOf('/') + 1);
}

type PerSlot = 'queued' | 'waits' | 'waitMsTotal' | 'waitMsMax';
type PerServer = 'saves' | 'restores' | 'evictions' | 'moves' | 'saveFailures' | 'filesBytes';

export function registerSlotMetrics(registry: Registry, source: SlotStatsSource, options: { readonly byServer?: boolean } = {}): void {
  const server = (entry: { readonly server?: string }): { server?: string } => (options.byServer === true ? { server: entry.server ?? '' } : {});
  const perSlot = (Kind: typeof Gauge | typeof Counter, name: string, help: string, read: PerSlot, scale = 1): void => {
    new Kind({
      name,
      help,
      labelNames: options.byServer === true ? ['model', 'slot', 'server'] : ['model', 'slot'],
      registers: [registry],
      collect() {
        this.reset();
        for (const entry of source()) {
          const { served, stats } = entry;
          for (const slot of stats.slots) {
            const labels = { model: servedLabel(served), slot: String(slot.slot), ...server(entry) };
            if (this instanceof Gauge) this.set(labels, slot[read] * scale);
            else this.inc(labels, slot[read] * scale);
          }
          // Who waits for whichever slot frees first is in no slot's queue, and is waiting all the same (issue 33 item 2).
          if (read === 'queued' && this instanceof Gauge) this.set({ model: servedLabel(served), slot: 'any', ...server(entry) }, stats.waitingForAny);
        }
      },
    });
  };
  const perServer = (Kind: typeof Gauge | typeof Counter, name: string, help: string, read: PerServer): void => {
    new Kind({
      name,
      help,
      labelNames: options.byServer === true ? ['model', 'server'] : ['model'],
      registers: [registry],
      collect() {
        this.reset();
        for (const entry of source()) {
          const { served, stats } = entry;
          const labels = { model: servedLabel(served), ...server(entry) };
          if (this instanceof Gauge) this.set(labels, stats[read]);
          else this.inc(labels, stats[read]);
        }
      },
    });
  };
  perSlot(Gauge, 'compactor_slot_queue_length', 'Requests (turns and summaries) waiting in the slot queue of a llama-server slot now (upstream.slots), by served model and slot; slot="any": waiting for whichever slot frees first.', 'queued');
  perSlot(Counter, 'compactor_slot_waits_total', 'Requests that got a llama-server slot from its slot queue (at once or after waiting), by served model and slot.', 'waits');
  perSlot(Counter, 'compactor_slot_wait_seconds_total', 'Time requests spent waiting in a slot queue, by served model and slot (divide by compactor_slot_waits_total for the mean).', 'waitMsTotal', 1 / 1000);
  perSlot(Gauge, 'compactor_slot_wait_seconds_max', 'The longest wait in a slot queue so far, by served model and slot: bounded by upstream.slot_wait_ms plus the time until any slot frees.', 'waitMsMax', 1 / 1000);
  perServer(Counter, 'compactor_slot_saves_total', 'Slots saved to a file (upstream.slot_save): evicted conversations, and conversations before their summary.', 'saves');
  perServer(Counter, 'compactor_slot_restores_total', 'Slot files restored into a slot for the conversation that came back.', 'restores');
  perServer(Counter, 'compactor_slot_evictions_total', 'Conversations that lost their home slot to another (the least recently used one).', 'evictions');
  perServer(Counter, 'compactor_slot_moves_total', 'Requests that waited upstream.slot_wait_ms and took another slot.', 'moves');
  perServer(Counter, 'compactor_slot_save_failures_total', 'Slot saves llama-server refused (no --slot-save-path): saving then stops.', 'saveFailures');
  perServer(Gauge, 'compactor_slot_files_bytes', 'Bytes of the slot files compactor keeps on the llama-server (bounded by upstream.slot_save_max_bytes).', 'filesBytes');
}
