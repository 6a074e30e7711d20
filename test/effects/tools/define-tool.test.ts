import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { NonJsonOutputError, defineTool, toolSpecs } from '../../../src/agents.js';
import { toJsonOutput } from '../../../src/effects/tools/json-output.js';

const readFile = defineTool({
  name: 'read_file',
  description: 'Reads a text file.',
  inputSchema: z.object({ path: z.string().describe('absolute path'), encoding: z.enum(['utf8', 'latin1']).default('utf8') }),
  execute: ({ path }) => `contents of ${path}`,
});

describe('defineTool', () => {
  it('gives the documented defaults: no approval, 60 s timeout, not rerun-safe, not parallel-safe', () => {
    expect(readFile.needsApproval({ path: '/a', encoding: 'utf8' })).toBe(false);
    expect(readFile.timeoutMs).toBe(60_000);
    expect(readFile.rerunSafe).toBe(false);
    expect(readFile.parallelSafe).toBe(false);
    expect(defineTool({ name: 'stat', description: 'Stats a file.', inputSchema: z.object({}), parallelSafe: true, execute: () => null }).parallelSafe).toBe(true);
  });

  it('parses arguments with the zod schema (defaults applied), or names each failing field', () => {
    expect(readFile.parseInput({ path: '/a' })).toEqual({ ok: true, input: { path: '/a', encoding: 'utf8' } });
    expect(readFile.parseInput({ path: 3, encoding: 'ascii' })).toEqual({
      ok: false,
      error: 'path: Invalid input: expected string, received number; encoding: Invalid option: expected one of "utf8"|"latin1"',
    });
  });

  it('takes needsApproval as a function of the parsed input', () => {
    const rm = defineTool({
      name: 'rm',
      description: 'Removes a file.',
      inputSchema: z.object({ path: z.string() }),
      needsApproval: ({ path }) => !path.startsWith('/tmp/'),
      execute: () => null,
    });
    expect(rm.needsApproval({ path: '/tmp/x' })).toBe(false);
    expect(rm.needsApproval({ path: '/etc/passwd' })).toBe(true);
  });

  it('refuses what a model API would refuse, naming the tool', () => {
    const base = { description: 'd', inputSchema: z.object({}), execute: () => null };
    expect(() => defineTool({ ...base, name: 'read file' })).toThrow('defineTool: tool name "read file" must match /^[A-Za-z0-9_-]{1,64}$/');
    expect(() => defineTool({ ...base, name: 'x', parallelSafe: 'yes' as never })).toThrow('defineTool: tool "x": "parallelSafe" must be a boolean, got string');
    expect(() => defineTool({ ...base, name: 'x', inputSchema: z.string() })).toThrow(
      'defineTool: tool "x": inputSchema must be an object schema (z.object({...})), as model APIs require; got JSON Schema type "string"',
    );
    expect(() => defineTool({ ...base, name: 'x', inputSchema: z.object({ at: z.date() }) })).toThrow(
      'defineTool: tool "x": its inputSchema has no JSON Schema: Date cannot be represented in JSON Schema',
    );
    expect(() => defineTool({ ...base, name: 'x', timeoutMs: 0 })).toThrow('defineTool: tool "x": "timeoutMs" must be positive (Infinity for none), got 0');
  });
});

describe('toolSpecs', () => {
  it('gives the model each tool by name: its description and an object JSON Schema of the input side', () => {
    expect(toolSpecs([readFile])).toEqual({
      read_file: {
        description: 'Reads a text file.',
        inputSchema: {
          $schema: 'http://json-schema.org/draft-07/schema#',
          type: 'object',
          properties: {
            path: { type: 'string', description: 'absolute path' },
            encoding: { type: 'string', enum: ['utf8', 'latin1'], default: 'utf8' },
          },
          required: ['path'], // a field with a default is optional to the model
        },
      },
    });
  });

  it('refuses two tools of one name', () => {
    expect(() => toolSpecs([readFile, readFile])).toThrow('toolSpecs: two tools are named "read_file"; tool names must be unique');
  });
});

describe('toJsonOutput', () => {
  it('passes JSON through and converts the rest as JSON.stringify does', () => {
    expect(toJsonOutput('t', { a: [1, 'x', null, true] })).toEqual({ a: [1, 'x', null, true] });
    expect(toJsonOutput('t', undefined)).toBeNull();
    expect(toJsonOutput('t', Number.NaN)).toBeNull();
    expect(toJsonOutput('t', { at: new Date(0), skip: undefined, f: () => 1 })).toEqual({ at: '1970-01-01T00:00:00.000Z' });
  });

  it('refuses a value JSON cannot carry, naming the tool', () => {
    const cyclic: Record<string, unknown> = {};
    cyclic.self = cyclic;
    expect(() => toJsonOutput('t', 1n)).toThrow(NonJsonOutputError);
    expect(() => toJsonOutput('t', cyclic)).toThrow(/^tool "t" returned a value that is not JSON: TypeError: Converting circular structure to JSON/);
  });
});
