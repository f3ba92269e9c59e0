/**
 * The words a compressed tool result is written in. Every marker starts with
 * `[compressed: ` so a result compressed once is recognized and never
 * compressed again (the prefix stays byte-stable from one epoch to the next),
 * and each says what was removed and where it still is, or that it is gone
 * and how to get it back: the later call that holds the copy (its id and how
 * many turns later it was made: agents reuse ids, `call_0` every turn), or
 * "ask again". Turns are counted from the marker to the copy, so the words
 * stay true when a summary takes the turns before both.
 */

export const MARKER_PREFIX = '[compressed: ';

/** Whether a text already carries a compression marker (compressed once; left as it is). */
export function hasMarker(text: string): boolean {
  return text.includes(MARKER_PREFIX);
}

/** Where a later call stands from the result it replaces: "later in this turn", "1 turn later", "3 turns later". */
function later(turns: number): string {
  if (turns <= 0) return 'later in this turn';
  return `${turns} turn${turns === 1 ? '' : 's'} later`;
}

/** A result superseded by a later successful call of the same tool with the same arguments (a newer read of the file, a re-run). */
export function supersededMarker(tool: string, laterCallId: string, turnsLater: number, bytes: number): string {
  return `${MARKER_PREFIX}superseded by call ${laterCallId}, the same ${tool} call made ${later(turnsLater)}, whose result holds the newer copy (${bytes} bytes removed)]`;
}

/**
 * A result identical to a later one, kept once (in the later call's result).
 * `copy` is a digest of the text (textDigest): a result holding that text is
 * never compressed after, so the copy this marker names stays where it says.
 */
export function duplicateMarker(laterCallId: string, turnsLater: number, bytes: number, copy: string): string {
  return `${MARKER_PREFIX}identical to the result of call ${laterCallId}, made ${later(turnsLater)} (${bytes} bytes removed; copy ${copy})]`;
}

const DUPLICATE_COPY = /\[compressed: identical to the result of call [^\]]*; copy ([0-9a-f]{8})\)\]/;

/** The digest an identical marker names, or null when the text is no such marker. */
export function duplicateCopyOf(text: string): string | null {
  return DUPLICATE_COPY.exec(text)?.[1] ?? null;
}

/**
 * A digest of a result's text, 8 hex digits (FNV-1a, 32 bits over UTF-16
 * units): what an identical marker names its copy by. A collision only keeps
 * one more result raw.
 */
export function textDigest(text: string): string {
  let hash = 0x811c9dc5;
  for (let index = 0; index < text.length; index++) {
    hash ^= text.charCodeAt(index);
    hash = Math.imul(hash, 0x01000193) >>> 0;
  }
  return hash.toString(16).padStart(8, '0');
}

/** A result cleared by the optional keep-newest-N clearing. */
export function clearedMarker(tool: string, bytes: number): string {
  return `${MARKER_PREFIX}an older ${tool} result was cleared (${bytes} bytes); it is nowhere else in this conversation: call ${tool} again for it]`;
}

/** What stands for the items a JSON array trim dropped, as one string item in their place. */
export function droppedItemsMarker(count: number): string {
  return `${MARKER_PREFIX}${count} item${count === 1 ? '' : 's'} dropped here; ask again for them]`;
}

/** What stands for the lines a log trim dropped, as one line in their place. */
export function droppedLinesMarker(count: number): string {
  return `${MARKER_PREFIX}${count} line${count === 1 ? '' : 's'} dropped here; run it again for them]`;
}

/** Whether a result's text is the cleared marker (a clearing's, or `clear_tool_uses`'). */
export function isClearedMarker(text: string): boolean {
  return text.startsWith(`${MARKER_PREFIX}an older `) && text.includes(' result was cleared (');
}

/** The input of a call whose result was cleared, cleared too (Anthropic's `clear_tool_inputs`): the arguments become `{"cleared_input": <this>}`. */
export function clearedInputMarker(tool: string, bytes: number): string {
  return `${MARKER_PREFIX}the input of this ${tool} call was cleared with its result (${bytes} bytes); it is nowhere else in this conversation]`;
}
