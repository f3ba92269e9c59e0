import { describe, expect, it } from 'vitest';
import { describeType, formatPath } from '../src/issue-words.js';

describe('formatPath', () => {
  it('writes paths as YAML and JavaScript do (the @examples)', () => {
    expect(formatPath(['models', '*', 'context_window'])).toBe('models["*"].context_window');
    expect(formatPath(['messages', 3, 'role'])).toBe('messages[3].role');
    expect(formatPath([])).toBe('(root)');
  });
});

describe('describeType', () => {
  it("names a type in the reader's words: a mapping in YAML, an object in JSON", () => {
    expect(describeType('object', 'yaml')).toBe('a mapping');
    expect(describeType('object', 'json')).toBe('an object');
    expect(describeType('array', 'json')).toBe('a list');
    expect(describeType('int', 'yaml')).toBe('an integer');
    expect(describeType('string', 'json')).toBe('a string');
  });
});
