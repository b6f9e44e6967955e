// What every Node driver shares: its configuration, one JSON line per feature on stdout, the HTTP
// exchange trace (which worker answered, when), the scripted answers, and the vault page callback.
// The drivers use the official clients as their documentation shows; nothing here speaks MCP itself.
import { readFileSync } from "node:fs";
import { performance } from "node:perf_hooks";

export const PROTOCOL_VERSION = "2026-07-28";
export const TASKS_EXTENSION = "io.modelcontextprotocol/tasks";

/** The orchestrator's configuration: a JSON file named by the first argument. */
export function readConfig() {
  return JSON.parse(readFileSync(process.argv[2], "utf8"));
}

/** Every HTTP exchange the client makes, in order: method, Mcp-Name, worker, status, times (ms). */
export class ExchangeLog {
  constructor() {
    this.exchanges = [];
    this.current = { asked: [] };
  }

  /** Note an input request the server sent during the current feature (what the client was asked). */
  asked(entry) {
    this.current.asked.push(entry);
  }

  /** A `fetch` for the SDK transport that records each exchange and passes it through untouched. */
  fetch() {
    return async (input, init) => {
      const started = performance.now();
      const headers = new Headers(init?.headers);
      let method = init?.method ?? "GET";
      if (typeof init?.body === "string") {
        try {
          method = JSON.parse(init.body).method ?? "response";
        } catch {
          method = "unparsed";
        }
      }
      const entry = { method, name: headers.get("mcp-name"), started };
      this.exchanges.push(entry);
      const response = await fetch(input, init);
      entry.answered = performance.now();
      entry.status = response.status;
      entry.worker = response.headers.get("x-worker-id");
      return response;
    };
  }

  /** Exchanges from index `from` on (a feature's own). */
  since(from) {
    return this.exchanges.slice(from).map((x) => ({
      method: x.method,
      name: x.name ?? null,
      worker: x.worker ?? null,
      status: x.status ?? null,
      startedMs: round(x.started),
      answeredMs: x.answered === undefined ? null : round(x.answered),
    }));
  }
}

function round(ms) {
  return Math.round(ms * 1000) / 1000;
}

/** The scripted answer to a form: the first rule whose `match` occurs in the question's message. */
export function formAnswer(answers, params) {
  for (const rule of answers.forms) {
    if (params.message.includes(rule.match)) return { action: "accept", content: rule.content };
  }
  return { action: "decline" };
}

/** Ask the orchestrator to complete a vault page flow as the signed-in user (a person in a browser). */
export async function completeVaultPage(helperUrl, url) {
  const response = await fetch(helperUrl, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ url }),
  });
  if (!response.ok) throw new Error(`vault helper answered ${response.status}: ${await response.text()}`);
}

/** A plain description of an error, with the JSON-RPC code and data when the client kept them. */
export function describeError(error) {
  const described = { type: error?.constructor?.name ?? typeof error, message: String(error?.message ?? error) };
  if (typeof error?.code === "number") described.code = error.code;
  if (error?.data !== undefined) described.data = error.data;
  if (error?.cause !== undefined) described.cause = String(error.cause?.message ?? error.cause);
  return described;
}

/** Run one feature and print its record; a failure is recorded, never thrown past this point. */
export async function runFeature(log, feature, body) {
  const from = log.exchanges.length;
  const started = performance.now();
  const record = { feature, asked: [] };
  log.current = record;
  try {
    record.value = await body(record);
    record.ok = true;
  } catch (error) {
    record.ok = false;
    record.error = describeError(error);
  }
  record.elapsedMs = round(performance.now() - started);
  record.exchanges = log.since(from);
  process.stdout.write(`${JSON.stringify(record)}\n`);
}

/** Connect, keeping a failure to report under every feature rather than crashing the driver. */
export async function connect(client, transport) {
  try {
    await client.connect(transport);
    return { ok: true };
  } catch (error) {
    return { ok: false, error };
  }
}
