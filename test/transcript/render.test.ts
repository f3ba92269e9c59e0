import { describe, it, expect } from 'vitest';
import fc from 'fast-check';
import type { ChatMessage } from '../../src/transcript/message.js';
import { renderTranscript } from '../../src/transcript/render.js';
import { anyTranscriptArbitrary, call, propertyParameters } from './arbitraries.js';

describe('renderTranscript', () => {
  it('@example: roles, calls with name, id and arguments, results with their call id', () => {
    expect(
      renderTranscript([
        { role: 'user', content: 'list files' },
        {
          role: 'assistant',
          content: null,
          tool_calls: [{ id: 'c1', type: 'function', function: { name: 'bash', arguments: '{"cmd":"ls"}' } }],
        },
        { role: 'tool', tool_call_id: 'c1', content: 'a.txt' },
      ]),
    ).toBe('[user] list files\n\n[assistant → call bash #c1] {"cmd":"ls"}\n\n[tool #c1] a.txt');
  });

  it('puts an assistant text before its calls, one line per call', () => {
    const message: ChatMessage = {
      role: 'assistant',
      content: 'Let me look.',
      tool_calls: [call('c1', 'bash', '{"cmd":"ls"}'), call('c2', 'read_file', '{"path":"a.txt"}')],
    };
    expect(renderTranscript([message])).toBe(
      '[assistant] Let me look.\n[assistant → call bash #c1] {"cmd":"ls"}\n[assistant → call read_file #c2] {"path":"a.txt"}',
    );
  });

  it('renders content parts as text, images and audio as placeholders, other parts by type', () => {
    const message: ChatMessage = {
      role: 'user',
      content: [
        { type: 'text', text: 'what is this?' },
        { type: 'image_url', image_url: { url: 'data:image/png;base64,AAAA' } },
        { type: 'input_audio', input_audio: { data: 'AAAA', format: 'wav' } },
        { type: 'file', file: { file_id: 'f1' } },
      ],
    };
    expect(renderTranscript([message])).toBe('[user] what is this?\n[image]\n[audio]\n[file]');
  });

  it('renders system, developer and unknown roles under their own name, and empty messages bare', () => {
    expect(
      renderTranscript([
        { role: 'system', content: 'be brief' },
        { role: 'developer', content: 'use tools' },
        { role: 'critic', content: 'too long' },
        { role: 'assistant', content: null },
        { role: 'tool', content: 'no id' },
      ]),
    ).toBe('[system] be brief\n\n[developer] use tools\n\n[critic] too long\n\n[assistant]\n\n[tool] no id');
  });

  it('shows a call without arguments by its name and id alone', () => {
    const message: ChatMessage = { role: 'assistant', tool_calls: [{ id: 'c7', function: { name: 'now' } }] };
    expect(renderTranscript([message])).toBe('[assistant → call now #c7]');
  });

  it('keeps multi-line content verbatim and renders nothing for no messages', () => {
    expect(renderTranscript([{ role: 'tool', tool_call_id: 'c1', content: 'line 1\nline 2' }])).toBe(
      '[tool #c1] line 1\nline 2',
    );
    expect(renderTranscript([])).toBe('');
  });

  it('property: deterministic, one block per message in order, input not mutated', () => {
    fc.assert(
      fc.property(anyTranscriptArbitrary, (messages) => {
        const copy = structuredClone(messages);
        const text = renderTranscript(messages);
        expect(renderTranscript(messages)).toBe(text);
        expect(renderTranscript(structuredClone(messages))).toBe(text);
        expect(messages).toEqual(copy);
        // Blocks joined by blank lines: rendering each message alone and joining gives the same text.
        expect(messages.map((message) => renderTranscript([message])).join('\n\n')).toBe(text);
        for (const message of messages) {
          expect(renderTranscript([message]).startsWith(`[${message.role}`)).toBe(true);
        }
      }),
      propertyParameters,
    );
  });
});
