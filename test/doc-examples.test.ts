import { describeExamples, docExamples } from './support/examples.js';

// The `## Example` and `@example` blocks of the doc comments in src run like the README's: each is
// its own process against the source, and its `// Logs:` comments are checked.
describeExamples('doc comment examples', docExamples());
