// The official TypeScript client (@modelcontextprotocol/client) on the MRTR paths: its own
// input_required driver answers through the handlers registered below and retries by itself.
import { Client, StreamableHTTPClientTransport } from "@modelcontextprotocol/client";
import { ExchangeLog, PROTOCOL_VERSION, completeVaultPage, connect, formAnswer, readConfig, runFeature } from "./common.mjs";

const config = readConfig();
const { answers } = config;
const log = new ExchangeLog();

const client = new Client(
  { name: "mrtr-interop-ts-client", version: "1" },
  {
    capabilities: { elicitation: { form: {}, url: {} }, sampling: {}, roots: {} },
    versionNegotiation: { mode: { pin: PROTOCOL_VERSION } },
  },
);
client.setRequestHandler("elicitation/create", async (request) => {
  log.asked({ method: "elicitation/create", params: request.params });
  if (request.params.mode === "url") {
    await completeVaultPage(config.vaultHelper, request.params.url);
    return { action: "accept" };
  }
  return formAnswer(answers, request.params);
});
client.setRequestHandler("sampling/createMessage", async (request) => {
  log.asked({ method: "sampling/createMessage", params: request.params });
  return { model: answers.sampling.model, role: "assistant", content: { type: "text", text: answers.sampling.text } };
});
client.setRequestHandler("roots/list", async (request) => {
  log.asked({ method: "roots/list", params: request.params ?? null });
  return { roots: answers.roots.map((uri) => ({ uri })) };
});

const headers = config.token ? { Authorization: `Bearer ${config.token}` } : {};
const transport = new StreamableHTTPClientTransport(new URL(config.url), { fetch: log.fetch(), requestInit: { headers } });

const calls = {
  elicitation: () => client.callTool({ name: "link_accounts", arguments: {} }),
  sampling: () => client.callTool({ name: "write_haiku", arguments: { topic: config.haikuTopic } }),
  roots: () => client.callTool({ name: "scan_roots", arguments: {} }),
  handback: () => client.callTool({ name: "count_primes", arguments: { limit: config.primesLimit } }),
  prompt: () => client.getPrompt({ name: "onboarding", arguments: {} }),
  resource: () => client.readResource({ uri: config.resourceUri }),
  url_elicitation: () => client.callTool({ name: "connect_vault", arguments: {} }),
};

const connected = await connect(client, transport);
for (const feature of config.features) {
  await runFeature(log, feature, () => (connected.ok ? calls[feature]() : Promise.reject(connected.error)));
}
await client.close();
