import type { ChatMessage } from '../message.js';
import { hasElision } from '../prune.js';
import { DEFAULT_READ_TOOLS, callsOfResults } from './calls.js';
import { hasMarker } from './markers.js';
import { succeeded } from './result-outcome.js';

/**
 * The working set: the newest copy of each file the agent read, newest
 * first, as many as fit a share of the budget. It stays raw through every
 * tier: no prune, compression or clearing touches it, and a summary or steps
 * cut that would take it carries it, verbatim, after the notes (Claude Code
 * re-attaches the files it read last after every compaction). Without it the
 * model may be left to edit a file it can no longer see.
 *
 * Carried files are written in a block whose every file states its length,
 * so the next summary reads them back exactly and carries them on while no
 * newer read replaces them.
 */

export interface WorkingFile {
  /** Its path, as the read named it. */
  readonly file: string;
  /** The id of the call that read it (agents reuse ids: with `turnsBefore`, where it was). */
  readonly callId: string;
  /** The text, as the read returned it. */
  readonly text: string;
  /** The index of its result in the history; for a file carried by earlier notes, the index of the message carrying it. */
  readonly index: number;
  /** Whether it is carried by earlier notes rather than a tool result. */
  readonly carried: boolean;
}

/** The reads of working-tree files in the history that hold a whole, successful copy, newest first, one per file (its newest copy). */
export function newestReads(messages: readonly ChatMessage[], trusted: ReadonlySet<number>, readTools: readonly string[] = DEFAULT_READ_TOOLS): WorkingFile[] {
  const calls = callsOfResults(messages, readTools);
  const seen = new Set<string>();
  const files: WorkingFile[] = [];
  for (let index = messages.length - 1; index >= 0; index--) {
    const message = messages[index]!;
    if (trusted.has(index) && typeof message.content === 'string') {
      for (const carried of carriedFiles(message.content)) {
        if (seen.has(carried.file)) continue;
        seen.add(carried.file);
        files.push({ ...carried, index, carried: true });
      }
      continue;
    }
    const call = calls.get(index);
    if (call === undefined || call.kind !== 'read' || call.file === null || seen.has(call.file)) continue;
    const text = typeof message.content === 'string' ? message.content : null;
    // Its newest read decides: an older copy of a file whose newest read failed or was cut is stale, never kept instead.
    seen.add(call.file);
    if (text === null || !succeeded(message, text) || hasMarker(text) || hasElision(text)) continue;
    files.push({ file: call.file, callId: call.id, text, index, carried: false });
  }
  return files;
}

/**
 * At most this many files, the newest: what Claude Code re-attaches after a
 * compaction (the five files it read last). "Recent" needs a bound besides
 * the share: an agent that reads many files once each would otherwise keep
 * half the budget of files it has moved on from, and on a 4k window the
 * 60-turn Messages run (a new file each turn) summarized 20 times for 14
 * epochs with the share alone.
 */
export const MAX_WORKING_FILES = 5;

/** The files of `reads` (newest first) that fit `tokens`, by `sizeOf`, at most {@link MAX_WORKING_FILES}; a file too large for what is left is passed over. */
export function fitting(reads: readonly WorkingFile[], tokens: number, sizeOf: (text: string) => number): WorkingFile[] {
  const kept: WorkingFile[] = [];
  let left = tokens;
  for (const read of reads) {
    if (kept.length === MAX_WORKING_FILES) break;
    const size = sizeOf(read.text);
    if (size > left) continue;
    kept.push(read);
    left -= size;
  }
  return kept;
}

const BLOCK_HEADING =
  'Files kept verbatim: the newest copy of each file read recently, as that read returned it (edits made after it are not in it; read the file again for its current text):';

/** Where a file's text starts: its path, the call that read it, and its length in characters (the block is read back by length, never by a closing tag). */
function fileOpening(file: Pick<WorkingFile, 'file' | 'callId' | 'text'>): string {
  return `<file path=${JSON.stringify(file.file)} call=${JSON.stringify(file.callId)} chars="${file.text.length}">\n`;
}

