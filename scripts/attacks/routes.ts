/**
 * Issue 26, items 3 and 5 (routes): what the new routes let one client cost the rest.
 *
 * - `ag-ui-error`: a ~1 MiB AG-UI body of wrong messages, alone and four at once beside a bystander.
 * - `ws-invalid-frame`: a 30 KB invalid frame's CPU, and four connections pipelining them beside a bystander.
 * - `held-bodies`: POSTs each holding most of a 1 MiB body (200 here, not the issue's 1,000, so
 *   it stays well under a minute; the 64 MiB budget is what bounds them either way).
 * - `metric-labels`: 200 tool and 200 model names of 250,000 characters, then a scrape.
 *
 * Every loop is bounded and every wait has a deadline.
 */
import { once } from 'node:events';
import { request } from 'node:http';
import { connect, type Socket } from 'node:net';
import { createEngine } from '../../src/index.js';
import { agUiRoutes } from '../../src/server/ag-ui/ag-ui-routes.js';
import { createMetrics } from '../../src/server/index.js';
import { Client, MiB, mib, ms, peakRss, pipelinedBeside, report, rss, serve, signed, sleep, tally } from './kit.js';

/** POSTs `body` and reads the whole answer: status, bytes, how long it took. */
function post(url: string, body: string, deadlineMs = 60_000): Promise<{ status: number; bytes: number; ms: number }> {
  const started = performance.now();
  return new Promise((resolve) => {
    const req = request(url, { method: 'POST', headers: { 'content-type': 'application/json' }, timeout: deadlineMs }, (res) => {
      let bytes = 0;
      res.on('data', (chunk: Buffer) => (bytes += chunk.length));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, bytes, ms: performance.now() - started }));
    });
    req.on('timeout', () => req.destroy());
    req.on('error', () => resolve({ status: 0, bytes: 0, ms: performance.now() - started }));
    req.end(body);
  });
}

/** 3a. A ~1 MiB AG-UI body of wrong messages; then four at once while a bystander's WebSocket Ping waits. */
async function agUiError(): Promise<void> {
  const engine = createEngine();
  await engine.spawn('bystander', 'chat-actor');
  const { server, stop } = await serve({ routes: agUiRoutes({ engine, agents: { assistant: {} } }) }, engine);
  const url = `${server.httpUrl}/agents/assistant/ag-ui`;
  // Just under maxBodyBytes (1 MiB): each message has a number for its id and its role.
  const body = JSON.stringify({ threadId: 't1', runId: 'r1', messages: Array.from({ length: 34_000 }, () => ({ id: 1, role: 2, content: 3 })) });
  const before = await rss();
  const peak = peakRss();
  const one = await post(url, body);
  const bystander = await Client.open(server.url);
  const four = Promise.all([0, 1, 2, 3].map(() => post(url, body)));
  const sent = performance.now();
  bystander.send({ op: 'dispatch', id: 'b', stream: 'bystander', event: { type: 'Ping' } });
  const ack = await bystander.find((m) => m.id === 'b', 60_000);
  const answers = await four;
  const top = peak();
  bystander.ws.close();
  await stop();
  report(
    `3a. AG-UI error amplification (POST /agents/:id/ag-ui, ${mib(Buffer.byteLength(body))} body of 34,000 wrong messages)`,
    'a 60.5 MB error after 4.5-14 s, 1.3 GB peak; four at once stalled a bystander 40 s',
    `${one.status} of ${one.bytes} bytes in ${ms(one.ms)}; RSS peak ${signed(top - before)} over ${mib(before)}; ` +
      `four at once: ${tally(answers.map((a) => `${a.status} (${a.bytes} B)`))}, the bystander's Ping ${ack?.message.op ?? 'no answer'} in ${ack === undefined ? '?' : ms(ack.at - sent)}`,
    26,
  );
}

/** 3b. A 30 KB dispatch of 10,000 wrong elements: its CPU alone; then four connections pipelining ten each beside a bystander. */
async function wsInvalidFrame(): Promise<void> {
  const { engine, server, stop } = await serve();
  await engine.spawn('turn', 'turn-engine');
  await engine.spawn('bystander', 'chat-actor');
  // 10,000 empty objects where tool calls go: each misses callId, toolName and arguments.
  const calls = Array.from({ length: 10_000 }, () => '{}').join(',');
  const frame = (id: number) => `{"op":"dispatch","id":${id},"stream":"turn","event":{"type":"tool_calls_received","callIds":["c"],"calls":[${calls}]}}`;
  const single = await Client.open(server.url);
  single.send(frame(0)); // warms up the paths
  await single.find((m) => m.id === 0);
  const cpu = process.cpuUsage();
  for (let i = 1; i <= 10; i++) {
    single.send(frame(i));
    await single.find((m) => m.id === i);
  }
  const used = process.cpuUsage(cpu);
  const perFrame = (used.user + used.system) / 1000 / 10;
  const error = single.received.find((r) => r.message.id === 1);
  single.ws.close();

  const { ack, ackMs } = await pipelinedBeside(server.url, frame, 'bystander');
  await stop();
  report(
    `3b. WebSocket invalid frame (${Buffer.byteLength(frame(1))} B dispatch, 10,000 wrong elements)`,
    'about 0.27 s of CPU each; four connections stalled a bystander 3.3 s',
    `${error?.message.code ?? 'no answer'} of ${error?.bytes ?? '?'} bytes, ${ms(perFrame)} of server CPU per frame (the process's, client included); ` +
      `4 x 10 pipelined: the bystander's Ping ${ack?.message.op ?? 'no answer'} in ${ackMs === undefined ? '?' : ms(ackMs)}`,
    26,
  );
}

