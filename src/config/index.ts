export * from './models.ts';
export * from './load.ts';
export * from './demo.ts';
