import { describe, it, expect } from 'vitest';
import { notesOf } from '../../../src/compaction/summary/notes.js';

const answer = (content: unknown, extra: Record<string, unknown> = {}) => ({
  choices: [{ index: 0, message: { role: 'assistant', content, ...extra }, finish_reason: 'stop' }],
});

describe('notesOf', () => {
  it('reads the text of the first choice', () => {
    expect(notesOf(answer('  Goal: fix the build.  '))).toBe('Goal: fix the build.');
  });

  it('joins text parts and skips other parts', () => {
    expect(
      notesOf(answer([{ type: 'text', text: 'Goal: x.' }, { type: 'image_url', image_url: { url: 'u' } }, { type: 'text', text: 'State: y.' }])),
    ).toBe('Goal: x.\nState: y.');
  });

  it('strips the <think> block the answer starts with', () => {
    expect(notesOf(answer('<think>Let me see…\nmore</think>\n\nGoal: fix.'))).toBe('Goal: fix.');
    expect(notesOf(answer('\n <think>a</think>Goal: fix.'))).toBe('Goal: fix.');
  });

  it('item 6: notes that mention <think> keep everything after it', () => {
    const notes = 'Goal: fix the template. The parser drops <think> blocks; Next: handle a <think> left open by max_tokens.';
    expect(notesOf(answer(notes))).toBe(notes);
    expect(notesOf(answer('Goal: <think>a</think>fix.<think>b</think>'))).toBe('Goal: <think>a</think>fix.<think>b</think>');
    expect(notesOf(answer('<think>plan</think>\nGoal: strip <think> only at the start.'))).toBe('Goal: strip <think> only at the start.');
  });

  it('drops reasoning whose opening tag was in the prompt, and reasoning cut off by max_tokens', () => {
    // Templates that open the block for the model (DeepSeek-R1 distills) leave only the closing tag in the content.
    expect(notesOf(answer('The user wants notes…</think>\n\nGoal: fix.'))).toBe('Goal: fix.');
    // max_tokens reached while thinking: there are no notes yet.
    expect(notesOf(answer('<think>Let me think about the files'))).toBeNull();
    expect(notesOf(answer('Goal: fix.<think>but also'))).toBe('Goal: fix.<think>but also');
  });

  it('is null for a tool call, an empty answer or reasoning only', () => {
    expect(notesOf(answer(null, { tool_calls: [{ id: 'c1', type: 'function', function: { name: 'bash', arguments: '{}' } }] }))).toBeNull();
    expect(notesOf(answer('Some text', { tool_calls: [{ id: 'c1', type: 'function', function: { name: 'bash', arguments: '{}' } }] }))).toBeNull();
    expect(notesOf(answer(''))).toBeNull();
    expect(notesOf(answer('   \n'))).toBeNull();
    expect(notesOf(answer(null))).toBeNull();
    expect(notesOf(answer('', { reasoning_content: 'I think the notes are…' }))).toBeNull();
    expect(notesOf(answer('<think>only thoughts</think>'))).toBeNull();
  });

  it('keeps the text when the tool_calls list is empty', () => {
    expect(notesOf(answer('Goal: x.', { tool_calls: [] }))).toBe('Goal: x.');
  });

  it('is null for anything malformed', () => {
    for (const response of [
      undefined,
      null,
      'text',
      42,
      {},
      { choices: null },
      { choices: [] },
      { choices: [null] },
      { choices: [{}] },
      { choices: [{ message: null }] },
      { choices: [{ message: 'text' }] },
      { choices: [{ message: { content: 42 } }] },
      { choices: { 0: { message: { content: 'x' } } } },
    ]) {
      expect(notesOf(response)).toBeNull();
    }
  });
});
