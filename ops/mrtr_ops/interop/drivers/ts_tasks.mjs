// @modelcontextprotocol/ext-tasks on the official TypeScript client: calls that become tasks, a
// question inside a task answered through the package's input API, cancel, push through the SDK's
// `listen()`, and prime_report's MRTR round before its task. Results use the default result codec.
import { Client, StreamableHTTPClientTransport } from "@modelcontextprotocol/client";
import { createTaskSessionFromClient } from "@modelcontextprotocol/ext-tasks/client";
import { ExchangeLog, PROTOCOL_VERSION, TASKS_EXTENSION, connect, formAnswer, readConfig, runFeature } from "./common.mjs";
import { RawWire } from "./raw_wire.mjs";

const STREAM_END_WAIT_MS = 15_000;

const config = readConfig();
const { answers } = config;
const log = new ExchangeLog();

const clientInfo = { name: "mrtr-interop-ext-tasks", version: "1" };
// The extension is declared in the client's own capabilities too: the SDK's listen() frames its
// request with them, and a server only pushes task changes to a client that declared the extension.
const capabilities = { elicitation: { form: {} }, extensions: { [TASKS_EXTENSION]: {} } };
const client = new Client(clientInfo, { capabilities, versionNegotiation: { mode: { pin: PROTOCOL_VERSION } } });
const headers = config.token ? { Authorization: `Bearer ${config.token}` } : {};
const transport = new StreamableHTTPClientTransport(new URL(config.url), { fetch: log.fetch(), requestInit: { headers } });
const wire = new RawWire(transport);

/** The application's answers, through ext-tasks' input API (`onInputRequest`). */
async function onInputRequest(request, context) {
  log.asked({ kind: request.kind, params: request.params ?? null, scope: context.scope, delivery: context.delivery });
  if (request.kind !== "elicitation") throw new Error(`unexpected ${request.kind} request`);
  return formAnswer(answers, request.params);
}

/** What a settled execution shows: how it ran, and its outcome (result, or the error's details). */
function settled(execution, { outcome }) {
  const shown = { kind: execution.kind, taskId: execution.handle?.taskId ?? null, status: outcome.status };
  if (outcome.status === "completed") shown.result = outcome.result;
  if (outcome.status === "failed") shown.error = { message: outcome.error.message, code: outcome.error.code ?? null };
  return shown;
}

/** The server's own word on a task, read with a raw tasks/get after the client has settled it. */
async function serverStatus(taskId) {
  const params = { taskId, _meta: {} };
  const response = await wire.dispatch({ method: "tasks/get", params: frame(params) });
  return response.kind === "result" ? response.result.status : { error: response.error };
}

function frame(params) {
  return {
    ...params,
    _meta: {
      "io.modelcontextprotocol/protocolVersion": PROTOCOL_VERSION,
      "io.modelcontextprotocol/clientInfo": clientInfo,
      "io.modelcontextprotocol/clientCapabilities": capabilities,
    },
  };
}

let session;
const calls = {
  async task_result() {
    const execution = await session.callTool("count_primes", { limit: config.taskPrimesLimit });
    return settled(execution, await execution.settle());
  },
  async task_input() {
    const execution = await session.callTool("estimate_pi", config.piArguments);
    return settled(execution, await execution.settle());
  },
  async task_cancel() {
    const execution = await session.callTool("count_primes", { limit: config.cancelPrimesLimit });
    if (execution.kind !== "task") return { kind: execution.kind };
    await execution.cancel();
    const shown = settled(execution, await execution.settle());
    shown.serverStatus = await serverStatus(execution.handle.taskId);
    return shown;
  },
  async task_push() {
    const execution = await session.callTool("count_primes", { limit: config.pushPrimesLimit });
    if (execution.kind !== "task") return { kind: execution.kind };
    const taskId = execution.handle.taskId;
    const seen = wire.notifications.length;
    const subscription = await client.listen({ taskIds: [taskId] });
    const shown = settled(execution, await execution.settle());
    // The client may settle from a poll before the push of the end arrives: the server ends the stream
    // once every watched task is terminal, so wait for that (bounded) before reading what was pushed.
    shown.streamEnded = await Promise.race([
      subscription.closed.then(() => true),
      new Promise((resolve) => setTimeout(() => resolve(false), STREAM_END_WAIT_MS).unref()),
    ]);
    await subscription.close();
    const passed = wire.notifications.slice(seen);
    shown.honoredFilter = subscription.honoredFilter;
    shown.acknowledged = passed
      .filter((n) => n.method === "notifications/subscriptions/acknowledged")
      .map((n) => n.params?.notifications ?? null);
    shown.pushes = passed
      .filter((n) => n.method === "notifications/tasks" && n.params?.taskId === taskId)
      .map((n) => ({ status: n.params.status, result: n.params.result ?? null }));
    return shown;
  },
  async prime_report() {
    const execution = await session.callTool("prime_report", {});
    return settled(execution, await execution.settle());
  },
};

const connected = await connect(client, transport);
if (connected.ok) {
  wire.attach();
  session = createTaskSessionFromClient(client, {
    endpointId: "mrtr-interop",
    rawDispatch: wire.dispatch,
    v2RequestFraming: { protocolVersion: PROTOCOL_VERSION, clientInfo, clientCapabilities: capabilities },
    onInputRequest,
    onError: (error) => log.asked({ backgroundError: String(error?.message ?? error) }),
  });
}
for (const feature of config.features) {
  await runFeature(log, feature, () => (connected.ok ? calls[feature]() : Promise.reject(connected.error)));
}
await session?.close();
await client.close();
