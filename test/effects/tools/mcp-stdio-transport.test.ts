import { describe, expect, it } from 'vitest';
import { BoundedReadBuffer, MCP_MESSAGE_TOO_LARGE } from '../../../src/effects/tools/mcp-stdio-transport.js';

/** The MCP stdio line reader with a bound: what it does with lines past it, in the orders servers write them. */

const bytes = (text: string) => Buffer.from(text, 'utf8');
const refusal = (id: string | number, size: number) => ({
  jsonrpc: '2.0',
  id,
  error: { code: MCP_MESSAGE_TOO_LARGE, message: `an MCP message of ${size} bytes is over 100 (maxResultBytes)`, data: { bytes: size, maxBytes: 100 } },
});

describe('BoundedReadBuffer', () => {
  it('reads lines within the bound, across chunks, as the SDK does', () => {
    const reader = new BoundedReadBuffer(100);
    reader.append(bytes('{"jsonrpc":"2.0","id":1,"res'));
    expect(reader.readMessage()).toBeNull();
    reader.append(bytes('ult":{}}\r\n{"jsonrpc":"2.0","method":"notifications/x"}\n'));
    expect(reader.readMessage()).toEqual({ jsonrpc: '2.0', id: 1, result: {} });
    expect(reader.readMessage()).toEqual({ jsonrpc: '2.0', method: 'notifications/x' });
    expect(reader.readMessage()).toBeNull();
  });

  it('answers an oversized response to its request, whether its id comes last (TypeScript SDK) or first (Python SDK), in any chunking', () => {
    const reader = new BoundedReadBuffer(100);
    const last = `{"result":{"text":"${'x'.repeat(500)}"},"jsonrpc":"2.0","id":7}\n`;
    const first = `{"jsonrpc":"2.0","id":"r-8","result":{"text":"${'y'.repeat(500)}"}}\n`;
    const all = bytes(last + first);
    for (let at = 0; at < all.length; at += 33) reader.append(all.subarray(at, at + 33));
    expect(reader.readMessage()).toEqual(refusal(7, last.length - 1));
    expect(reader.readMessage()).toEqual(refusal('r-8', first.length - 1));
    expect(reader.readMessage()).toBeNull();
  });

  it('drops an oversized notification with an error; throws (so the SDK closes the connection) on a line that names no request', () => {
    const reader = new BoundedReadBuffer(100);
    reader.append(bytes(`{"method":"notifications/message","params":{"data":"${'z'.repeat(500)}"},"jsonrpc":"2.0"}\n{"jsonrpc":"2.0","id":2,"result":{}}\n`));
    expect(() => reader.readMessage()).toThrow(/^an MCP message of 5\d\d bytes is over 100 \(maxResultBytes\): a notification or request of the server, dropped$/);
    expect(reader.readMessage()).toEqual({ jsonrpc: '2.0', id: 2, result: {} });
    expect(() => reader.append(bytes(`"${'w'.repeat(500)}"\n`))).toThrow('an MCP message of 502 bytes is over 100 (maxResultBytes), and names no request');
  });
});
