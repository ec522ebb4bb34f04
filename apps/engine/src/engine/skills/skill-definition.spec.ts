import { InvalidInputError } from '@switchyard/common';
import { MAX_SKILL_TIMEOUT_MS, readSkill } from './skill-definition';

const body = (timeoutMs: unknown) => ({
  name: 'shout',
  description: 'Upper-cases a text',
  inputSchema: { type: 'object' },
  outputSchema: { type: 'object' },
  language: 'node',
  code: 'exports.main = async (input) => input;',
  timeoutMs,
});

describe('readSkill', () => {
  it('takes a time limit from 100 ms to the longest a timer can be', () => {
    expect(readSkill(body(100), new Set()).timeoutMs).toBe(100);
    expect(readSkill(body(MAX_SKILL_TIMEOUT_MS), new Set()).timeoutMs).toBe(MAX_SKILL_TIMEOUT_MS);
  });

  it('refuses one past it (a number no timer holds, and past 2^53 no exact integer), naming the field', () => {
    for (const timeoutMs of [MAX_SKILL_TIMEOUT_MS + 1, 5.3680347799073555e37, 99, 1.5, '1000']) {
      expect(() => readSkill(body(timeoutMs), new Set())).toThrow(InvalidInputError);
      try {
        readSkill(body(timeoutMs), new Set());
      } catch (err) {
        expect((err as InvalidInputError).field).toBe('timeoutMs');
      }
    }
  });
});
