import { memoryStore } from '../../src/streams/memory-store.js';
import { describeStoreContract } from '../support/store-contract.js';

describeStoreContract('memoryStore', () => memoryStore());
