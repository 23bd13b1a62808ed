export * from './messages.ts';
export * from './provider-prompt.ts';
export * from './usage.ts';
export * from './errors.ts';
export * from './retry.ts';
export * from './call.ts';
export * from './scripted.ts';
