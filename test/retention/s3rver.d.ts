/** The little of s3rver (a local S3 server, tests only) the tests use: it ships no types. */
declare module 's3rver' {
  interface S3rverOptions {
    port?: number;
    address?: string;
    silent?: boolean;
    directory: string;
  }
  export default class S3rver {
    constructor(options: S3rverOptions);
    run(): Promise<{ port: number; address: string }>;
    close(): Promise<void>;
  }
}
