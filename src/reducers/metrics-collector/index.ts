export { MetricsCollectorEvent, MetricsCollectorState, MetricsCollectorStateName } from './schema.js';
export { metricsCollector } from './machine.js';
