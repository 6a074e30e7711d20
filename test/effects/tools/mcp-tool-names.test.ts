import { afterAll, describe, expect, it } from 'vitest';
import { connectMcp, type McpConnection } from '../../../src/agents.js';

/** A stdio MCP server (the MCP SDK's) listing two tools whose 250,000-character names differ only at their end. */
const server = `
  import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
  import { StdioServerTransport } from '@modelcontextprotocol/sdk/server/stdio.js';
  const server = new McpServer({ name: 'long', version: '1.0.0' });
  for (const end of ['a', 'b']) {
    server.registerTool('t'.repeat(250_000) + end, { description: 'Says its name.' }, () => ({ content: [{ type: 'text', text: end }] }));
  }
  await server.connect(new StdioServerTransport());
`;

let mcp: McpConnection | undefined;
afterAll(async () => {
  await mcp?.close();
});

describe('connectMcp: tool names', () => {
  it('cuts a tool name past 64 characters to 64, ending with "_" and a hash of the whole, so two long names stay apart; the server is called by its own name', async () => {
    mcp = await connectMcp({ command: process.execPath, args: ['--input-type=module', '--eval', server], name: 'long', stderr: 'ignore' });
    const names = mcp.tools.map((tool) => tool.name);
    expect(names).toHaveLength(2);
    for (const name of names) expect(name).toMatch(/^long__t{49}_[0-9a-f]{8}$/);
    expect(names[0]).not.toBe(names[1]);
    const said = await mcp.tools[1]!.execute({}, { signal: new AbortController().signal, progress: () => {} });
    expect(JSON.stringify(said)).toContain('"b"');
  });
});
