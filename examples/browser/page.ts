/// <reference lib="dom" />
// The page's code: runestream/client with the browser's own WebSocket. serve.ts bundles it.
import { createClient } from 'runestream/client';

const stream = document.body.dataset.stream ?? 'conv/web/agent/echo/turn';
const client = createClient({ url: `ws://${location.host}` });
const show = (id: string, text: string): void => {
  document.getElementById(id)!.textContent = text;
};

client.connectionState$.subscribe((state) => show('connection', state));
client.state$<{ value: string; output?: string }>(stream).subscribe({
  next: (turn) => {
    show('turn', turn.value);
    show('answer', turn.output ?? '');
  },
  error: (error: unknown) => show('error', String(error)),
});

document.getElementById('ask')!.addEventListener('submit', (submit) => {
  submit.preventDefault();
  const input = document.getElementById('input') as HTMLInputElement;
  show('error', '');
  // A refused message (a turn still running, say) is shown, not left unhandled.
  client.dispatch(stream, { type: 'start_turn', input: input.value }).then(
    () => (input.value = ''),
    (error: unknown) => show('error', error instanceof Error ? error.message : String(error)),
  );
});
