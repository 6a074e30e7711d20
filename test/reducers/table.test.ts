import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { defineMachine, edgesOf, eventTypesOf, type Row } from '../../src/index.js';

// A small machine exercising every feature of a table: '*', state lists, guards, self-loops, kinds.
const LampState = z.object({ value: z.enum(['off', 'on', 'broken']), watts: z.number() });
type LampState = z.infer<typeof LampState>;
const LampEvent = z.discriminatedUnion('type', [
  z.object({ type: z.literal('toggle') }),
  z.object({ type: z.literal('dim'), watts: z.number() }),
  z.object({ type: z.literal('smash') }),
]);
type LampEvent = z.infer<typeof LampEvent>;

const table: readonly Row<LampState, LampEvent>[] = [
  { from: 'off', on: 'toggle', to: 'on', kind: 'lamp.lit' },
  { from: 'on', on: 'toggle', to: 'off' },
  { from: 'on', on: 'dim', when: (s, e) => e.watts < s.watts, label: 'fewer watts', assign: (_, e) => ({ watts: e.watts }) },
  { from: 'on', on: 'dim', when: (_, e) => e.watts === 0, label: 'zero watts', to: 'off' },
  { from: '*', on: 'smash', to: 'broken' },
  { from: ['off', 'on'], on: 'smash', to: 'broken' }, // the same rows again: listed once
];
const lamp = defineMachine<LampState, LampEvent>({
  id: 'lamp',
  states: LampState.shape.value.options,
  terminal: ['broken'],
  events: eventTypesOf(LampEvent),
  schemas: { state: LampState, event: LampEvent, input: z.void() },
  initial: () => ({ value: 'off', watts: 60 }),
  table,
});

describe('defineMachine', () => {
  it("expands '*' to every non-terminal state, and lists a repeated row once", () => {
    expect(
      edgesOf(lamp)
        .filter((e) => e.on === 'smash')
        .map((e) => e.from),
    ).toEqual(['off', 'on']);
  });

  it('a row without `to` stays in its state; `kind` defaults to the event type', () => {
    const on = { value: 'on' as const, watts: 60 };
    expect(lamp.step(on, { type: 'dim', watts: 40 })).toEqual({ accepted: true, state: { value: 'on', watts: 40 }, kind: 'dim' });
    expect(lamp.step({ value: 'off', watts: 60 }, { type: 'toggle' })).toMatchObject({ kind: 'lamp.lit' });
  });

  it('tries guarded rows in order and names every guard when none holds', () => {
    const on = { value: 'on' as const, watts: 60 };
    expect(lamp.transition(on, { type: 'dim', watts: 0 })).toEqual({ value: 'on', watts: 0 }); // first guard wins
    expect(lamp.step(on, { type: 'dim', watts: 100 })).toEqual({
      accepted: false,
      state: on,
      code: 'not_allowed',
      reason: 'event "dim" is not allowed in state "on": it needs fewer watts or zero watts',
    });
  });

  it('rejects an unknown type by name, even without validation', () => {
    const off = lamp.initial();
    expect(lamp.step(off, { type: 'explode' } as never)).toMatchObject({
      accepted: false,
      code: 'unknown_event',
      reason: 'unknown event type "explode" for machine "lamp"; expected one of: toggle, dim, smash',
    });
  });

  it('refuses a table naming states or events the machine does not declare, listing each problem', () => {
    expect(() =>
      defineMachine<LampState, LampEvent>({
        id: 'bad-lamp',
        states: ['off', 'on', 'broken'],
        terminal: ['broken', 'gone' as never],
        events: ['toggle', 'dim'],
        schemas: { state: LampState, event: LampEvent, input: z.void() },
        initial: () => ({ value: 'off', watts: 60 }),
        table: [
          { from: 'broken', on: 'toggle', to: 'on' },
          { from: 'off', on: 'smash', to: 'nowhere' as never },
        ],
      }),
    ).toThrowErrorMatchingInlineSnapshot(`
      [Error: machine "bad-lamp" has an invalid table:
      - terminal state "gone" is not a state
      - row toggle: from "broken" is terminal
      - row smash: to "nowhere" is not a state
      - row smash: "smash" is not an event]
    `);
  });

  it('draws the diagram from the table', () => {
    expect(lamp.toMermaid()).toMatchInlineSnapshot(`
      "stateDiagram-v2
        [*] --> off
        off --> on : toggle
        on --> off : toggle
        on --> on : dim [fewer watts]
        on --> off : dim [zero watts]
        off --> broken : smash
        on --> broken : smash
        broken --> [*]"
    `);
  });
});

