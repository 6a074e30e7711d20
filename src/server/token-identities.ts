import { z } from 'zod';
import { tokenMatches, type Authorize, type Identity, type Verify } from './access.js';

/** The most tokens a tokens file holds. */
export const MAX_TOKENS = 10_000;

/** What a token's holder may do: `see` streams, `drive` them (spawn, dispatch), `approve` (answer approvals). */
export const TokenAction = z.enum(['see', 'drive', 'approve']);
export type TokenAction = z.infer<typeof TokenAction>;

/**
 * One token's holder: its identity's `id` (what an approval records as its approver), the actions
 * it `may` take, and the `streams` it may take them on (each an exact id, or a prefix ending in
 * `*`: `user/alice/*`); no `streams`: every stream.
 */
export const TokenHolder = z.strictObject({
  id: z.string().min(1).max(128),
  may: z.array(TokenAction).min(1).max(3),
  streams: z.array(z.string().min(1).max(257)).max(1000).optional(),
});
export type TokenHolder = z.infer<typeof TokenHolder>;

/**
 * A tokens file (`runestream serve --tokens-file`): JSON, each token (at least 16 characters) to
 * its holder, e.g. `{"<token>": {"id": "alice", "may": ["see", "approve"]}}`. At most
 * {@link MAX_TOKENS} tokens.
 */
export const TokensFile = z
  .record(z.string().min(16).max(4096), TokenHolder)
  .refine((tokens) => Object.keys(tokens).length >= 1, 'needs at least one token')
  .refine((tokens) => Object.keys(tokens).length <= MAX_TOKENS, `at most ${MAX_TOKENS} tokens`);
export type TokensFile = z.infer<typeof TokensFile>;

/** A verified holder: its identity, carrying what it may do. */
type HolderIdentity = Identity & { readonly may: readonly TokenAction[]; readonly streams?: readonly string[] };

const matches = (pattern: string, stream: string): boolean => (pattern.endsWith('*') ? stream.startsWith(pattern.slice(0, -1)) : stream === pattern);

/**
 * The `verify` and `authorize` of several identities, one per token: `verify` compares the
 * presented token with every one in constant time and yields `{id, may, streams}`; `authorize`
 * lets it take an action it `may` on a stream its `streams` match, and refuses the rest.
 */
export function tokenIdentities(tokens: TokensFile): { verify: Verify; authorize: Authorize } {
  const holders = Object.entries(TokensFile.parse(tokens)).map(([token, holder]) => ({ token, identity: Object.freeze({ ...holder }) as HolderIdentity }));
  const verify: Verify = ({ token }) => {
    let found: HolderIdentity | undefined;
    // Every token is compared, so the time taken says nothing of which one matched.
    for (const holder of holders) if (tokenMatches(holder.token, token) && found === undefined) found = holder.identity;
    return found;
  };
  const authorize: Authorize = (request, stream, action) => {
    const { may, streams } = request.identity as HolderIdentity;
    return may.includes(action) && (streams === undefined || streams.some((pattern) => matches(pattern, stream)));
  };
  return { verify, authorize };
}
