export * from './agent.ts';
export * from './events.ts';
export * from './hooks.ts';
export * from './ids.ts';
export * from './inbox.ts';
export * from './sink.ts';
export * from './tools.ts';
export * from './turn.ts';