/** The block that carries `files` after the notes: a heading, then each file as `<file path="…" call="…" chars="N">`, its text, `</file>`. */
export function workingSetBlock(files: readonly Pick<WorkingFile, 'file' | 'callId' | 'text'>[]): string {
  if (files.length === 0) return '';
  return `\n\n${BLOCK_HEADING}\n${files.map((file) => `${fileOpening(file)}${file.text}\n</file>`).join('\n')}`;
}

const OPENING = /<file path=("(?:[^"\\]|\\.)*") call=("(?:[^"\\]|\\.)*") chars="(\d+)">\n/g;

/** A file of a carried block and where it lies in the text: from its opening to the end of its `</file>`. */
interface CarriedSegment extends Pick<WorkingFile, 'file' | 'callId' | 'text'> {
  readonly start: number;
  readonly end: number;
}

/** The files a block written by {@link workingSetBlock} carries, where they lie, in its order. */
function carriedSegments(text: string): CarriedSegment[] {
  const at = text.indexOf(BLOCK_HEADING);
  if (at === -1) return [];
  const files: CarriedSegment[] = [];
  OPENING.lastIndex = at;
  for (let match = OPENING.exec(text); match !== null; match = OPENING.exec(text)) {
    const start = match.index + match[0].length;
    const length = Number(match[3]);
    if (text.slice(start + length, start + length + 8) !== '\n</file>') break;
    files.push({ file: JSON.parse(match[1]!) as string, callId: JSON.parse(match[2]!) as string, text: text.slice(start, start + length), start: match.index, end: start + length + 8 });
    OPENING.lastIndex = start + length;
  }
  return files;
}

/** The files a block written by {@link workingSetBlock} carries, in its order (newest first); none when the text holds no block. */
export function carriedFiles(text: string): Array<Pick<WorkingFile, 'file' | 'callId' | 'text'>> {
  return carriedSegments(text).map(({ file, callId, text: content }) => ({ file, callId, text: content }));
}

/**
 * The messages with each carried file that a newer read holds raw taken out of
 * the block that carries it, or `messages` itself when there is none. A copy
 * carried after notes cannot be superseded as a tool result is: without this
 * it stays beside the newer read until the next summary, and on a small
 * window that is the room the next turn needed (the 4k re-read loop summarized
 * every turn). Only a whole, successful read of the same file later in the
 * history counts, and only one that stays raw (`keepsRaw`). Each file taken
 * out leaves a line that says what it was and which call holds the newer copy.
 */
export function withoutSupersededCarried(
  messages: readonly ChatMessage[],
  { from, to, trusted, keepsRaw, readTools }: { from: number; to: number; trusted: ReadonlySet<number>; keepsRaw: (index: number) => boolean; readTools?: readonly string[] },
): readonly ChatMessage[] {
  const carrying = [...trusted].filter((index) => index >= from && index < to && typeof messages[index]?.content === 'string' && carriedSegments(messages[index]!.content as string).length > 0);
  if (carrying.length === 0) return messages;
  const newest = new Map(newestReads(messages, trusted, readTools).filter((read) => !read.carried).map((read) => [read.file, read]));
  let out: ChatMessage[] | null = null;
  for (const index of carrying) {
    const text = messages[index]!.content as string;
    let rewritten = text;
    // From the end, so the earlier segments' offsets still hold.
    for (const segment of carriedSegments(text).reverse()) {
      const newer = newest.get(segment.file);
      if (newer === undefined || newer.index <= index || !keepsRaw(newer.index)) continue;
      const said = `[${JSON.stringify(segment.file)} as call ${segment.callId} read it (${segment.text.length} chars) was taken out: call ${newer.callId}, later in this conversation, holds a newer read of it]`;
      rewritten = `${rewritten.slice(0, segment.start)}${said}${rewritten.slice(segment.end)}`;
    }
    if (rewritten === text) continue;
    out ??= [...messages];
    out[index] = { ...messages[index]!, content: rewritten };
  }
  return out ?? messages;
}
