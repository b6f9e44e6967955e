// The `rawDispatch` that @modelcontextprotocol/ext-tasks requires on a 2026-07-28 server: requests
// the SDK's codecs would reject (task-shaped tools/call results, tasks/*) go out through the SDK's
// own transport (so its Mcp-Method / Mcp-Name / version headers are the SDK's), and their responses
// are taken off the transport before the SDK sees them. The MCP Inspector wires ext-tasks the same
// way (its RawWireChannel). It also keeps every notification that passed by, for the push check.
const RAW_ID_PREFIX = "interop-raw-";
const TIMEOUT_MS = 60_000;

export class RawWire {
  constructor(transport) {
    this.transport = transport;
    this.pending = new Map();
    this.counter = 0;
    this.notifications = [];
  }

  /** Call after `client.connect(transport)`: the SDK has installed its own `onmessage` by then. */
  attach() {
    const sdkOnMessage = this.transport.onmessage;
    this.transport.onmessage = (message, extra) => {
      if (typeof message.id === "string" && message.id.startsWith(RAW_ID_PREFIX) && !("method" in message)) {
        this.settle(message);
        return;
      }
      if (typeof message.method === "string" && !("id" in message)) {
        this.notifications.push(structuredClone(message));
      }
      sdkOnMessage?.(message, extra);
    };
  }

  settle(message) {
    const pending = this.pending.get(message.id);
    if (pending === undefined) return;
    this.pending.delete(message.id);
    clearTimeout(pending.timer);
    pending.resolve(
      "error" in message ? { kind: "error", error: message.error } : { kind: "result", result: message.result },
    );
  }

  /** ext-tasks' `rawDispatch(request, options)`: resolves `{kind: "result" | "error", ...}`. */
  dispatch = (request, options = {}) =>
    new Promise((resolve, reject) => {
      const id = `${RAW_ID_PREFIX}${(this.counter += 1)}`;
      const fail = (error) => {
        if (!this.pending.delete(id)) return;
        clearTimeout(timer);
        reject(error);
      };
      const timer = setTimeout(() => fail(new Error(`raw ${request.method} not answered in ${TIMEOUT_MS} ms`)), TIMEOUT_MS);
      this.pending.set(id, { resolve, timer });
      options.signal?.addEventListener("abort", () => fail(options.signal.reason ?? new Error("aborted")), { once: true });
      const message = { jsonrpc: "2.0", id, method: request.method };
      if (request.params !== undefined) message.params = request.params;
      const sendOptions = options.context?.headers === undefined ? {} : { headers: options.context.headers };
      this.transport.send(message, sendOptions).catch(fail);
    });
}
