import { slotCountOf } from '../slots/discovery.js';
import { type Check, type DoctorContext, ok, skip } from './check.js';

/**
 * The slots line: the slots llama-server reports and whether they are
 * scheduled (issue 28). How many slots the upstream reports, per served
 * model, and whether compactor schedules them (`upstream.slots`), as the
 * proxy's slot router decides it (src/slots/slot-router.ts): a server that
 * reports no slots, or one slot without `slot_save`, is left to pick.
 */

interface ModelSlots {
  readonly model: string;
  readonly slots: number | null;
}

/** total_slots of /props (per model when several are served), else the length of /slots. */
async function slotCounts(context: DoctorContext, reported: number | null): Promise<ModelSlots[]> {
  const models = (await context.models()).map((model) => model.id);
  const fromSlots = async (): Promise<number | null> => slotCountOf(undefined, (await context.get('/slots')).body);
  if (models.length <= 1) return [{ model: models[0] ?? '', slots: reported ?? (await fromSlots()) }];
  return Promise.all(
    models.map(async (model) => {
      const props = await context.get(`/props?model=${encodeURIComponent(model)}`);
      return { model, slots: slotCountOf(props.body, undefined) ?? (await fromSlots()) };
    }),
  );
}

const plural = (count: number): string => `${count} slot${count === 1 ? '' : 's'}`;

function reportedText(counts: readonly ModelSlots[]): string {
  if (counts.every((count) => count.slots === null)) return 'the upstream reports no slots (/props total_slots, /slots)';
  if (counts.length === 1) return `llama-server reports ${plural(counts[0]!.slots!)}`;
  return `llama-server reports ${counts.map((count) => `${count.model}: ${count.slots === null ? 'none' : plural(count.slots)}`).join(', ')}`;
}

export const slotsCheck: Check = {
  name: 'slots',
  async run(context) {
    const found = await context.inspection();
    if (found.state !== 'ready') return skip('not asked: the upstream is not ready');
    const { slots, slot_wait_ms, slot_save } = context.config.upstream;
    const counts = await slotCounts(context, found.slots);
    const reported = reportedText(counts);
    if (slots === 'off') return ok(`${reported}; upstream.slots: off: llama-server picks the slot`);
    const save = `slot_save ${slot_save ? 'on: llama-server must run with --slot-save-path' : 'off'}`;
    const scheduled = counts.filter((count) => count.slots !== null && (count.slots >= 2 || slot_save));
    // auto is the default (issue 33): the line says so, and how to let llama-server pick instead.
    if (scheduled.length > 0) {
      return ok(`${reported}; upstream.slots: auto (on by default): one conversation per slot, one request at a time in each, a turn waits for its own at most ${slot_wait_ms} ms or what re-reading it elsewhere costs (${save}; upstream.slots: off lets llama-server pick)`);
    }
    if (counts.some((count) => count.slots !== null)) return ok(`${reported}; upstream.slots: auto (on by default), not scheduled: with one slot llama-server already runs one request at a time (${save})`);
    return ok(`${reported}; upstream.slots: auto (on by default), not scheduled: llama-server (or whatever serves) picks the slot`);
  },
};
