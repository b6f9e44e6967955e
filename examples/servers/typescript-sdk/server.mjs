// A server on the official MCP TypeScript SDK (@modelcontextprotocol/server 2.4.0) as its docs show one:
// a multi-round tool over Streamable HTTP, nothing else.
//
//     node examples/servers/typescript-sdk/server.mjs --port 8001
//
// `add_up` asks once, then adds one number a round; the progress travels in `requestState`.
// Without REQUEST_STATE_KEYS the SDK leaves the state as the handler wrote it (its default:
// typescript-sdk#2332), so a client can read and change it. With REQUEST_STATE_KEYS (comma-separated
// secrets of at least 32 bytes, the sealing key first) the SDK's own codec, createRequestStateCodec,
// signs it with the first key and every key opens it, so a rolling update can add a key.
import http from 'node:http';
import { McpServer, acceptedContent, createMcpHandler, createRequestStateCodec, inputRequired } from '@modelcontextprotocol/server';
import * as z from 'zod';

const keys = (process.env.REQUEST_STATE_KEYS ?? '').split(',').filter(Boolean);
const codecs = keys.map(key => createRequestStateCodec({ key }));

/** Verify with each key in turn (the SDK's codec holds one): the ring's rotation. */
async function verify(state, ctx) {
    for (const codec of codecs) {
        try {
            return await codec.verify(state, ctx);
        } catch {
            // the next key may open it
        }
    }
    throw new Error('mac');
}

/** The progress as the wire carries it: sealed by the first key, or plain base64url JSON without a codec. */
async function seal(progress) {
    if (codecs.length > 0) return codecs[0].mint(progress);
    return Buffer.from(JSON.stringify(progress)).toString('base64url');
}

/** The progress the round brings: the codec's verified payload, or the plain state decoded (trusted as is). */
function opened(state) {
    if (state === undefined) return undefined;
    return typeof state === 'string' ? JSON.parse(Buffer.from(state, 'base64url').toString('utf8')) : state;
}

const confirmSchema = z.object({ ok: z.boolean() });

function newServer() {
    const options = codecs.length > 0 ? { requestState: { verify } } : {};
    const server = new McpServer({ name: 'typescript-sdk-example', version: '1.0.0' }, options);
    server.registerTool(
        'add_up',
        {
            description: 'Add the numbers up, one a round, after asking once; the progress travels in requestState.',
            inputSchema: { numbers: z.array(z.number().int()) },
            outputSchema: { total: z.number().int() }
        },
        async ({ numbers }, ctx) => {
            const progress = opened(ctx.mcpReq.requestState());
            if (progress === undefined) {
                const confirmed = acceptedContent(ctx.mcpReq.inputResponses, 'confirm', confirmSchema);
                if (confirmed?.ok !== true) {
                    return inputRequired({
                        inputRequests: { confirm: inputRequired.elicit({ message: 'Add these numbers up?', requestedSchema: confirmSchema }) }
                    });
                }
                return inputRequired({ requestState: await seal({ next: 0, total: 0 }) });
            }
            if (progress.next >= numbers.length) {
                return { content: [{ type: 'text', text: String(progress.total) }], structuredContent: { total: progress.total } };
            }
            const done = { next: progress.next + 1, total: progress.total + numbers[progress.next] };
            return inputRequired({ requestState: await seal(done) });
        }
    );
    return server;
}

const handler = createMcpHandler(newServer);

/** node:http in front of the SDK's web-standard handler (`handler.fetch`). */
async function serve(req, res) {
    const chunks = [];
    for await (const chunk of req) chunks.push(chunk);
    const body = chunks.length > 0 ? Buffer.concat(chunks) : undefined;
    const request = new Request(`http://${req.headers.host ?? 'localhost'}${req.url}`, {
        method: req.method,
        headers: req.headers,
        body: req.method === 'GET' || req.method === 'HEAD' ? undefined : body
    });
    const response = await handler.fetch(request);
    res.writeHead(response.status, Object.fromEntries(response.headers));
    if (response.body) {
        for await (const chunk of response.body) res.write(chunk);
    }
    res.end();
}

const portFlag = process.argv.indexOf('--port');
const port = Number(portFlag > 0 ? process.argv[portFlag + 1] : (process.env.PORT ?? 8001));
http.createServer((req, res) => {
    serve(req, res).catch(error => {
        res.writeHead(500, { 'content-type': 'text/plain' });
        res.end(String(error));
    });
}).listen(port, '127.0.0.1', () => console.log(`typescript-sdk example on http://127.0.0.1:${port}/mcp`));
