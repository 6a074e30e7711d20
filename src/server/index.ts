export * from './protocol.js';
export { createServer, type RunestreamServer } from './server.js';
export type { ServerOptions, SlowClientPolicy, DispatchRate } from './options.js';
export { isLoopbackHost, type AccessRequest, type AccessAction, type Authorize, type Credential, type Identity, type Verify } from './access.js';
export { SERVER_CHANNELS, type SentReport, type SlowClientReport } from './diagnostics.js';
export type { HttpError } from './http-reply.js';
export type { Route, RouteContext, RouteHandler } from './routes.js';
