import { addUsage, emptyUsage, type Usage } from '../../model/index.ts';
import type { Projection } from './projection.ts';

export interface StatsState {
  events: number;
  /** The highest turn number seen: the next turn is this + 1. */
  lastTurn: number;
  turns: number;
  steps: number;
  modelCalls: number;
  retries: number;
  modelErrors: number;
  toolCalls: number;
  toolErrors: number;
  compactions: number;
  usage: Usage;
  /** US dollars, model calls and summaries included. */
  cost: number;
  turnEnds: Record<string, number>;
}

export const statsProjection: Projection<StatsState> = {
  name: 'stats',
  version: 1,
  scope: 'log',
  init: () => ({
    events: 0,
    lastTurn: 0,
    turns: 0,
    steps: 0,
    modelCalls: 0,
    retries: 0,
    modelErrors: 0,
    toolCalls: 0,
    toolErrors: 0,
    compactions: 0,
    usage: emptyUsage(),
    cost: 0,
    turnEnds: {},
  }),
  apply(s, e) {
    s.events++;
    if (e.turn !== undefined && e.turn > s.lastTurn) s.lastTurn = e.turn;
    switch (e.type) {
      case 'turn/start':
        if (!e.data.resumed) s.turns++;
        break;
      case 'step/start':
        s.steps++;
        break;
      case 'request/header':
        s.modelCalls++;
        break;
      case 'model/retry':
        s.retries++;
        break;
      case 'model/error':
        s.modelErrors++;
        break;
      case 'assistant/message':
        s.usage = addUsage(s.usage, e.data.usage);
        s.cost += e.data.cost;
        break;
      case 'tool/call':
        s.toolCalls++;
        break;
      case 'tool/result':
        if (e.data.output.type === 'error') s.toolErrors++;
        break;
      case 'compaction':
      case 'branch/summary':
        if (e.type === 'compaction') s.compactions++;
        s.usage = addUsage(s.usage, e.data.usage);
        s.cost += e.data.cost;
        break;
      case 'turn/end':
        s.turnEnds[e.data.reason] = (s.turnEnds[e.data.reason] ?? 0) + 1;
        break;
      default:
        break;
    }
    return s;
  },
};
