/** MCP servers in an agent's configuration: validation with clear errors (keel.config.* and the library). */
import { describe, expect, it } from 'vitest';
import {
  agentsFromConfig,
  ConfigError,
  McpConfigError,
  mcpServer,
  parseMcpServers,
  ScriptedModel,
} from '../../src/index.ts';

const base = { name: 'a', model: new ScriptedModel([]) };

describe('MCP server configuration', () => {
  it('takes stdio and http servers with tools, approvals, timeouts and onUnavailable', () => {
    const { agents } = agentsFromConfig(
      {
        agents: [
          {
            ...base,
            mcpServers: [
              {
                name: 'github',
                stdio: { command: 'node', args: ['server.js'], env: { TOKEN: 'x' } },
                tools: { allow: ['create_issue'], prefix: 'gh_' },
                approval: { default: 'always', tools: { create_issue: 'never' } },
              },
              {
                name: 'docs',
                http: { url: 'https://example.com/mcp', headers: { authorization: 'Bearer x' } },
                approval: 'auto',
                timeoutMs: 5000,
                onUnavailable: 'skip',
              },
            ],
          },
        ],
      },
      'keel.config.json',
      process.cwd(),
    );
    expect(agents[0]!.mcpServers?.map((s) => s.name)).toEqual(['github', 'docs']);
  });

  it('refuses what it cannot use, naming the problem', () => {
    const bad = (mcpServers: unknown[]) => () =>
      agentsFromConfig({ agents: [{ ...base, mcpServers } as never] }, 'keel.config.json', process.cwd());
    expect(bad([{ name: 'x' }])).toThrow(ConfigError);
    expect(bad([{ name: 'x' }])).toThrow(/exactly one of stdio or http/);
    expect(bad([{ name: 'x', stdio: { command: 'a' }, http: { url: 'http://h/mcp' } }])).toThrow(
      /exactly one of stdio or http/,
    );
    expect(bad([{ name: 'bad name', stdio: { command: 'a' } }])).toThrow(/letters, digits/);
    expect(bad([{ name: 'x', http: { url: 'ftp://h/mcp' } }])).toThrow(ConfigError);
    expect(bad([{ name: 'x', stdio: { command: 'a' }, approval: 'sometimes' }])).toThrow(ConfigError);
    expect(bad([{ name: 'x', stdio: { command: 'a' }, onUnavailable: 'retry' }])).toThrow(ConfigError);
    expect(
      bad([
        { name: 'x', stdio: { command: 'a' } },
        { name: 'x', stdio: { command: 'b' } },
      ]),
    ).toThrow(/two MCP servers are named x/);
    expect(bad([{ name: 'x', stdio: { command: 'a' }, extra: true }])).toThrow(ConfigError);
    expect(bad([{ name: 'x', stdio: { command: 'a' }, tools: { maxPages: 0 } }])).toThrow(/maxPages/);
    expect(bad([{ name: 'x', stdio: { command: 'a' }, tools: { maxTools: 1.5 } }])).toThrow(/maxTools/);
    expect(bad([{ name: 'x', stdio: { command: 'a' }, tools: { maxPages: 10_001 } }])).toThrow(/maxPages/);
  });

  it('mcpServer() and parseMcpServers() validate for the library', () => {
    expect(mcpServer({ name: 'x', stdio: { command: 'node' } })).toEqual({ name: 'x', stdio: { command: 'node' } });
    expect(mcpServer({ name: 'x', stdio: { command: 'node' }, tools: { maxPages: 5, maxTools: 50 } }).tools).toEqual({
      maxPages: 5,
      maxTools: 50,
    });
    expect(() => mcpServer({ name: 'x' } as never)).toThrow(McpConfigError);
    expect(() => parseMcpServers([{ name: 'x', http: { url: 'not a url' } }], 'a')).toThrow(/agent a: mcpServers/);
  });
});
