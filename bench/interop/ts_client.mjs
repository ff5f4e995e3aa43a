// The official TypeScript SDK v2 client (@modelcontextprotocol/client, pinned in package.json) as the
// interop matrix drives it: its defaults, 2026-07-28 pinned, form elicitation declared, each field
// answered by its type.
//
//     node bench/interop/ts_client.mjs URL      # calls deploy(env=production), prints the result
import { Client, StreamableHTTPClientTransport } from '@modelcontextprotocol/client';

const VALUES = { boolean: true, number: 1, integer: 1 };
const client = new Client({ name: 'mrtr-interop-ts', version: '1.0.0' }, { capabilities: { elicitation: { form: {} } }, versionNegotiation: { mode: { pin: '2026-07-28' } } });
client.setRequestHandler('elicitation/create', async (request) => {
  const props = request.params.requestedSchema?.properties ?? {};
  const content = Object.fromEntries(Object.entries(props).map(([k, v]) => [k, VALUES[v.type] ?? 'yes']));
  return { action: 'accept', content };
});
try {
  await client.connect(new StreamableHTTPClientTransport(new URL(process.argv[2])));
  const result = await client.callTool({ name: 'deploy', arguments: { env: 'production' } });
  console.log('deploy:', result.content.map((c) => c.text ?? '').join(' '));
  await client.close();
} catch (e) {
  console.error(`error: ${e?.message ?? e}`);
  process.exit(1);
}
