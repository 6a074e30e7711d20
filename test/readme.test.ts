import { describeExamples, readmeExamples } from './support/examples.js';

// The README's examples are programs: each runs as its own process against the source, and its
// `assert`s and `// Logs:` comments state what it shows (test/support/examples.ts says how).
describeExamples('README examples', readmeExamples());
