/**
 * `readme` with the text between the markers `<!-- <name>:start -->` and `<!-- <name>:end -->`
 * replaced by `content`: how `npm run docs` keeps the README's generated tables true. The README
 * must hold both markers, once each, in order.
 */
export function withReadmeSection(readme: string, name: string, content: string): string {
  const startMarker = `<!-- ${name}:start -->`;
  const endMarker = `<!-- ${name}:end -->`;
  const start = readme.indexOf(startMarker);
  const end = readme.indexOf(endMarker);
  if (start < 0 || end < start || readme.indexOf(startMarker, start + 1) >= 0) throw new Error(`README.md must hold "${startMarker}" once, then "${endMarker}"`);
  return `${readme.slice(0, start + startMarker.length)}\n${content}\n${readme.slice(end)}`;
}
