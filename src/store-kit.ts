/**
 * runestream/store-kit: for authors of a `RuneStore` (a PostgreSQL store, a store on a key-value
 * service). The interface and its errors; the checks every store shares, so all of them refuse
 * exactly the same batches; and the contract suite a new store starts by passing. The suite takes
 * the test runner's `describe`, `it` and `expect`, so nothing here imports a test runner.
 */
export {
  StoreConflictError,
  StoreError,
  StoreFencedError,
  checkBatch,
  checkRestore,
  headMatches,
  openState,
  prunePastSnapshot,
  type HeadsQuery,
  type RuneStore,
  type Snapshot,
  type StoreErrorCode,
  type StreamHead,
} from './streams/store.js';
export {
  runeOf,
  runesOf,
  storeContract,
  type ContractAssertion,
  type ContractPromiseAssertion,
  type ContractTestApi,
  type StoreFeatures,
} from './streams/store-contract.js';
