/**
 * The words a compressed tool result is written in. Every marker starts with
 * `[compressed: ` so a result compressed once is recognized and never
 * compressed again (the prefix stays byte-stable from one epoch to the next),
 * and each says what was removed and how to get it back: the later call that
 * holds the newer copy, or "ask again".
 */

export const MARKER_PREFIX = '[compressed: ';

/** Whether a text already carries a compression marker (compressed once; left as it is). */
export function hasMarker(text: string): boolean {
  return text.includes(MARKER_PREFIX);
}

/** A result superseded by a later call of the same tool with the same arguments. */
export function supersededMarker(tool: string, laterCallId: string, bytes: number): string {
  return `${MARKER_PREFIX}superseded by call ${laterCallId}, the same ${tool} call made later (${bytes} bytes removed)]`;
}

/** A result identical to a later one, kept once (in the later call's result). */
export function duplicateMarker(laterCallId: string, bytes: number): string {
  return `${MARKER_PREFIX}identical to the result of call ${laterCallId} (${bytes} bytes removed)]`;
}

/** A result cleared by the optional keep-newest-N clearing. */
export function clearedMarker(tool: string, bytes: number): string {
  return `${MARKER_PREFIX}an older ${tool} result was cleared (${bytes} bytes); ask again for it]`;
}

/** What stands for the items a JSON array trim dropped, as one string item in their place. */
export function droppedItemsMarker(count: number): string {
  return `${MARKER_PREFIX}${count} item${count === 1 ? '' : 's'} dropped here; ask again for them]`;
}

/** What stands for the lines a log trim dropped, as one line in their place. */
export function droppedLinesMarker(count: number): string {
  return `${MARKER_PREFIX}${count} line${count === 1 ? '' : 's'} dropped here; run it again for them]`;
}