describe('internal transitions', () => {
  // A kettle that boils and is off again in the same step: `boiled` is the seed's "(internal, no rune)".
  const KettleState = z.object({ value: z.enum(['off', 'heating', 'boiled', 'gone']), boils: z.number() });
  type KettleState = z.infer<typeof KettleState>;
  const KettleEvent = z.discriminatedUnion('type', [z.object({ type: z.literal('heat') }), z.object({ type: z.literal('boil') })]);
  type KettleEvent = z.infer<typeof KettleEvent>;
  const definition = {
    id: 'kettle',
    states: KettleState.shape.value.options,
    terminal: ['gone'],
    events: eventTypesOf(KettleEvent),
    schemas: { state: KettleState, event: KettleEvent, input: z.void() },
    initial: (): KettleState => ({ value: 'off', boils: 0 }),
    table: [
      { from: 'off', on: 'heat', to: 'heating' },
      { from: 'heating', on: 'boil', to: 'boiled', kind: 'kettle.boiled', assign: (s: KettleState) => ({ boils: s.boils + 1 }) },
    ] as readonly Row<KettleState, KettleEvent>[],
  } as const;
  const kettle = defineMachine<KettleState, KettleEvent>({ ...definition, internal: { boiled: 'off' } });

  it("lands a row's step in the internal transition's target: one step, one rune kind, the context kept", () => {
    const heating = kettle.transition(kettle.initial(), { type: 'heat' });
    expect(kettle.step(heating, { type: 'boil' })).toEqual({ accepted: true, state: { value: 'off', boils: 1 }, kind: 'kettle.boiled' });
    expect(kettle.internal).toEqual({ boiled: 'off' });
    expect(edgesOf(kettle).map((e) => `${e.from} -> ${e.to}`)).toEqual(['off -> heating', 'heating -> boiled']); // the table as the seed writes it
  });

  it('draws an internal transition as the seed does, with no event', () => {
    expect(kettle.toMermaid().split('\n').slice(2)).toEqual([
      '  off --> heating : heat',
      '  heating --> boiled : boil',
      '  boiled --> off : (internal, no rune)',
      '  gone --> [*]',
    ]);
  });

  it('refuses an internal transition from a terminal state, to a state that moves on itself, or naming no state', () => {
    expect(() => defineMachine<KettleState, KettleEvent>({ ...definition, internal: { gone: 'off', boiled: 'heating', heating: 'off', nope: 'off' } as never })).toThrow(
      [
        'machine "kettle" has an invalid table:',
        '- internal gone -> off: "gone" is terminal',
        '- internal boiled -> heating: "heating" moves on internally itself',
        '- internal nope -> off: both must be states',
      ].join('\n'),
    );
  });
});

describe('eventTypesOf', () => {
  it('reads the event types of a discriminated union, in order', () => {
    expect(eventTypesOf(LampEvent)).toEqual(['toggle', 'dim', 'smash']);
  });

  it('refuses a schema that is not a union of objects with literal types', () => {
    expect(() => eventTypesOf(z.object({ type: z.literal('a') }))).toThrow(/discriminatedUnion/);
    expect(() => eventTypesOf(z.discriminatedUnion('type', [z.object({ type: z.enum(['a', 'b']) })]) as never)).toThrow(/z.literal/);
  });
});