/** 5a. POSTs that send 1 MiB less one byte of a 1 MiB body and hold; the default budget (64 MiB) and deadline (10 s). */
async function heldBodies(): Promise<void> {
  const count = 200;
  const engine = createEngine();
  const { server, stop } = await serve({ routes: agUiRoutes({ engine, agents: { assistant: {} } }) }, engine);
  const before = await rss();
  const peak = peakRss();
  const chunk = Buffer.alloc(MiB - 1, 'x');
  const started = performance.now();
  const answers: Promise<string>[] = [];
  const sockets: Socket[] = [];
  for (let i = 0; i < count; i++) {
    const socket = connect(server.port, '127.0.0.1');
    socket.on('error', () => undefined);
    sockets.push(socket);
    await once(socket, 'connect');
    let text = '';
    socket.on('data', (data: Buffer) => (text += data.toString('latin1')));
    answers.push(Promise.race([once(socket, 'close').then(() => /^HTTP\/1\.1 (\d+)/.exec(text)?.[1] ?? 'closed, no answer'), sleep(40_000).then(() => 'held past 40 s')]));
    socket.write(`POST /agents/assistant/ag-ui HTTP/1.1\r\nhost: 127.0.0.1:${server.port}\r\ncontent-type: application/json\r\ncontent-length: ${MiB}\r\n\r\n`);
    socket.write(chunk);
  }
  await sleep(2000);
  const held = (await rss()) - before;
  const statuses = await Promise.all(answers);
  const elapsed = performance.now() - started;
  const top = peak();
  for (const socket of sockets) socket.destroy();
  await stop();
  report(
    `5a. held HTTP bodies (${count} POSTs of 1 MiB less a byte, never finished; the issue had 1,000)`,
    '+1.0 GB kept for 300 s',
    `after 2 s RSS ${signed(held)} (peak ${signed(top - before)}); answers: ${tally(statuses)}, all within ${ms(elapsed)}`,
    26,
  );
}

/** 5b. 200 tool and 200 model names of 250,000 characters in the runes; then a scrape. */
async function metricLabels(): Promise<void> {
  const metrics = createMetrics();
  const { engine, server, stop } = await serve({ metrics });
  const stopObserving = metrics.observe(engine);
  for (let i = 0; i < 200; i++) {
    const name = `${'x'.repeat(250_000)}${i}`;
    await engine.spawn(`calls/t${i}`, 'tool-call', { callId: `t${i}`, toolName: name, arguments: {} });
    await engine.dispatch(`calls/t${i}`, { type: 'no_approval_needed' });
    await engine.dispatch(`calls/t${i}`, { type: 'execution_error', error: 'boom' });
    await engine.spawn(`turns/t${i}`, 'turn-engine');
    await engine.dispatch(`turns/t${i}`, { type: 'start_turn', input: 'hi' });
    await engine.dispatch(`turns/t${i}`, { type: 'response_done', model: name, usage: { inputTokens: 1 } });
  }
  const started = performance.now();
  const scrape = await new Promise<number>((resolve) =>
    request(`${server.httpUrl}/metrics`, (res) => {
      let bytes = 0;
      res.on('data', (chunk: Buffer) => (bytes += chunk.length));
      res.on('end', () => resolve(bytes));
    }).end(),
  );
  const took = performance.now() - started;
  stopObserving();
  await stop();
  report(
    '5b. long metric labels (200 tool and 200 model names of 250,000 characters)',
    '150 MB a scrape, 7-11 s, 2 GB of memory',
    `${mib(scrape)} a scrape, in ${ms(took)}`,
    26,
  );
}

export const attacks: Record<string, () => Promise<void>> = {
  'ag-ui-error': agUiError,
  'ws-invalid-frame': wsInvalidFrame,
  'held-bodies': heldBodies,
  'metric-labels': metricLabels,
};
