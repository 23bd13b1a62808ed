/** Archive stores: where retention moves old sessions (docs/operations.md). */
export * from './archive-store.ts';
export * from './directory-archive-store.ts';
export * from './s3-archive-store.ts';
