// Module hooks for import-probe.mjs: tell the main thread the URL of every module resolved.
let port;
let marker;

export function initialize(data) {
  ({ port, marker } = data);
}

export async function resolve(specifier, context, nextResolve) {
  // The probe resolves the marker last: the messages before it on the same port are complete.
  if (specifier === marker) {
    port.postMessage(marker);
    return { url: 'data:text/javascript,', shortCircuit: true };
  }
  const result = await nextResolve(specifier, context);
  port.postMessage(result.url);
  return result;
}
