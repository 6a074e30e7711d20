export { CircuitBreakerEvent, CircuitBreakerInput, CircuitBreakerState, CircuitBreakerStateName } from './schema.js';
export { circuitBreaker, circuitBreakerAllowsCall } from './machine.js';
