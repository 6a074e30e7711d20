import { runSeed } from './run-seed.js';
const seed = Number(process.argv[2]);
const r = await runSeed(seed, { steps: Number(process.argv[3] ?? 200) });
console.log(r.failure?.message);
const filter = process.argv[4];
console.log(
  r.transcript
    .split('\n')
    .filter((l) => filter === undefined || l.startsWith(filter))
    .map((l) => l.slice(0, 260))
    .join('\n'),
);
