/**
 * A Keel agent's A2A agent card (v1.0, issue 41): its JSON-RPC endpoint (`/a2a/{agent}`), what it
 * can do (streaming, push notifications), its skills (the agent, then each of its tools) and how
 * to authenticate: the same API keys as Keel's own API, as an HTTP Bearer token.
 */
import type { AgentCard } from '@a2a-js/sdk';
import type { AgentDefinition } from '../../../core/index.ts';

/** The A2A protocol version served (the one `@a2a-js/sdk` 1.x speaks). */
export const A2A_VERSION = '1.0';

/** What the agent takes and gives: text, and JSON data parts (approvals, answers). */
const INPUT_MODES = ['text/plain', 'application/json'];
const OUTPUT_MODES = ['text/plain'];

/**
 * The card of `agent`, whose endpoint is `url` (`…/a2a/{agent}`). `auth`: whether the server
 * requires API keys (the card then says so as a security requirement). Served as ProtoJSON
 * (`AgentCard.toJSON`).
 */
export function agentCard(agent: AgentDefinition, url: string, auth: 'required' | 'off'): AgentCard {
  const tools = agent.tools.filter((t) => t.name !== 'ask_user');
  const description = `Keel agent ${agent.name} (version ${agent.version}).${
    tools.length > 0 ? ` Tools: ${tools.map((t) => t.name).join(', ')}.` : ''
  } A task is a durable run: it survives restarts, waits for approvals and answers (input-required), and can be resubscribed to.`;
  const skill = (id: string, name: string, text: string, tags: string[]) => ({
    id,
    name,
    description: text,
    tags,
    examples: [],
    inputModes: [],
    outputModes: [],
    securityRequirements: [],
  });
  return {
    name: agent.name,
    description,
    supportedInterfaces: [{ url, protocolBinding: 'JSONRPC', tenant: '', protocolVersion: A2A_VERSION }],
    provider: undefined,
    version: agent.version,
    capabilities: { streaming: true, pushNotifications: true, extendedAgentCard: false, extensions: [] },
    securitySchemes: {
      keel_api_key: {
        scheme: {
          $case: 'httpAuthSecurityScheme',
          value: {
            scheme: 'Bearer',
            bearerFormat: 'Keel API key',
            description:
              'A Keel API key (`keel keys create`) as "Authorization: Bearer <key>": the same keys, and tenants, as Keel\'s own API. The card takes it too.',
          },
        },
      },
    },
    securityRequirements: auth === 'required' ? [{ schemes: { keel_api_key: { list: [] } } }] : [],
    defaultInputModes: INPUT_MODES,
    defaultOutputModes: OUTPUT_MODES,
    skills: [
      skill(agent.name, agent.name, description, ['keel', 'agent']),
      ...tools.map((t) => skill(`${agent.name}.${t.name}`, t.name, t.description ?? t.name, ['tool'])),
    ],
    signatures: [],
  };
}
