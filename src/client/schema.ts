/**
 * The types of Keel's HTTP API, generated from its OpenAPI document (`/openapi.json`) by
 * openapi-typescript. Do not edit: after a change to a route, run `npm run client:types`
 * (test/client/types.test.ts fails while this file and the served document disagree).
 */
export interface paths {
  '/v1/sessions': {
    parameters: {
      query?: never;
      header?: never;
      path?: never;
      cookie?: never;
    };
    /** List sessions (cursor pagination) */
    get: {
      parameters: {
        query?: {
          /** @description The `next_cursor` of the previous page */
          cursor?: string;
          /** @description Deprecated: the older name of `cursor` */
          after?: string;
          limit?: number;
          include_archived?: 'true' | 'false';
        };
        header?: never;
        path?: never;
        cookie?: never;
      };
      requestBody?: never;
      responses: {
        /** @description A page of sessions */
        200: {
          headers: {
            [name: string]: unknown;
          };
          content: {
            'application/json': {
              data: components['schemas']['Session'][];
              next_cursor: string | null;
            };
          };
        };
        /** @description Invalid request */
        400: {
          headers: {
            [name: string]: unknown;
          };
          content: {
            'application/problem+json': components['schemas']['Problem'];
          };
        };
        /** @description Missing or invalid API key */
        401: {
          headers: {
            [name: string]: unknown;
          };
          content: {
            'application/problem+json': components['schemas']['Problem'];
          };
        };
        /** @description No such session (or not yours) */
        404: {
          headers: {
            [name: string]: unknown;
          };
          content: {
            'application/problem+json': components['schemas']['Problem'];
          };
        };
        /** @description The database cannot be reached right now (`store_unavailable`): try again after `Retry-After` */
        503: {
          headers: {
            [name: string]: unknown;
          };
          content: {
            'application/problem+json': components['schemas']['Problem'];
          };
        };
      };
    };
    put?: never;
    /** Create a session */
    post: {
      parameters: {
        query?: never;
        header?: never;
        path?: never;
        cookie?: never;
      };
      requestBody: {
        content: {
          'application/json': {
            agent?: string;
            title?: string;
            metadata?: {
              [key: string]: unknown;
            };
          };
        };
      };
      responses: {
        /** @description The new session */
        201: {
          headers: {
            [name: string]: unknown;
          };
          content: {
            'application/json': components['schemas']['Session'];
          };
        };
        /** @description Invalid request */
        400: {
          headers: {
            [name: string]: unknown;
          };
          content: {
            'application/problem+json': components['schemas']['Problem'];
          };
        };
        /** @description Missing or invalid API key */
        401: {
          headers: {
            [name: string]: unknown;
          };
          content: {
            'application/problem+json': components['schemas']['Problem'];
          };
        };
        /** @description No such session (or not yours) */
        404: {
          headers: {
            [name: string]: unknown;
          };
          content: {
            'application/problem+json': components['schemas']['Problem'];
          };
        };
        /** @description The database cannot be reached right now (`store_unavailable`): try again after `Retry-After` */
        503: {
          headers: {
            [name: string]: unknown;
          };
          content: {
            'application/problem+json': components['schemas']['Problem'];
          };
        };
      };
    };
    delete?: never;
    options?: never;
    head?: never;
    patch?: never;
    trace?: never;
  };
  '/v1/sessions/{id}': {
    parameters: {
      query?: never;
      header?: never;
      path?: never;
      cookie?: never;
    };
    /** Get a session */
    get: {
      parameters: {
        query?: never;
        header?: never;
        path: {
          id: string;
        };
        cookie?: never;
      };
      requestBody?: never;
      responses: {
        /** @description The session */
        200: {
          headers: {
            [name: string]: unknown;
          };
          content: {
            'application/json': components['schemas']['Session'];
          };
        };
        /** @description Invalid request */
        400: {
          headers: {
            [name: string]: unknown;
          };
          content: {
            'application/problem+json': components['schemas']['Problem'];
          };
        };
        /** @description Missing or invalid API key */
        401: {
          headers: {
            [name: string]: unknown;
          };
          content: {
            'application/problem+json': components['schemas']['Problem'];
          };
        };
        /** @description No such session (or not yours) */
        404: {
          headers: {
            [name: string]: unknown;
          };
          content: {
            'application/problem+json': components['schemas']['Problem'];
          };
        };
        /** @description The database cannot be reached right now (`store_unavailable`): try again after `Retry-After` */
        503: {
          headers: {
            [name: string]: unknown;
          };
          content: {
            'application/problem+json': components['schemas']['Problem'];
          };
        };
      };
    };
    put?: never;
    post?: never;
    /** Archive a session (its log stays readable) */
    delete: {
      parameters: {
        query?: never;
        header?: never;
        path: {
          id: string;
        };
        cookie?: never;
      };
      requestBody?: never;
      responses: {
        /** @description The archived session */
        200: {
          headers: {
            [name: string]: unknown;
          };
          content: {
            'application/json': components['schemas']['Session'];
          };
        };
        /** @description Invalid request */
        400: {
          headers: {
            [name: string]: unknown;
          };
          content: {
            'application/problem+json': components['schemas']['Problem'];
          };
        };
        /** @description Missing or invalid API key */
        401: {
          headers: {
            [name: string]: unknown;
          };
          content: {
            'application/problem+json': components['schemas']['Problem'];
          };
        };
        /** @description No such session (or not yours) */
        404: {
          headers: {
            [name: string]: unknown;
          };
          content: {
            'application/problem+json': components['schemas']['Problem'];
          };
        };
        /** @description The database cannot be reached right now (`store_unavailable`): try again after `Retry-After` */
        503: {
          headers: {
            [name: string]: unknown;
          };
          content: {
            'application/problem+json': components['schemas']['Problem'];
          };
        };
      };
    };
    options?: never;
    head?: never;
    patch?: never;
    trace?: never;
  };
  '/v1/sessions/{id}/erase': {
    parameters: {
      query?: never;
      header?: never;
      path?: never;
      cookie?: never;
    };
    get?: never;
    put?: never;
    /** Erase a session: its runs are cancelled, its log, content and run payloads removed; a tombstone with its totals remains (410 Gone from then on) */
    post: {
      parameters: {
        query?: never;
        header?: never;
        path: {
          id: string;
        };
        cookie?: never;
      };
      requestBody?: never;
      responses: {
        /** @description The tombstone */
        200: {
          headers: {
            [name: string]: unknown;
          };
          content: {
            'application/json': components['schemas']['Tombstone'];
          };
        };
        /** @description Invalid request */
        400: {
          headers: {
            [name: string]: unknown;
          };
          content: {
            'application/problem+json': components['schemas']['Problem'];
          };
        };
        /** @description Missing or invalid API key */
        401: {
          headers: {
            [name: string]: unknown;
          };
          content: {
            'application/problem+json': components['schemas']['Problem'];
          };
        };
        /** @description No such session (or not yours) */
        404: {
          headers: {
            [name: string]: unknown;
          };
          content: {
            'application/problem+json': components['schemas']['Problem'];
          };
        };
        /** @description The database cannot be reached right now (`store_unavailable`): try again after `Retry-After` */
        503: {
          headers: {
            [name: string]: unknown;
          };
          content: {
            'application/problem+json': components['schemas']['Problem'];
          };
        };
      };
    };
    delete?: never;
    options?: never;
    head?: never;
    patch?: never;
    trace?: never;
  };
  '/v1/sessions/erase': {
    parameters: {
      query?: never;
      header?: never;
      path?: never;
      cookie?: never;
    };
    get?: never;
    put?: never;
    /** Erase every session of the caller's tenant (archived ones too) */
    post: {
      parameters: {
        query?: never;
        header?: never;
        path?: never;
        cookie?: never;
      };
      requestBody: {
        content: {
          'application/json': {
            /** @description The tenant's name: what is erased cannot be brought back */
            confirm: string;
          };
        };
      };
      responses: {
        /** @description How many sessions were erased */
        200: {
          headers: {
            [name: string]: unknown;
          };
          content: {
            'application/json': {
              tenant: string;
              erased: number;
            };
          };
        };
        /** @description Invalid request */
        400: {
          headers: {
            [name: string]: unknown;
          };
          content: {
            'application/problem+json': components['schemas']['Problem'];
          };
        };
        /** @description Missing or invalid API key */
        401: {
          headers: {
            [name: string]: unknown;
          };
          content: {
            'application/problem+json': components['schemas']['Problem'];
          };
        };
        /** @description No such session (or not yours) */
        404: {
          headers: {
            [name: string]: unknown;
          };
          content: {
            'application/problem+json': components['schemas']['Problem'];
          };
        };
        /** @description The database cannot be reached right now (`store_unavailable`): try again after `Retry-After` */
        503: {
          headers: {
            [name: string]: unknown;
          };
          content: {
            'application/problem+json': components['schemas']['Problem'];
          };
        };
      };
    };
    delete?: never;
    options?: never;
    head?: never;
    patch?: never;
    trace?: never;
  };
  '/v1/sessions/{id}/messages': {
    parameters: {
      query?: never;
      header?: never;
      path?: never;
      cookie?: never;
    };
    get?: never;
    put?: never;
    /** Send a user message: creates a run, or follows if_busy when one is active */
    post: {
      parameters: {
        query?: never;
        header?: never;
        path: {
          id: string;
        };
        cookie?: never;
      };
      requestBody: {
        content: {
          'application/json': {
            content: components['schemas']['Content'];
            /**
             * @default reject
             * @enum {string}
             */
            if_busy?: 'reject' | 'enqueue' | 'steer' | 'interrupt';
            agent?: string;
            timeout_ms?: number;
            wait_timeout_ms?: number;
            /** @description Tools the client executes itself: a call of one waits for its output (POST /v1/runs/{id}/tool-results) */
            client_tools?: components['schemas']['ClientTool'][];
          };
        };
      };
      responses: {
        /** @description Accepted */
        202: {
          headers: {
            [name: string]: unknown;
          };
          content: {
            'application/json': {
              /** @enum {string} */
              outcome: 'created' | 'enqueued' | 'steered';
              message: {
                id: string;
              };
              run: components['schemas']['Run'];
            };
          };
        };
        /** @description Invalid request */
        400: {
          headers: {
            [name: string]: unknown;
          };
          content: {
            'application/problem+json': components['schemas']['Problem'];
          };
        };
        /** @description Missing or invalid API key */
        401: {
          headers: {
            [name: string]: unknown;
          };
          content: {
            'application/problem+json': components['schemas']['Problem'];
          };
        };
        /** @description No such session (or not yours) */
        404: {
          headers: {
            [name: string]: unknown;
          };
          content: {
            'application/problem+json': components['schemas']['Problem'];
          };
        };
        /** @description The session has an active run (if_busy: reject) */
        409: {
          headers: {
            [name: string]: unknown;
          };
          content: {
            'application/problem+json': components['schemas']['Problem'];
          };
        };
        /** @description Over the tenant's (or API key's) runs per minute (quota_exceeded, with Retry-After), or the key's request rate */
        429: {
          headers: {
            [name: string]: unknown;
          };
          content: {
            'application/problem+json': components['schemas']['Problem'];
          };
        };
        /** @description The database cannot be reached right now (`store_unavailable`): try again after `Retry-After` */
        503: {
          headers: {
            [name: string]: unknown;
          };
          content: {
            'application/problem+json': components['schemas']['Problem'];
          };
        };
      };
    };
    delete?: never;
    options?: never;
    head?: never;
    patch?: never;
    trace?: never;
  };
  '/v1/sessions/{id}/events': {
    parameters: {
      query?: never;
      header?: never;
      path?: never;
      cookie?: never;
    };
    /** Events after a seq, in order */
    get: {
      parameters: {
        query?: {
          /** @description The `next_cursor` of the previous page: the seq the page ended at */
          cursor?: string;
          /** @description The seq to read after (the same as `cursor`) */
          after?: number | null;
          limit?: number;
        };
        header?: never;
        path: {
          id: string;
        };
        cookie?: never;
      };
      requestBody?: never;
      responses: {
        /** @description A page of events */
        200: {
          headers: {
            [name: string]: unknown;
          };
          content: {
            'application/json': {
              data: components['schemas']['Event'][];
              next_cursor: string | null;
              /** @description Deprecated: `next_cursor` as a number */
              next_after: number | null;
            };
          };
        };
        /** @description Invalid request */
        400: {
          headers: {
            [name: string]: unknown;
          };
          content: {
            'application/problem+json': components['schemas']['Problem'];
          };
        };
        /** @description Missing or invalid API key */
        401: {
          headers: {
            [name: string]: unknown;
          };
          content: {
            'application/problem+json': components['schemas']['Problem'];
          };
        };
        /** @description No such session (or not yours) */
        404: {
          headers: {
            [name: string]: unknown;
          };
          content: {
            'application/problem+json': components['schemas']['Problem'];
          };
        };
        /** @description The database cannot be reached right now (`store_unavailable`): try again after `Retry-After` */
        503: {
          headers: {
            [name: string]: unknown;
          };
          content: {
            'application/problem+json': components['schemas']['Problem'];
          };
        };
      };
    };
    put?: never;
    post?: never;
    delete?: never;
    options?: never;
    head?: never;
    patch?: never;
    trace?: never;
  };
  '/v1/sessions/{id}/transcript': {
    parameters: {
      query?: never;
      header?: never;
      path?: never;
      cookie?: never;
    };
    /** The transcript for people */
    get: {
      parameters: {
        query?: never;
        header?: never;
        path: {
          id: string;
        };
        cookie?: never;
      };
      requestBody?: never;
      responses: {
        /** @description Transcript */
        200: {
          headers: {
            [name: string]: unknown;
          };
          content: {
            'application/json': {
              items: {
                [key: string]: unknown;
              }[];
            };
          };
        };
        /** @description Invalid request */
        400: {
          headers: {
            [name: string]: unknown;
          };
          content: {
            'application/problem+json': components['schemas']['Problem'];
          };
        };
        /** @description Missing or invalid API key */
        401: {
          headers: {
            [name: string]: unknown;
          };
          content: {
            'application/problem+json': components['schemas']['Problem'];
          };
        };
        /** @description No such session (or not yours) */
        404: {
          headers: {
            [name: string]: unknown;
          };
          content: {
            'application/problem+json': components['schemas']['Problem'];
          };
        };
        /** @description The database cannot be reached right now (`store_unavailable`): try again after `Retry-After` */
        503: {
          headers: {
            [name: string]: unknown;
          };
          content: {
            'application/problem+json': components['schemas']['Problem'];
          };
        };
      };
    };
    put?: never;
    post?: never;
    delete?: never;
    options?: never;
    head?: never;
    patch?: never;
    trace?: never;
  };
  '/v1/sessions/{id}/context': {
    parameters: {
      query?: never;
      header?: never;
      path?: never;
      cookie?: never;
    };
    /** The model context of the next request */
    get: {
      parameters: {
        query?: {
          budget_tokens?: number;
        };
        header?: never;
        path: {
          id: string;
        };
        cookie?: never;
      };
      requestBody?: never;
      responses: {
        /** @description Context */
        200: {
          headers: {
            [name: string]: unknown;
          };
          content: {
            'application/json': {
              [key: string]: unknown;
            };
          };
        };
        /** @description Invalid request */
        400: {
          headers: {
            [name: string]: unknown;
          };
          content: {
            'application/problem+json': components['schemas']['Problem'];
          };
        };
        /** @description Missing or invalid API key */
        401: {
          headers: {
            [name: string]: unknown;
          };
          content: {
            'application/problem+json': components['schemas']['Problem'];
          };
        };
        /** @description No such session (or not yours) */
        404: {
          headers: {
            [name: string]: unknown;
          };
          content: {
            'application/problem+json': components['schemas']['Problem'];
          };
        };
        /** @description The database cannot be reached right now (`store_unavailable`): try again after `Retry-After` */
        503: {
          headers: {
            [name: string]: unknown;
          };
          content: {
            'application/problem+json': components['schemas']['Problem'];
          };
        };
      };
    };
    put?: never;
    post?: never;
    delete?: never;
    options?: never;
    head?: never;
    patch?: never;
    trace?: never;
  };
  '/v1/sessions/{id}/runs': {
    parameters: {
      query?: never;
      header?: never;
      path?: never;
      cookie?: never;
    };
    /** Runs of a session, oldest first */
    get: {
      parameters: {
        query?: {
          /** @description The `next_cursor` of the previous page */
          cursor?: string;
          /** @description Deprecated: the older name of `cursor` */
          after?: string;
          limit?: number;
        };
        header?: never;
        path: {
          id: string;
        };
        cookie?: never;
      };
      requestBody?: never;
      responses: {
        /** @description A page of runs */
        200: {
          headers: {
            [name: string]: unknown;
          };
          content: {
            'application/json': {
              data: components['schemas']['Run'][];
              next_cursor: string | null;
            };
          };
        };
        /** @description Invalid request */
        400: {
          headers: {
            [name: string]: unknown;
          };
          content: {
            'application/problem+json': components['schemas']['Problem'];
          };
        };
        /** @description Missing or invalid API key */
        401: {
          headers: {
            [name: string]: unknown;
          };
          content: {
            'application/problem+json': components['schemas']['Problem'];
          };
        };
        /** @description No such session (or not yours) */
        404: {
          headers: {
            [name: string]: unknown;
          };
          content: {
            'application/problem+json': components['schemas']['Problem'];
          };
        };
        /** @description The database cannot be reached right now (`store_unavailable`): try again after `Retry-After` */
        503: {
          headers: {
            [name: string]: unknown;
          };
          content: {
            'application/problem+json': components['schemas']['Problem'];
          };
        };
      };
    };
    put?: never;
    post?: never;
    delete?: never;
    options?: never;
    head?: never;
    patch?: never;
    trace?: never;
  };
  '/v1/sessions/{id}/fork': {
    parameters: {
      query?: never;
      header?: never;
      path?: never;
      cookie?: never;
    };
    get?: never;
    put?: never;
    /** Fork at an entry: a new branch here, or a new session */
    post: {
      parameters: {
        query?: never;
        header?: never;
        path: {
          id: string;
        };
        cookie?: never;
      };
      requestBody: {
        content: {
          'application/json': {
            entry_id: string;
            /** @enum {string} */
            into: 'branch' | 'session';
            /** @description A summary of the abandoned path (branch only) */
            summary?: string;
            title?: string;
          };
        };
      };
      responses: {
        /** @description Forked */
        201: {
          headers: {
            [name: string]: unknown;
          };
          content: {
            'application/json': {
              session_id: string;
              leaf_id: string;
            };
          };
        };
        /** @description Invalid request */
        400: {
          headers: {
            [name: string]: unknown;
          };
          content: {
            'application/problem+json': components['schemas']['Problem'];
          };
        };
        /** @description Missing or invalid API key */
        401: {
          headers: {
            [name: string]: unknown;
          };
          content: {
            'application/problem+json': components['schemas']['Problem'];
          };
        };
        /** @description No such session (or not yours) */
        404: {
          headers: {
            [name: string]: unknown;
          };
          content: {
            'application/problem+json': components['schemas']['Problem'];
          };
        };
        /** @description The database cannot be reached right now (`store_unavailable`): try again after `Retry-After` */
        503: {
          headers: {
            [name: string]: unknown;
          };
          content: {
            'application/problem+json': components['schemas']['Problem'];
          };
        };
      };
    };
    delete?: never;
    options?: never;
    head?: never;
    patch?: never;
    trace?: never;
  };
  '/v1/sessions/{id}/leaf': {
    parameters: {
      query?: never;
      header?: never;
      path?: never;
      cookie?: never;
    };
    get?: never;
    put?: never;
    /** Switch the current branch: move the leaf to an entry */
    post: {
      parameters: {
        query?: never;
        header?: never;
        path: {
          id: string;
        };
        cookie?: never;
      };
      requestBody: {
        content: {
          'application/json': {
            entry_id: string | null;
          };
        };
      };
      responses: {
        /** @description Moved */
        200: {
          headers: {
            [name: string]: unknown;
          };
          content: {
            'application/json': {
              leaf_id: string | null;
              seq: number;
            };
          };
        };
        /** @description Invalid request */
        400: {
          headers: {
            [name: string]: unknown;
          };
          content: {
            'application/problem+json': components['schemas']['Problem'];
          };
        };
        /** @description Missing or invalid API key */
        401: {
          headers: {
            [name: string]: unknown;
          };
          content: {
            'application/problem+json': components['schemas']['Problem'];
          };
        };
        /** @description No such session (or not yours) */
        404: {
          headers: {
            [name: string]: unknown;
          };
          content: {
            'application/problem+json': components['schemas']['Problem'];
          };
        };
        /** @description The database cannot be reached right now (`store_unavailable`): try again after `Retry-After` */
        503: {
          headers: {
            [name: string]: unknown;
          };
          content: {
            'application/problem+json': components['schemas']['Problem'];
          };
        };
      };
    };
    delete?: never;
    options?: never;
    head?: never;
    patch?: never;
    trace?: never;
  };
  '/v1/sessions/{id}/compact': {
    parameters: {
      query?: never;
      header?: never;
      path?: never;
      cookie?: never;
    };
    get?: never;
    put?: never;
    /** Compact the session's context now (summarized by the session's agent model) */
    post: {
      parameters: {
        query?: never;
        header?: never;
        path: {
          id: string;
        };
        cookie?: never;
      };
      requestBody?: {
        content: {
          'application/json': {
            keep_recent_tokens?: number;
          };
        };
      };
      responses: {
        /** @description The outcome */
        200: {
          headers: {
            [name: string]: unknown;
          };
          content: {
            'application/json': {
              [key: string]: unknown;
            };
          };
        };
        /** @description Invalid request */
        400: {
          headers: {
            [name: string]: unknown;
          };
          content: {
            'application/problem+json': components['schemas']['Problem'];
          };
        };
        /** @description Missing or invalid API key */
        401: {
          headers: {
            [name: string]: unknown;
          };
          content: {
            'application/problem+json': components['schemas']['Problem'];
          };
        };
        /** @description No such session (or not yours) */
        404: {
          headers: {
            [name: string]: unknown;
          };
          content: {
            'application/problem+json': components['schemas']['Problem'];
          };
        };
        /** @description The database cannot be reached right now (`store_unavailable`): try again after `Retry-After` */
        503: {
          headers: {
            [name: string]: unknown;
          };
          content: {
            'application/problem+json': components['schemas']['Problem'];
          };
        };
      };
    };
    delete?: never;
    options?: never;
    head?: never;
    patch?: never;
    trace?: never;
  };
  '/v1/sessions/{id}/export': {
    parameters: {
      query?: never;
      header?: never;
      path?: never;
      cookie?: never;
    };
    /** Export the session as versioned JSONL */
    get: {
      parameters: {
        query?: never;
        header?: never;
        path: {
          id: string;
        };
        cookie?: never;
      };
      requestBody?: never;
      responses: {
        /** @description JSONL, one record a line */
        200: {
          headers: {
            [name: string]: unknown;
          };
          content: {
            'application/x-ndjson': string;
          };
        };
        /** @description Invalid request */
        400: {
          headers: {
            [name: string]: unknown;
          };
          content: {
            'application/problem+json': components['schemas']['Problem'];
          };
        };
        /** @description Missing or invalid API key */
        401: {
          headers: {
            [name: string]: unknown;
          };
          content: {
            'application/problem+json': components['schemas']['Problem'];
          };
        };
        /** @description No such session (or not yours) */
        404: {
          headers: {
            [name: string]: unknown;
          };
          content: {
            'application/problem+json': components['schemas']['Problem'];
          };
        };
        /** @description The database cannot be reached right now (`store_unavailable`): try again after `Retry-After` */
        503: {
          headers: {
            [name: string]: unknown;
          };
          content: {
            'application/problem+json': components['schemas']['Problem'];
          };
        };
      };
    };
    put?: never;
    post?: never;
    delete?: never;
    options?: never;
    head?: never;
    patch?: never;
    trace?: never;
  };
  '/v1/sessions/import': {
    parameters: {
      query?: never;
      header?: never;
      path?: never;
      cookie?: never;
    };
    get?: never;
    put?: never;
    /** Import a JSONL export (validated line by line; all or nothing), under new ids unless ids=keep */
    post: {
      parameters: {
        query?: {
          /** @description `new`: a new session with new event ids, its origin the session it came from (imports anywhere, also where it was exported); `keep`: the export's ids (409 when they exist here) */
          ids?: 'new' | 'keep';
        };
        header?: never;
        path?: never;
        cookie?: never;
      };
      requestBody: {
        content: {
          'application/x-ndjson': string;
        };
      };
      responses: {
        /** @description The imported session */
        201: {
          headers: {
            [name: string]: unknown;
          };
          content: {
            'application/json': components['schemas']['Session'];
          };
        };
        /** @description Invalid request */
        400: {
          headers: {
            [name: string]: unknown;
          };
          content: {
            'application/problem+json': components['schemas']['Problem'];
          };
        };
        /** @description Missing or invalid API key */
        401: {
          headers: {
            [name: string]: unknown;
          };
          content: {
            'application/problem+json': components['schemas']['Problem'];
          };
        };
        /** @description No such session (or not yours) */
        404: {
          headers: {
            [name: string]: unknown;
          };
          content: {
            'application/problem+json': components['schemas']['Problem'];
          };
        };
        /** @description Refused, with line-numbered problems */
        422: {
          headers: {
            [name: string]: unknown;
          };
          content: {
            'application/problem+json': components['schemas']['Problem'];
          };
        };
        /** @description The database cannot be reached right now (`store_unavailable`): try again after `Retry-After` */
        503: {
          headers: {
            [name: string]: unknown;
          };
          content: {
            'application/problem+json': components['schemas']['Problem'];
          };
        };
      };
    };
    delete?: never;
    options?: never;
    head?: never;
    patch?: never;
    trace?: never;
  };
  '/v1/blobs/{hash}': {
    parameters: {
      query?: never;
      header?: never;
      path?: never;
      cookie?: never;
    };
    /**
     * Content the log refers to by hash (a large tool result, an attachment), whole or a byte range
     * @description Served to a tenant one of whose sessions refers to it (another tenant’s answer blob_not_found). `Range: bytes=…` (one range) answers 206 with Content-Range; a range past the end answers 416. An attachment stored as base64 is served as its bytes.
     */
    get: {
      parameters: {
        query?: never;
        header?: {
          /** @description bytes=start-end, bytes=start- or bytes=-suffix */
          range?: string;
        };
        path: {
          hash: string;
        };
        cookie?: never;
      };
      requestBody?: never;
      responses: {
        /** @description The whole content, with its media type */
        200: {
          headers: {
            [name: string]: unknown;
          };
          content: {
            'application/octet-stream': string;
          };
        };
        /** @description The range asked for (Content-Range says which) */
        206: {
          headers: {
            [name: string]: unknown;
          };
          content: {
            'application/octet-stream': string;
          };
        };
        /** @description Not a blob hash */
        400: {
          headers: {
            [name: string]: unknown;
          };
          content: {
            'application/problem+json': components['schemas']['Problem'];
          };
        };
        /** @description Missing or invalid API key */
        401: {
          headers: {
            [name: string]: unknown;
          };
          content: {
            'application/problem+json': components['schemas']['Problem'];
          };
        };
        /** @description No such blob referred to by a session of this tenant (blob_not_found) */
        404: {
          headers: {
            [name: string]: unknown;
          };
          content: {
            'application/problem+json': components['schemas']['Problem'];
          };
        };
        /** @description The range starts past the end (range_not_satisfiable) */
        416: {
          headers: {
            [name: string]: unknown;
          };
          content: {
            'application/problem+json': components['schemas']['Problem'];
          };
        };
      };
    };
    put?: never;
    post?: never;
    delete?: never;
    options?: never;
    head?: never;
    patch?: never;
    trace?: never;
  };
  '/v1/erasures': {
    parameters: {
      query?: never;
      header?: never;
      path?: never;
      cookie?: never;
    };
    /** The erasure audit, newest first (an operator) */
    get: {
      parameters: {
        query?: {
          /** @description An erasure id: the page after it */
          before?: string;
          limit?: number;
        };
        header?: never;
        path?: never;
        cookie?: never;
      };
      requestBody?: never;
      responses: {
        /** @description The audit */
        200: {
          headers: {
            [name: string]: unknown;
          };
          content: {
            'application/json': {
              erasures: components['schemas']['Erasure'][];
            };
          };
        };
        /** @description Invalid request */
        400: {
          headers: {
            [name: string]: unknown;
          };
          content: {
            'application/problem+json': components['schemas']['Problem'];
          };
        };
        /** @description Missing or invalid API key */
        401: {
          headers: {
            [name: string]: unknown;
          };
          content: {
            'application/problem+json': components['schemas']['Problem'];
          };
        };
        /** @description Only an operator may do that */
        403: {
          headers: {
            [name: string]: unknown;
          };
          content: {
            'application/problem+json': components['schemas']['Problem'];
          };
        };
        /** @description No such session (or not yours) */
        404: {
          headers: {
            [name: string]: unknown;
          };
          content: {
            'application/problem+json': components['schemas']['Problem'];
          };
        };
        /** @description The database cannot be reached right now (`store_unavailable`): try again after `Retry-After` */
        503: {
          headers: {
            [name: string]: unknown;
          };
          content: {
            'application/problem+json': components['schemas']['Problem'];
          };
        };
      };
    };
    put?: never;
    /** Erase a session (a tenant key: its own), a tenant or every session idle since before a date (an operator): from the log, every table and every erasure participant; an audit record remains */
    post: {
      parameters: {
        query?: never;
        header?: never;
        path?: never;
        cookie?: never;
      };
      requestBody: {
        content: {
          'application/json': components['schemas']['EraseRequest'];
        };
      };
      responses: {
        /** @description What was erased, and its audit record */
        200: {
          headers: {
            [name: string]: unknown;
          };
          content: {
            'application/json': components['schemas']['ErasureResult'];
          };
        };
        /** @description Invalid request */
        400: {
          headers: {
            [name: string]: unknown;
          };
          content: {
            'application/problem+json': components['schemas']['Problem'];
          };
        };
        /** @description Missing or invalid API key */
        401: {
          headers: {
            [name: string]: unknown;
          };
          content: {
            'application/problem+json': components['schemas']['Problem'];
          };
        };
        /** @description Only an operator may do that */
        403: {
          headers: {
            [name: string]: unknown;
          };
          content: {
            'application/problem+json': components['schemas']['Problem'];
          };
        };
        /** @description No such session (or not yours) */
        404: {
          headers: {
            [name: string]: unknown;
          };
          content: {
            'application/problem+json': components['schemas']['Problem'];
          };
        };
        /** @description The database cannot be reached right now (`store_unavailable`): try again after `Retry-After` */
        503: {
          headers: {
            [name: string]: unknown;
          };
          content: {
            'application/problem+json': components['schemas']['Problem'];
          };
        };
      };
    };
    delete?: never;
    options?: never;
    head?: never;
    patch?: never;
    trace?: never;
  };
  '/v1/erasures/verify': {
    parameters: {
      query?: never;
      header?: never;
      path?: never;
      cookie?: never;
    };
    get?: never;
    put?: never;
    /** Scan every table of the store (from its catalog, the log decompressed) and every erasure participant for ids and strings (an operator) */
    post: {
      parameters: {
        query?: never;
        header?: never;
        path?: never;
        cookie?: never;
      };
      requestBody: {
        content: {
          'application/json': components['schemas']['VerifyRequest'];
        };
      };
      responses: {
        /** @description What the scan found */
        200: {
          headers: {
            [name: string]: unknown;
          };
          content: {
            'application/json': {
              /** @description No remnant: every place found is one an erasure keeps by design */
              clean: boolean;
              /** @description What was searched for: the ids and strings, and erased sessions' run ids */
              needles: string[];
              remnants: components['schemas']['ErasureFinding'][];
              kept: components['schemas']['ErasureFinding'][];
              participants: string[];
            };
          };
        };
        /** @description Invalid request */
        400: {
          headers: {
            [name: string]: unknown;
          };
          content: {
            'application/problem+json': components['schemas']['Problem'];
          };
        };
        /** @description Missing or invalid API key */
        401: {
          headers: {
            [name: string]: unknown;
          };
          content: {
            'application/problem+json': components['schemas']['Problem'];
          };
        };
        /** @description Only an operator may do that */
        403: {
          headers: {
            [name: string]: unknown;
          };
          content: {
            'application/problem+json': components['schemas']['Problem'];
          };
        };
        /** @description No such session (or not yours) */
        404: {
          headers: {
            [name: string]: unknown;
          };
          content: {
            'application/problem+json': components['schemas']['Problem'];
          };
        };
        /** @description The database cannot be reached right now (`store_unavailable`): try again after `Retry-After` */
        503: {
          headers: {
            [name: string]: unknown;
          };
          content: {
            'application/problem+json': components['schemas']['Problem'];
          };
        };
      };
    };
    delete?: never;
    options?: never;
    head?: never;
    patch?: never;
    trace?: never;
  };
  '/v1/usage': {
    parameters: {
      query?: never;
      header?: never;
      path?: never;
      cookie?: never;
    };
    /**
     * Tokens and cost by tenant, agent, model and day or hour: each run’s own usage once, by the time it ended
     * @description Runs that ended in [from, to). A run counts its own usage (a parent's recorded usage includes its subagents', which count as their own runs); runs of erased sessions count; runs not ended yet are left out. At most 366 days, 31 grouped by hour.
     */
    get: {
      parameters: {
        query?: {
          /** @description Runs that ended at or after this (default: 30 days before to): a date (2025-01-31, UTC) or an ISO 8601 timestamp with an offset (2025-01-31T12:00:00Z) */
          from?: string;
          /** @description Runs that ended before this (default: now); a date includes that day: a date (2025-01-31, UTC) or an ISO 8601 timestamp with an offset (2025-01-31T12:00:00Z) */
          to?: string;
          /** @description Comma-separated: tenant, agent, model, and day or hour (default: day; empty: the totals only) */
          group_by?: string;
          /** @description Only this tenant: an API key sees only its own */
          tenant?: string;
          /** @description Only this agent (by name) */
          agent?: string;
          /** @description Only this model (provider:modelId) */
          model?: string;
          /** @description csv: text/csv (also with Accept: text/csv) */
          format?: 'json' | 'csv';
        };
        header?: never;
        path?: never;
        cookie?: never;
      };
      requestBody?: never;
      responses: {
        /** @description The report */
        200: {
          headers: {
            [name: string]: unknown;
          };
          content: {
            'application/json': components['schemas']['UsageReport'];
            'text/csv': string;
          };
        };
        /** @description Invalid parameters (each one named in errors) */
        400: {
          headers: {
            [name: string]: unknown;
          };
          content: {
            'application/problem+json': components['schemas']['Problem'];
          };
        };
        /** @description Missing or invalid API key */
        401: {
          headers: {
            [name: string]: unknown;
          };
          content: {
            'application/problem+json': components['schemas']['Problem'];
          };
        };
        /** @description Another tenant’s usage */
        403: {
          headers: {
            [name: string]: unknown;
          };
          content: {
            'application/problem+json': components['schemas']['Problem'];
          };
        };
      };
    };
    put?: never;
    post?: never;
    delete?: never;
    options?: never;
    head?: never;
    patch?: never;
    trace?: never;
  };
  '/v1/tenants': {
    parameters: {
      query?: never;
      header?: never;
      path?: never;
      cookie?: never;
    };
    /** The tenants an operator set a weight or quotas for (admin scope) */
    get: {
      parameters: {
        query?: never;
        header?: never;
        path?: never;
        cookie?: never;
      };
      requestBody?: never;
      responses: {
        /** @description Every tenant with a row */
        200: {
          headers: {
            [name: string]: unknown;
          };
          content: {
            'application/json': {
              data: components['schemas']['Tenant'][];
            };
          };
        };
        /** @description Invalid request */
        400: {
          headers: {
            [name: string]: unknown;
          };
          content: {
            'application/problem+json': components['schemas']['Problem'];
          };
        };
        /** @description Missing or invalid API key */
        401: {
          headers: {
            [name: string]: unknown;
          };
          content: {
            'application/problem+json': components['schemas']['Problem'];
          };
        };
        /** @description The API key does not have the admin scope (`forbidden_scope`) */
        403: {
          headers: {
            [name: string]: unknown;
          };
          content: {
            'application/problem+json': components['schemas']['Problem'];
          };
        };
        /** @description No such tenant */
        404: {
          headers: {
            [name: string]: unknown;
          };
          content: {
            'application/problem+json': components['schemas']['Problem'];
          };
        };
      };
    };
    put?: never;
    post?: never;
    delete?: never;
    options?: never;
    head?: never;
    patch?: never;
    trace?: never;
  };
  '/v1/tenants/{id}': {
    parameters: {
      query?: never;
      header?: never;
      path?: never;
      cookie?: never;
    };
    /** A tenant's weight and quotas (admin scope) */
    get: {
      parameters: {
        query?: never;
        header?: never;
        path: {
          id: string;
        };
        cookie?: never;
      };
      requestBody?: never;
      responses: {
        /** @description The tenant */
        200: {
          headers: {
            [name: string]: unknown;
          };
          content: {
            'application/json': components['schemas']['Tenant'];
          };
        };
        /** @description Invalid request */
        400: {
          headers: {
            [name: string]: unknown;
          };
          content: {
            'application/problem+json': components['schemas']['Problem'];
          };
        };
        /** @description Missing or invalid API key */
        401: {
          headers: {
            [name: string]: unknown;
          };
          content: {
            'application/problem+json': components['schemas']['Problem'];
          };
        };
        /** @description The API key does not have the admin scope (`forbidden_scope`) */
        403: {
          headers: {
            [name: string]: unknown;
          };
          content: {
            'application/problem+json': components['schemas']['Problem'];
          };
        };
        /** @description No such tenant */
        404: {
          headers: {
            [name: string]: unknown;
          };
          content: {
            'application/problem+json': components['schemas']['Problem'];
          };
        };
      };
    };
    /** Creates or updates a tenant's row: what the body leaves out keeps its value (admin scope) */
    put: {
      parameters: {
        query?: never;
        header?: never;
        path: {
          id: string;
        };
        cookie?: never;
      };
      requestBody: {
        content: {
          'application/json': components['schemas']['TenantUpdate'];
        };
      };
      responses: {
        /** @description The tenant as stored */
        200: {
          headers: {
            [name: string]: unknown;
          };
          content: {
            'application/json': components['schemas']['Tenant'];
          };
        };
        /** @description Invalid request */
        400: {
          headers: {
            [name: string]: unknown;
          };
          content: {
            'application/problem+json': components['schemas']['Problem'];
          };
        };
        /** @description Missing or invalid API key */
        401: {
          headers: {
            [name: string]: unknown;
          };
          content: {
            'application/problem+json': components['schemas']['Problem'];
          };
        };
        /** @description The API key does not have the admin scope (`forbidden_scope`) */
        403: {
          headers: {
            [name: string]: unknown;
          };
          content: {
            'application/problem+json': components['schemas']['Problem'];
          };
        };
        /** @description No such tenant */
        404: {
          headers: {
            [name: string]: unknown;
          };
          content: {
            'application/problem+json': components['schemas']['Problem'];
          };
        };
      };
    };
    post?: never;
    /** Removes a tenant's row: it goes back to weight 1 and the defaults; its keys and sessions stay (admin scope) */
    delete: {
      parameters: {
        query?: never;
        header?: never;
        path: {
          id: string;
        };
        cookie?: never;
      };
      requestBody?: never;
      responses: {
        /** @description Removed */
        204: {
          headers: {
            [name: string]: unknown;
          };
          content?: never;
        };
        /** @description Invalid request */
        400: {
          headers: {
            [name: string]: unknown;
          };
          content: {
            'application/problem+json': components['schemas']['Problem'];
          };
        };
        /** @description Missing or invalid API key */
        401: {
          headers: {
            [name: string]: unknown;
          };
          content: {
            'application/problem+json': components['schemas']['Problem'];
          };
        };
        /** @description The API key does not have the admin scope (`forbidden_scope`) */
        403: {
          headers: {
            [name: string]: unknown;
          };
          content: {
            'application/problem+json': components['schemas']['Problem'];
          };
        };
        /** @description No such tenant */
        404: {
          headers: {
            [name: string]: unknown;
          };
          content: {
            'application/problem+json': components['schemas']['Problem'];
          };
        };
      };
    };
    options?: never;
    head?: never;
    patch?: never;
    trace?: never;
  };
  '/v1/tenants/{id}/keys': {
    parameters: {
      query?: never;
      header?: never;
      path?: never;
      cookie?: never;
    };
    /** A tenant's API keys, never their secrets (admin scope) */
    get: {
      parameters: {
        query?: never;
        header?: never;
        path: {
          id: string;
        };
        cookie?: never;
      };
      requestBody?: never;
      responses: {
        /** @description The keys */
        200: {
          headers: {
            [name: string]: unknown;
          };
          content: {
            'application/json': {
              data: components['schemas']['ApiKey'][];
            };
          };
        };
        /** @description Invalid request */
        400: {
          headers: {
            [name: string]: unknown;
          };
          content: {
            'application/problem+json': components['schemas']['Problem'];
          };
        };
        /** @description Missing or invalid API key */
        401: {
          headers: {
            [name: string]: unknown;
          };
          content: {
            'application/problem+json': components['schemas']['Problem'];
          };
        };
        /** @description The API key does not have the admin scope (`forbidden_scope`) */
        403: {
          headers: {
            [name: string]: unknown;
          };
          content: {
            'application/problem+json': components['schemas']['Problem'];
          };
        };
        /** @description No such tenant */
        404: {
          headers: {
            [name: string]: unknown;
          };
          content: {
            'application/problem+json': components['schemas']['Problem'];
          };
        };
      };
    };
    put?: never;
    /** A new API key of the tenant scope for the tenant: its secret is in this answer only (admin scope) */
    post: {
      parameters: {
        query?: never;
        header?: never;
        path: {
          id: string;
        };
        cookie?: never;
      };
      requestBody: {
        content: {
          'application/json': components['schemas']['ApiKeyRequest'];
        };
      };
      responses: {
        /** @description The key and its secret */
        201: {
          headers: {
            [name: string]: unknown;
          };
          content: {
            'application/json': components['schemas']['ApiKey'] & {
              secret: string;
            };
          };
        };
        /** @description Invalid request */
        400: {
          headers: {
            [name: string]: unknown;
          };
          content: {
            'application/problem+json': components['schemas']['Problem'];
          };
        };
        /** @description Missing or invalid API key */
        401: {
          headers: {
            [name: string]: unknown;
          };
          content: {
            'application/problem+json': components['schemas']['Problem'];
          };
        };
        /** @description The API key does not have the admin scope (`forbidden_scope`) */
        403: {
          headers: {
            [name: string]: unknown;
          };
          content: {
            'application/problem+json': components['schemas']['Problem'];
          };
        };
        /** @description No such tenant */
        404: {
          headers: {
            [name: string]: unknown;
          };
          content: {
            'application/problem+json': components['schemas']['Problem'];
          };
        };
      };
    };
    delete?: never;
    options?: never;
    head?: never;
    patch?: never;
    trace?: never;
  };
  '/v1/tenants/{id}/keys/{key_id}': {
    parameters: {
      query?: never;
      header?: never;
      path?: never;
      cookie?: never;
    };
    get?: never;
    put?: never;
    post?: never;
    /** Revokes one of the tenant's API keys (admin scope) */
    delete: {
      parameters: {
        query?: never;
        header?: never;
        path: {
          id: string;
          key_id: string;
        };
        cookie?: never;
      };
      requestBody?: never;
      responses: {
        /** @description Revoked */
        204: {
          headers: {
            [name: string]: unknown;
          };
          content?: never;
        };
        /** @description Invalid request */
        400: {
          headers: {
            [name: string]: unknown;
          };
          content: {
            'application/problem+json': components['schemas']['Problem'];
          };
        };
        /** @description Missing or invalid API key */
        401: {
          headers: {
            [name: string]: unknown;
          };
          content: {
            'application/problem+json': components['schemas']['Problem'];
          };
        };
        /** @description The API key does not have the admin scope (`forbidden_scope`) */
        403: {
          headers: {
            [name: string]: unknown;
          };
          content: {
            'application/problem+json': components['schemas']['Problem'];
          };
        };
        /** @description No such API key */
        404: {
          headers: {
            [name: string]: unknown;
          };
          content: {
            'application/problem+json': components['schemas']['Problem'];
          };
        };
      };
    };
    options?: never;
    head?: never;
    patch?: never;
    trace?: never;
  };
  '/v1/webhooks': {
    parameters: {
      query?: never;
      header?: never;
      path?: never;
      cookie?: never;
    };
    /** List your subscriptions (oldest first) */
    get: {
      parameters: {
        query?: {
          /** @description The `next_cursor` of the previous page */
          cursor?: string;
          /** @description Deprecated: the older name of `cursor` */
          after?: string;
          limit?: number;
        };
        header?: never;
        path?: never;
        cookie?: never;
      };
      requestBody?: never;
      responses: {
        /** @description A page of subscriptions */
        200: {
          headers: {
            [name: string]: unknown;
          };
          content: {
            'application/json': {
              data: components['schemas']['Webhook'][];
              next_cursor: string | null;
            };
          };
        };
        /** @description Invalid request (problem type `validation`) */
        400: {
          headers: {
            [name: string]: unknown;
          };
          content: {
            'application/problem+json': components['schemas']['Problem'];
          };
        };
        /** @description Missing or invalid API key */
        401: {
          headers: {
            [name: string]: unknown;
          };
          content: {
            'application/problem+json': components['schemas']['Problem'];
          };
        };
        /** @description No such webhook (or not yours) */
        404: {
          headers: {
            [name: string]: unknown;
          };
          content: {
            'application/problem+json': components['schemas']['Problem'];
          };
        };
      };
    };
    put?: never;
    /** Subscribe a URL to events of your tenant; the response shows the signing secret, once */
    post: {
      parameters: {
        query?: never;
        header?: never;
        path?: never;
        cookie?: never;
      };
      requestBody: {
        content: {
          'application/json': {
            /** @description Where deliveries are POSTed (http or https) */
            url: string;
            /** @description The event types to deliver */
            events: (
              | 'run.queued'
              | 'run.running'
              | 'run.waiting_approval'
              | 'run.waiting_for_user'
              | 'run.paused'
              | 'run.completed'
              | 'run.failed'
              | 'run.cancelled'
              | 'run.timed_out'
              | 'run.sleeping'
              | 'run.waiting_for_signal'
              | 'run.waiting_for_quota'
              | 'schedule.fired'
            )[];
            /** @description The signing secret (default: one is generated, `whsec_…`) */
            secret?: string;
            /** @description Default true */
            active?: boolean;
          };
        };
      };
      responses: {
        /** @description The new subscription, with its secret */
        201: {
          headers: {
            [name: string]: unknown;
          };
          content: {
            'application/json': components['schemas']['CreatedWebhook'];
          };
        };
        /** @description Invalid request (problem type `validation`) */
        400: {
          headers: {
            [name: string]: unknown;
          };
          content: {
            'application/problem+json': components['schemas']['Problem'];
          };
        };
        /** @description Missing or invalid API key */
        401: {
          headers: {
            [name: string]: unknown;
          };
          content: {
            'application/problem+json': components['schemas']['Problem'];
          };
        };
        /** @description No such webhook (or not yours) */
        404: {
          headers: {
            [name: string]: unknown;
          };
          content: {
            'application/problem+json': components['schemas']['Problem'];
          };
        };
      };
    };
    delete?: never;
    options?: never;
    head?: never;
    patch?: never;
    trace?: never;
  };
  '/v1/webhooks/{id}': {
    parameters: {
      query?: never;
      header?: never;
      path?: never;
      cookie?: never;
    };
    /** A subscription */
    get: {
      parameters: {
        query?: never;
        header?: never;
        path: {
          id: string;
        };
        cookie?: never;
      };
      requestBody?: never;
      responses: {
        /** @description The subscription */
        200: {
          headers: {
            [name: string]: unknown;
          };
          content: {
            'application/json': components['schemas']['Webhook'];
          };
        };
        /** @description Invalid request (problem type `validation`) */
        400: {
          headers: {
            [name: string]: unknown;
          };
          content: {
            'application/problem+json': components['schemas']['Problem'];
          };
        };
        /** @description Missing or invalid API key */
        401: {
          headers: {
            [name: string]: unknown;
          };
          content: {
            'application/problem+json': components['schemas']['Problem'];
          };
        };
        /** @description No such webhook (or not yours) */
        404: {
          headers: {
            [name: string]: unknown;
          };
          content: {
            'application/problem+json': components['schemas']['Problem'];
          };
        };
      };
    };
    put?: never;
    post?: never;
    /** Delete a subscription, with its deliveries and their attempts */
    delete: {
      parameters: {
        query?: never;
        header?: never;
        path: {
          id: string;
        };
        cookie?: never;
      };
      requestBody?: never;
      responses: {
        /** @description Deleted */
        204: {
          headers: {
            [name: string]: unknown;
          };
          content?: never;
        };
        /** @description Invalid request (problem type `validation`) */
        400: {
          headers: {
            [name: string]: unknown;
          };
          content: {
            'application/problem+json': components['schemas']['Problem'];
          };
        };
        /** @description Missing or invalid API key */
        401: {
          headers: {
            [name: string]: unknown;
          };
          content: {
            'application/problem+json': components['schemas']['Problem'];
          };
        };
        /** @description No such webhook (or not yours) */
        404: {
          headers: {
            [name: string]: unknown;
          };
          content: {
            'application/problem+json': components['schemas']['Problem'];
          };
        };
      };
    };
    options?: never;
    head?: never;
    /** Change a subscription’s URL, events, or whether it is active (a disabled one gets no new deliveries, and its pending ones end failed) */
    patch: {
      parameters: {
        query?: never;
        header?: never;
        path: {
          id: string;
        };
        cookie?: never;
      };
      requestBody: {
        content: {
          'application/json': {
            /** @description Where deliveries are POSTed (http or https) */
            url?: string;
            /** @description The event types to deliver */
            events?: (
              | 'run.queued'
              | 'run.running'
              | 'run.waiting_approval'
              | 'run.waiting_for_user'
              | 'run.paused'
              | 'run.completed'
              | 'run.failed'
              | 'run.cancelled'
              | 'run.timed_out'
              | 'run.sleeping'
              | 'run.waiting_for_signal'
              | 'run.waiting_for_quota'
              | 'schedule.fired'
            )[];
            active?: boolean;
          };
        };
      };
      responses: {
        /** @description The subscription as changed */
        200: {
          headers: {
            [name: string]: unknown;
          };
          content: {
            'application/json': components['schemas']['Webhook'];
          };
        };
        /** @description Invalid request (problem type `validation`) */
        400: {
          headers: {
            [name: string]: unknown;
          };
          content: {
            'application/problem+json': components['schemas']['Problem'];
          };
        };
        /** @description Missing or invalid API key */
        401: {
          headers: {
            [name: string]: unknown;
          };
          content: {
            'application/problem+json': components['schemas']['Problem'];
          };
        };
        /** @description No such webhook (or not yours) */
        404: {
          headers: {
            [name: string]: unknown;
          };
          content: {
            'application/problem+json': components['schemas']['Problem'];
          };
        };
      };
    };
    trace?: never;
  };
  '/v1/webhooks/{id}/rotate-secret': {
    parameters: {
      query?: never;
      header?: never;
      path?: never;
      cookie?: never;
    };
    get?: never;
    put?: never;
    /** A new signing secret, shown once; the replaced one still signs deliveries (a second v1= in Keel-Signature) until the overlap ends */
    post: {
      parameters: {
        query?: never;
        header?: never;
        path: {
          id: string;
        };
        cookie?: never;
      };
      requestBody?: {
        content: {
          'application/json': {
            /** @description How long the replaced secret still signs deliveries (default 86400 s, a day; at most a week; 0: not at all) */
            overlap_seconds?: number;
          };
        };
      };
      responses: {
        /** @description The subscription with its new secret */
        200: {
          headers: {
            [name: string]: unknown;
          };
          content: {
            'application/json': components['schemas']['CreatedWebhook'];
          };
        };
        /** @description Invalid request (problem type `validation`) */
        400: {
          headers: {
            [name: string]: unknown;
          };
          content: {
            'application/problem+json': components['schemas']['Problem'];
          };
        };
        /** @description Missing or invalid API key */
        401: {
          headers: {
            [name: string]: unknown;
          };
          content: {
            'application/problem+json': components['schemas']['Problem'];
          };
        };
        /** @description No such webhook (or not yours) */
        404: {
          headers: {
            [name: string]: unknown;
          };
          content: {
            'application/problem+json': components['schemas']['Problem'];
          };
        };
      };
    };
    delete?: never;
    options?: never;
    head?: never;
    patch?: never;
    trace?: never;
  };
  '/v1/webhooks/{id}/deliveries': {
    parameters: {
      query?: never;
      header?: never;
      path?: never;
      cookie?: never;
    };
    /** A subscription’s deliveries, newest first, each with its attempts */
    get: {
      parameters: {
        query?: {
          /** @description The `next_cursor` of the previous page */
          cursor?: string;
          /** @description Deprecated: the older name of `cursor` */
          after?: string;
          limit?: number;
        };
        header?: never;
        path: {
          id: string;
        };
        cookie?: never;
      };
      requestBody?: never;
      responses: {
        /** @description A page of deliveries */
        200: {
          headers: {
            [name: string]: unknown;
          };
          content: {
            'application/json': {
              data: components['schemas']['WebhookDelivery'][];
              next_cursor: string | null;
            };
          };
        };
        /** @description Invalid request (problem type `validation`) */
        400: {
          headers: {
            [name: string]: unknown;
          };
          content: {
            'application/problem+json': components['schemas']['Problem'];
          };
        };
        /** @description Missing or invalid API key */
        401: {
          headers: {
            [name: string]: unknown;
          };
          content: {
            'application/problem+json': components['schemas']['Problem'];
          };
        };
        /** @description No such webhook (or not yours) */
        404: {
          headers: {
            [name: string]: unknown;
          };
          content: {
            'application/problem+json': components['schemas']['Problem'];
          };
        };
      };
    };
    put?: never;
    post?: never;
    delete?: never;
    options?: never;
    head?: never;
    patch?: never;
    trace?: never;
  };
  '/v1/webhook-deliveries/{id}': {
    parameters: {
      query?: never;
      header?: never;
      path?: never;
      cookie?: never;
    };
    /** A delivery of one of your subscriptions, by its id alone (the Keel-Delivery header), with its attempts */
    get: {
      parameters: {
        query?: never;
        header?: never;
        path: {
          id: string;
        };
        cookie?: never;
      };
      requestBody?: never;
      responses: {
        /** @description The delivery */
        200: {
          headers: {
            [name: string]: unknown;
          };
          content: {
            'application/json': components['schemas']['WebhookDelivery'];
          };
        };
        /** @description Invalid request (problem type `validation`) */
        400: {
          headers: {
            [name: string]: unknown;
          };
          content: {
            'application/problem+json': components['schemas']['Problem'];
          };
        };
        /** @description Missing or invalid API key */
        401: {
          headers: {
            [name: string]: unknown;
          };
          content: {
            'application/problem+json': components['schemas']['Problem'];
          };
        };
        /** @description No such webhook (or not yours) */
        404: {
          headers: {
            [name: string]: unknown;
          };
          content: {
            'application/problem+json': components['schemas']['Problem'];
          };
        };
      };
    };
    put?: never;
    post?: never;
    delete?: never;
    options?: never;
    head?: never;
    patch?: never;
    trace?: never;
  };
  '/v1/webhooks/{id}/deliveries/{delivery_id}/redeliver': {
    parameters: {
      query?: never;
      header?: never;
      path?: never;
      cookie?: never;
    };
    get?: never;
    put?: never;
    /** Attempt a delivery again now (retried again for a day if it fails), whatever its status; the same delivery id */
    post: {
      parameters: {
        query?: never;
        header?: never;
        path: {
          id: string;
          delivery_id: string;
        };
        cookie?: never;
      };
      requestBody?: never;
      responses: {
        /** @description The delivery, pending again */
        202: {
          headers: {
            [name: string]: unknown;
          };
          content: {
            'application/json': components['schemas']['WebhookDelivery'];
          };
        };
        /** @description Invalid request (problem type `validation`) */
        400: {
          headers: {
            [name: string]: unknown;
          };
          content: {
            'application/problem+json': components['schemas']['Problem'];
          };
        };
        /** @description Missing or invalid API key */
        401: {
          headers: {
            [name: string]: unknown;
          };
          content: {
            'application/problem+json': components['schemas']['Problem'];
          };
        };
        /** @description No such webhook (or not yours) */
        404: {
          headers: {
            [name: string]: unknown;
          };
          content: {
            'application/problem+json': components['schemas']['Problem'];
          };
        };
        /** @description An attempt of it is in flight, or the subscription is disabled (problem type `conflict`) */
        409: {
          headers: {
            [name: string]: unknown;
          };
          content: {
            'application/problem+json': components['schemas']['Problem'];
          };
        };
      };
    };
    delete?: never;
    options?: never;
    head?: never;
    patch?: never;
    trace?: never;
  };
  '/v1/schedules': {
    parameters: {
      query?: never;
      header?: never;
      path?: never;
      cookie?: never;
    };
    /** The tenant's schedules (cursor pagination, by id) */
    get: {
      parameters: {
        query?: {
          /** @description The `next_cursor` of the previous page */
          cursor?: string;
          /** @description Deprecated: the older name of `cursor` */
          after?: string;
          limit?: number;
        };
        header?: never;
        path?: never;
        cookie?: never;
      };
      requestBody?: never;
      responses: {
        /** @description A page of schedules */
        200: {
          headers: {
            [name: string]: unknown;
          };
          content: {
            'application/json': {
              data: components['schemas']['Schedule'][];
              next_cursor: string | null;
            };
          };
        };
        /** @description Invalid request */
        400: {
          headers: {
            [name: string]: unknown;
          };
          content: {
            'application/problem+json': components['schemas']['Problem'];
          };
        };
        /** @description Missing or invalid API key */
        401: {
          headers: {
            [name: string]: unknown;
          };
          content: {
            'application/problem+json': components['schemas']['Problem'];
          };
        };
        /** @description No such schedule (or not yours) */
        404: {
          headers: {
            [name: string]: unknown;
          };
          content: {
            'application/problem+json': components['schemas']['Problem'];
          };
        };
        /** @description The database cannot be reached right now (`store_unavailable`): try again after `Retry-After` */
        503: {
          headers: {
            [name: string]: unknown;
          };
          content: {
            'application/problem+json': components['schemas']['Problem'];
          };
        };
      };
    };
    put?: never;
    /** Create a schedule (cron with a time zone, or an interval) */
    post: {
      parameters: {
        query?: never;
        header?: never;
        path?: never;
        cookie?: never;
      };
      requestBody: {
        content: {
          'application/json': components['schemas']['CreateSchedule'];
        };
      };
      responses: {
        /** @description The new schedule */
        201: {
          headers: {
            [name: string]: unknown;
          };
          content: {
            'application/json': components['schemas']['Schedule'];
          };
        };
        /** @description Invalid request */
        400: {
          headers: {
            [name: string]: unknown;
          };
          content: {
            'application/problem+json': components['schemas']['Problem'];
          };
        };
        /** @description Missing or invalid API key */
        401: {
          headers: {
            [name: string]: unknown;
          };
          content: {
            'application/problem+json': components['schemas']['Problem'];
          };
        };
        /** @description No such schedule (or not yours) */
        404: {
          headers: {
            [name: string]: unknown;
          };
          content: {
            'application/problem+json': components['schemas']['Problem'];
          };
        };
        /** @description No such agent */
        422: {
          headers: {
            [name: string]: unknown;
          };
          content: {
            'application/problem+json': components['schemas']['Problem'];
          };
        };
        /** @description The database cannot be reached right now (`store_unavailable`): try again after `Retry-After` */
        503: {
          headers: {
            [name: string]: unknown;
          };
          content: {
            'application/problem+json': components['schemas']['Problem'];
          };
        };
      };
    };
    delete?: never;
    options?: never;
    head?: never;
    patch?: never;
    trace?: never;
  };
  '/v1/schedules/{id}': {
    parameters: {
      query?: never;
      header?: never;
      path?: never;
      cookie?: never;
    };
    /** Get a schedule */
    get: {
      parameters: {
        query?: never;
        header?: never;
        path: {
          id: string;
        };
        cookie?: never;
      };
      requestBody?: never;
      responses: {
        /** @description The schedule */
        200: {
          headers: {
            [name: string]: unknown;
          };
          content: {
            'application/json': components['schemas']['Schedule'];
          };
        };
        /** @description Invalid request */
        400: {
          headers: {
            [name: string]: unknown;
          };
          content: {
            'application/problem+json': components['schemas']['Problem'];
          };
        };
        /** @description Missing or invalid API key */
        401: {
          headers: {
            [name: string]: unknown;
          };
          content: {
            'application/problem+json': components['schemas']['Problem'];
          };
        };
        /** @description No such schedule (or not yours) */
        404: {
          headers: {
            [name: string]: unknown;
          };
          content: {
            'application/problem+json': components['schemas']['Problem'];
          };
        };
        /** @description The database cannot be reached right now (`store_unavailable`): try again after `Retry-After` */
        503: {
          headers: {
            [name: string]: unknown;
          };
          content: {
            'application/problem+json': components['schemas']['Problem'];
          };
        };
      };
    };
    put?: never;
    post?: never;
    /** Delete a schedule and its history of fires (the runs and sessions it made stay) */
    delete: {
      parameters: {
        query?: never;
        header?: never;
        path: {
          id: string;
        };
        cookie?: never;
      };
      requestBody?: never;
      responses: {
        /** @description Deleted */
        204: {
          headers: {
            [name: string]: unknown;
          };
          content?: never;
        };
        /** @description Invalid request */
        400: {
          headers: {
            [name: string]: unknown;
          };
          content: {
            'application/problem+json': components['schemas']['Problem'];
          };
        };
        /** @description Missing or invalid API key */
        401: {
          headers: {
            [name: string]: unknown;
          };
          content: {
            'application/problem+json': components['schemas']['Problem'];
          };
        };
        /** @description No such schedule (or not yours) */
        404: {
          headers: {
            [name: string]: unknown;
          };
          content: {
            'application/problem+json': components['schemas']['Problem'];
          };
        };
        /** @description The database cannot be reached right now (`store_unavailable`): try again after `Retry-After` */
        503: {
          headers: {
            [name: string]: unknown;
          };
          content: {
            'application/problem+json': components['schemas']['Problem'];
          };
        };
      };
    };
    options?: never;
    head?: never;
    patch?: never;
    trace?: never;
  };
  '/v1/schedules/{id}/pause': {
    parameters: {
      query?: never;
      header?: never;
      path?: never;
      cookie?: never;
    };
    get?: never;
    put?: never;
    /** Pause a schedule: no tick fires until it is resumed (idempotent) */
    post: {
      parameters: {
        query?: never;
        header?: never;
        path: {
          id: string;
        };
        cookie?: never;
      };
      requestBody?: never;
      responses: {
        /** @description The schedule after the request */
        200: {
          headers: {
            [name: string]: unknown;
          };
          content: {
            'application/json': components['schemas']['Schedule'];
          };
        };
        /** @description Invalid request */
        400: {
          headers: {
            [name: string]: unknown;
          };
          content: {
            'application/problem+json': components['schemas']['Problem'];
          };
        };
        /** @description Missing or invalid API key */
        401: {
          headers: {
            [name: string]: unknown;
          };
          content: {
            'application/problem+json': components['schemas']['Problem'];
          };
        };
        /** @description No such schedule (or not yours) */
        404: {
          headers: {
            [name: string]: unknown;
          };
          content: {
            'application/problem+json': components['schemas']['Problem'];
          };
        };
        /** @description The database cannot be reached right now (`store_unavailable`): try again after `Retry-After` */
        503: {
          headers: {
            [name: string]: unknown;
          };
          content: {
            'application/problem+json': components['schemas']['Problem'];
          };
        };
      };
    };
    delete?: never;
    options?: never;
    head?: never;
    patch?: never;
    trace?: never;
  };
  '/v1/schedules/{id}/resume': {
    parameters: {
      query?: never;
      header?: never;
      path?: never;
      cookie?: never;
    };
    get?: never;
    put?: never;
    /** Resume a schedule from now: ticks missed while paused are not fired (idempotent) */
    post: {
      parameters: {
        query?: never;
        header?: never;
        path: {
          id: string;
        };
        cookie?: never;
      };
      requestBody?: never;
      responses: {
        /** @description The schedule after the request */
        200: {
          headers: {
            [name: string]: unknown;
          };
          content: {
            'application/json': components['schemas']['Schedule'];
          };
        };
        /** @description Invalid request */
        400: {
          headers: {
            [name: string]: unknown;
          };
          content: {
            'application/problem+json': components['schemas']['Problem'];
          };
        };
        /** @description Missing or invalid API key */
        401: {
          headers: {
            [name: string]: unknown;
          };
          content: {
            'application/problem+json': components['schemas']['Problem'];
          };
        };
        /** @description No such schedule (or not yours) */
        404: {
          headers: {
            [name: string]: unknown;
          };
          content: {
            'application/problem+json': components['schemas']['Problem'];
          };
        };
        /** @description The database cannot be reached right now (`store_unavailable`): try again after `Retry-After` */
        503: {
          headers: {
            [name: string]: unknown;
          };
          content: {
            'application/problem+json': components['schemas']['Problem'];
          };
        };
      };
    };
    delete?: never;
    options?: never;
    head?: never;
    patch?: never;
    trace?: never;
  };
  '/v1/schedules/{id}/fires': {
    parameters: {
      query?: never;
      header?: never;
      path?: never;
      cookie?: never;
    };
    /** The history of fires, newest first: each tick, when it fired, its outcome (and why), its run and session */
    get: {
      parameters: {
        query?: {
          /** @description The `next_cursor` of the previous page */
          cursor?: string;
          limit?: number;
        };
        header?: never;
        path: {
          id: string;
        };
        cookie?: never;
      };
      requestBody?: never;
      responses: {
        /** @description A page of fires */
        200: {
          headers: {
            [name: string]: unknown;
          };
          content: {
            'application/json': {
              data: components['schemas']['ScheduleFire'][];
              next_cursor: string | null;
            };
          };
        };
        /** @description Invalid request */
        400: {
          headers: {
            [name: string]: unknown;
          };
          content: {
            'application/problem+json': components['schemas']['Problem'];
          };
        };
        /** @description Missing or invalid API key */
        401: {
          headers: {
            [name: string]: unknown;
          };
          content: {
            'application/problem+json': components['schemas']['Problem'];
          };
        };
        /** @description No such schedule (or not yours) */
        404: {
          headers: {
            [name: string]: unknown;
          };
          content: {
            'application/problem+json': components['schemas']['Problem'];
          };
        };
        /** @description The database cannot be reached right now (`store_unavailable`): try again after `Retry-After` */
        503: {
          headers: {
            [name: string]: unknown;
          };
          content: {
            'application/problem+json': components['schemas']['Problem'];
          };
        };
      };
    };
    put?: never;
    post?: never;
    delete?: never;
    options?: never;
    head?: never;
    patch?: never;
    trace?: never;
  };
  '/v1/retention/policy': {
    parameters: {
      query?: never;
      header?: never;
      path?: never;
      cookie?: never;
    };
    /** The retention policy of your tenant (or of one of its agents), and what applies */
    get: {
      parameters: {
        query?: {
          agent?: string;
        };
        header?: never;
        path?: never;
        cookie?: never;
      };
      requestBody?: never;
      responses: {
        /** @description The policy */
        200: {
          headers: {
            [name: string]: unknown;
          };
          content: {
            'application/json': components['schemas']['RetentionPolicy'];
          };
        };
        /** @description Invalid request */
        400: {
          headers: {
            [name: string]: unknown;
          };
          content: {
            'application/problem+json': components['schemas']['Problem'];
          };
        };
        /** @description Missing or invalid API key */
        401: {
          headers: {
            [name: string]: unknown;
          };
          content: {
            'application/problem+json': components['schemas']['Problem'];
          };
        };
        /** @description No such session (or not yours) */
        404: {
          headers: {
            [name: string]: unknown;
          };
          content: {
            'application/problem+json': components['schemas']['Problem'];
          };
        };
        /** @description The database cannot be reached right now (`store_unavailable`): try again after `Retry-After` */
        503: {
          headers: {
            [name: string]: unknown;
          };
          content: {
            'application/problem+json': components['schemas']['Problem'];
          };
        };
      };
    };
    /** Set the retention policy of your tenant (or of one of its agents) */
    put: {
      parameters: {
        query?: never;
        header?: never;
        path?: never;
        cookie?: never;
      };
      requestBody: {
        content: {
          'application/json': components['schemas']['RetentionPolicyUpdate'];
        };
      };
      responses: {
        /** @description The policy as set */
        200: {
          headers: {
            [name: string]: unknown;
          };
          content: {
            'application/json': components['schemas']['RetentionPolicy'];
          };
        };
        /** @description Invalid request */
        400: {
          headers: {
            [name: string]: unknown;
          };
          content: {
            'application/problem+json': components['schemas']['Problem'];
          };
        };
        /** @description Missing or invalid API key */
        401: {
          headers: {
            [name: string]: unknown;
          };
          content: {
            'application/problem+json': components['schemas']['Problem'];
          };
        };
        /** @description No such session (or not yours) */
        404: {
          headers: {
            [name: string]: unknown;
          };
          content: {
            'application/problem+json': components['schemas']['Problem'];
          };
        };
        /** @description A policy that cannot be kept (invalid_retention_policy, naming the field) */
        422: {
          headers: {
            [name: string]: unknown;
          };
          content: {
            'application/problem+json': components['schemas']['Problem'];
          };
        };
        /** @description The database cannot be reached right now (`store_unavailable`): try again after `Retry-After` */
        503: {
          headers: {
            [name: string]: unknown;
          };
          content: {
            'application/problem+json': components['schemas']['Problem'];
          };
        };
      };
    };
    post?: never;
    /** Remove the retention policy your tenant set (keel.config’s then applies) */
    delete: {
      parameters: {
        query?: {
          agent?: string;
        };
        header?: never;
        path?: never;
        cookie?: never;
      };
      requestBody?: never;
      responses: {
        /** @description Removed */
        204: {
          headers: {
            [name: string]: unknown;
          };
          content?: never;
        };
        /** @description Invalid request */
        400: {
          headers: {
            [name: string]: unknown;
          };
          content: {
            'application/problem+json': components['schemas']['Problem'];
          };
        };
        /** @description Missing or invalid API key */
        401: {
          headers: {
            [name: string]: unknown;
          };
          content: {
            'application/problem+json': components['schemas']['Problem'];
          };
        };
        /** @description No such session (or not yours) */
        404: {
          headers: {
            [name: string]: unknown;
          };
          content: {
            'application/problem+json': components['schemas']['Problem'];
          };
        };
        /** @description The database cannot be reached right now (`store_unavailable`): try again after `Retry-After` */
        503: {
          headers: {
            [name: string]: unknown;
          };
          content: {
            'application/problem+json': components['schemas']['Problem'];
          };
        };
      };
    };
    options?: never;
    head?: never;
    patch?: never;
    trace?: never;
  };
  '/v1/retention/status': {
    parameters: {
      query?: never;
      header?: never;
      path?: never;
      cookie?: never;
    };
    /** What retention would do now to your tenant’s sessions (a dry run), and the policy that applies */
    get: {
      parameters: {
        query?: never;
        header?: never;
        path?: never;
        cookie?: never;
      };
      requestBody?: never;
      responses: {
        /** @description The status */
        200: {
          headers: {
            [name: string]: unknown;
          };
          content: {
            'application/json': components['schemas']['RetentionStatus'];
          };
        };
        /** @description Invalid request */
        400: {
          headers: {
            [name: string]: unknown;
          };
          content: {
            'application/problem+json': components['schemas']['Problem'];
          };
        };
        /** @description Missing or invalid API key */
        401: {
          headers: {
            [name: string]: unknown;
          };
          content: {
            'application/problem+json': components['schemas']['Problem'];
          };
        };
        /** @description No such session (or not yours) */
        404: {
          headers: {
            [name: string]: unknown;
          };
          content: {
            'application/problem+json': components['schemas']['Problem'];
          };
        };
        /** @description The database cannot be reached right now (`store_unavailable`): try again after `Retry-After` */
        503: {
          headers: {
            [name: string]: unknown;
          };
          content: {
            'application/problem+json': components['schemas']['Problem'];
          };
        };
      };
    };
    put?: never;
    post?: never;
    delete?: never;
    options?: never;
    head?: never;
    patch?: never;
    trace?: never;
  };
  '/v1/retention/run': {
    parameters: {
      query?: never;
      header?: never;
      path?: never;
      cookie?: never;
    };
    get?: never;
    put?: never;
    /** Sweep your tenant’s sessions now (archive, delete), or say what it would do (dry_run) */
    post: {
      parameters: {
        query?: never;
        header?: never;
        path?: never;
        cookie?: never;
      };
      requestBody?: {
        content: {
          'application/json': components['schemas']['RetentionRun'];
        };
      };
      responses: {
        /** @description What was done (or would be) */
        200: {
          headers: {
            [name: string]: unknown;
          };
          content: {
            'application/json': components['schemas']['RetentionReport'];
          };
        };
        /** @description Invalid request */
        400: {
          headers: {
            [name: string]: unknown;
          };
          content: {
            'application/problem+json': components['schemas']['Problem'];
          };
        };
        /** @description Missing or invalid API key */
        401: {
          headers: {
            [name: string]: unknown;
          };
          content: {
            'application/problem+json': components['schemas']['Problem'];
          };
        };
        /** @description No such session (or not yours) */
        404: {
          headers: {
            [name: string]: unknown;
          };
          content: {
            'application/problem+json': components['schemas']['Problem'];
          };
        };
        /** @description A policy archives, and no archive store is configured (no_archive_store) */
        409: {
          headers: {
            [name: string]: unknown;
          };
          content: {
            'application/problem+json': components['schemas']['Problem'];
          };
        };
        /** @description The database cannot be reached right now (`store_unavailable`): try again after `Retry-After` */
        503: {
          headers: {
            [name: string]: unknown;
          };
          content: {
            'application/problem+json': components['schemas']['Problem'];
          };
        };
      };
    };
    delete?: never;
    options?: never;
    head?: never;
    patch?: never;
    trace?: never;
  };
  '/v1/sessions/{id}/restore': {
    parameters: {
      query?: never;
      header?: never;
      path?: never;
      cookie?: never;
    };
    get?: never;
    put?: never;
    /** Restore a session from the archive store, with every id it had */
    post: {
      parameters: {
        query?: never;
        header?: never;
        path: {
          id: string;
        };
        cookie?: never;
      };
      requestBody?: never;
      responses: {
        /** @description The session is back */
        200: {
          headers: {
            [name: string]: unknown;
          };
          content: {
            'application/json': components['schemas']['RestoredSession'];
          };
        };
        /** @description Invalid request */
        400: {
          headers: {
            [name: string]: unknown;
          };
          content: {
            'application/problem+json': components['schemas']['Problem'];
          };
        };
        /** @description Missing or invalid API key */
        401: {
          headers: {
            [name: string]: unknown;
          };
          content: {
            'application/problem+json': components['schemas']['Problem'];
          };
        };
        /** @description No such session (or not yours) */
        404: {
          headers: {
            [name: string]: unknown;
          };
          content: {
            'application/problem+json': components['schemas']['Problem'];
          };
        };
        /** @description The session is not in the archive store (not_in_archive) */
        409: {
          headers: {
            [name: string]: unknown;
          };
          content: {
            'application/problem+json': components['schemas']['Problem'];
          };
        };
        /** @description Its archive cannot be read (`archive_unavailable`), or the database cannot be reached (`store_unavailable`) */
        503: {
          headers: {
            [name: string]: unknown;
          };
          content: {
            'application/problem+json': components['schemas']['Problem'];
          };
        };
      };
    };
    delete?: never;
    options?: never;
    head?: never;
    patch?: never;
    trace?: never;
  };
  '/v1/runs/{id}': {
    parameters: {
      query?: never;
      header?: never;
      path?: never;
      cookie?: never;
    };
    /** Get a run */
    get: {
      parameters: {
        query?: never;
        header?: never;
        path: {
          id: string;
        };
        cookie?: never;
      };
      requestBody?: never;
      responses: {
        /** @description The run */
        200: {
          headers: {
            [name: string]: unknown;
          };
          content: {
            'application/json': components['schemas']['Run'];
          };
        };
        /** @description Invalid request */
        400: {
          headers: {
            [name: string]: unknown;
          };
          content: {
            'application/problem+json': components['schemas']['Problem'];
          };
        };
        /** @description Missing or invalid API key */
        401: {
          headers: {
            [name: string]: unknown;
          };
          content: {
            'application/problem+json': components['schemas']['Problem'];
          };
        };
        /** @description No such run (or not yours) */
        404: {
          headers: {
            [name: string]: unknown;
          };
          content: {
            'application/problem+json': components['schemas']['Problem'];
          };
        };
        /** @description Not possible in the run’s current state */
        409: {
          headers: {
            [name: string]: unknown;
          };
          content: {
            'application/problem+json': components['schemas']['Problem'];
          };
        };
        /** @description The database cannot be reached right now (`store_unavailable`): try again after `Retry-After` */
        503: {
          headers: {
            [name: string]: unknown;
          };
          content: {
            'application/problem+json': components['schemas']['Problem'];
          };
        };
      };
    };
    put?: never;
    post?: never;
    delete?: never;
    options?: never;
    head?: never;
    patch?: never;
    trace?: never;
  };
  '/v1/runs/{id}/steps': {
    parameters: {
      query?: never;
      header?: never;
      path?: never;
      cookie?: never;
    };
    /** The run's steps: requests, model decisions, tool calls and results, usage, timing */
    get: {
      parameters: {
        query?: never;
        header?: never;
        path: {
          id: string;
        };
        cookie?: never;
      };
      requestBody?: never;
      responses: {
        /** @description Steps */
        200: {
          headers: {
            [name: string]: unknown;
          };
          content: {
            'application/json': {
              data: {
                [key: string]: unknown;
              }[];
            };
          };
        };
        /** @description Invalid request */
        400: {
          headers: {
            [name: string]: unknown;
          };
          content: {
            'application/problem+json': components['schemas']['Problem'];
          };
        };
        /** @description Missing or invalid API key */
        401: {
          headers: {
            [name: string]: unknown;
          };
          content: {
            'application/problem+json': components['schemas']['Problem'];
          };
        };
        /** @description No such run (or not yours) */
        404: {
          headers: {
            [name: string]: unknown;
          };
          content: {
            'application/problem+json': components['schemas']['Problem'];
          };
        };
        /** @description Not possible in the run’s current state */
        409: {
          headers: {
            [name: string]: unknown;
          };
          content: {
            'application/problem+json': components['schemas']['Problem'];
          };
        };
        /** @description The database cannot be reached right now (`store_unavailable`): try again after `Retry-After` */
        503: {
          headers: {
            [name: string]: unknown;
          };
          content: {
            'application/problem+json': components['schemas']['Problem'];
          };
        };
      };
    };
    put?: never;
    post?: never;
    delete?: never;
    options?: never;
    head?: never;
    patch?: never;
    trace?: never;
  };
  '/v1/runs/{id}/cancel': {
    parameters: {
      query?: never;
      header?: never;
      path?: never;
      cookie?: never;
    };
    get?: never;
    put?: never;
    /** Cancel (in any non-terminal state; idempotent) */
    post: {
      parameters: {
        query?: never;
        header?: never;
        path: {
          id: string;
        };
        cookie?: never;
      };
      requestBody?: never;
      responses: {
        /** @description The run after the request */
        200: {
          headers: {
            [name: string]: unknown;
          };
          content: {
            'application/json': components['schemas']['Run'];
          };
        };
        /** @description Invalid request */
        400: {
          headers: {
            [name: string]: unknown;
          };
          content: {
            'application/problem+json': components['schemas']['Problem'];
          };
        };
        /** @description Missing or invalid API key */
        401: {
          headers: {
            [name: string]: unknown;
          };
          content: {
            'application/problem+json': components['schemas']['Problem'];
          };
        };
        /** @description No such run (or not yours) */
        404: {
          headers: {
            [name: string]: unknown;
          };
          content: {
            'application/problem+json': components['schemas']['Problem'];
          };
        };
        /** @description Not possible in the run’s current state */
        409: {
          headers: {
            [name: string]: unknown;
          };
          content: {
            'application/problem+json': components['schemas']['Problem'];
          };
        };
        /** @description The database cannot be reached right now (`store_unavailable`): try again after `Retry-After` */
        503: {
          headers: {
            [name: string]: unknown;
          };
          content: {
            'application/problem+json': components['schemas']['Problem'];
          };
        };
      };
    };
    delete?: never;
    options?: never;
    head?: never;
    patch?: never;
    trace?: never;
  };
  '/v1/runs/{id}/pause': {
    parameters: {
      query?: never;
      header?: never;
      path?: never;
      cookie?: never;
    };
    get?: never;
    put?: never;
    /** Pause at the next step boundary */
    post: {
      parameters: {
        query?: never;
        header?: never;
        path: {
          id: string;
        };
        cookie?: never;
      };
      requestBody?: never;
      responses: {
        /** @description The run after the request */
        200: {
          headers: {
            [name: string]: unknown;
          };
          content: {
            'application/json': components['schemas']['Run'];
          };
        };
        /** @description Invalid request */
        400: {
          headers: {
            [name: string]: unknown;
          };
          content: {
            'application/problem+json': components['schemas']['Problem'];
          };
        };
        /** @description Missing or invalid API key */
        401: {
          headers: {
            [name: string]: unknown;
          };
          content: {
            'application/problem+json': components['schemas']['Problem'];
          };
        };
        /** @description No such run (or not yours) */
        404: {
          headers: {
            [name: string]: unknown;
          };
          content: {
            'application/problem+json': components['schemas']['Problem'];
          };
        };
        /** @description Not possible in the run’s current state */
        409: {
          headers: {
            [name: string]: unknown;
          };
          content: {
            'application/problem+json': components['schemas']['Problem'];
          };
        };
        /** @description The database cannot be reached right now (`store_unavailable`): try again after `Retry-After` */
        503: {
          headers: {
            [name: string]: unknown;
          };
          content: {
            'application/problem+json': components['schemas']['Problem'];
          };
        };
      };
    };
    delete?: never;
    options?: never;
    head?: never;
    patch?: never;
    trace?: never;
  };
  '/v1/runs/{id}/resume': {
    parameters: {
      query?: never;
      header?: never;
      path?: never;
      cookie?: never;
    };
    get?: never;
    put?: never;
    /** Resume a paused run */
    post: {
      parameters: {
        query?: never;
        header?: never;
        path: {
          id: string;
        };
        cookie?: never;
      };
      requestBody?: never;
      responses: {
        /** @description The run after the request */
        200: {
          headers: {
            [name: string]: unknown;
          };
          content: {
            'application/json': components['schemas']['Run'];
          };
        };
        /** @description Invalid request */
        400: {
          headers: {
            [name: string]: unknown;
          };
          content: {
            'application/problem+json': components['schemas']['Problem'];
          };
        };
        /** @description Missing or invalid API key */
        401: {
          headers: {
            [name: string]: unknown;
          };
          content: {
            'application/problem+json': components['schemas']['Problem'];
          };
        };
        /** @description No such run (or not yours) */
        404: {
          headers: {
            [name: string]: unknown;
          };
          content: {
            'application/problem+json': components['schemas']['Problem'];
          };
        };
        /** @description Not possible in the run’s current state */
        409: {
          headers: {
            [name: string]: unknown;
          };
          content: {
            'application/problem+json': components['schemas']['Problem'];
          };
        };
        /** @description The database cannot be reached right now (`store_unavailable`): try again after `Retry-After` */
        503: {
          headers: {
            [name: string]: unknown;
          };
          content: {
            'application/problem+json': components['schemas']['Problem'];
          };
        };
      };
    };
    delete?: never;
    options?: never;
    head?: never;
    patch?: never;
    trace?: never;
  };
  '/v1/runs/{id}/steer': {
    parameters: {
      query?: never;
      header?: never;
      path?: never;
      cookie?: never;
    };
    get?: never;
    put?: never;
    /** Send input into the run's next step */
    post: {
      parameters: {
        query?: never;
        header?: never;
        path: {
          id: string;
        };
        cookie?: never;
      };
      requestBody: {
        content: {
          'application/json': {
            content: components['schemas']['Content'];
          };
        };
      };
      responses: {
        /** @description Accepted */
        202: {
          headers: {
            [name: string]: unknown;
          };
          content: {
            'application/json': {
              message: {
                id: string;
              };
              run: components['schemas']['Run'];
            };
          };
        };
        /** @description Invalid request */
        400: {
          headers: {
            [name: string]: unknown;
          };
          content: {
            'application/problem+json': components['schemas']['Problem'];
          };
        };
        /** @description Missing or invalid API key */
        401: {
          headers: {
            [name: string]: unknown;
          };
          content: {
            'application/problem+json': components['schemas']['Problem'];
          };
        };
        /** @description No such run (or not yours) */
        404: {
          headers: {
            [name: string]: unknown;
          };
          content: {
            'application/problem+json': components['schemas']['Problem'];
          };
        };
        /** @description Not possible in the run’s current state */
        409: {
          headers: {
            [name: string]: unknown;
          };
          content: {
            'application/problem+json': components['schemas']['Problem'];
          };
        };
        /** @description The database cannot be reached right now (`store_unavailable`): try again after `Retry-After` */
        503: {
          headers: {
            [name: string]: unknown;
          };
          content: {
            'application/problem+json': components['schemas']['Problem'];
          };
        };
      };
    };
    delete?: never;
    options?: never;
    head?: never;
    patch?: never;
    trace?: never;
  };
  '/v1/runs/{id}/tool-results': {
    parameters: {
      query?: never;
      header?: never;
      path?: never;
      cookie?: never;
    };
    get?: never;
    put?: never;
    /** Deliver the outputs of the run's client tool calls (declared with `client_tools`): each ends its call's wait, exactly once; the run goes on when every pending call has one */
    post: {
      parameters: {
        query?: never;
        header?: never;
        path: {
          id: string;
        };
        cookie?: never;
      };
      requestBody: {
        content: {
          'application/json': {
            results: {
              tool_call_id: string;
              /** @description Text, or any JSON value */
              output: unknown;
              /** @description The call failed in the client: the model sees an error */
              is_error?: boolean;
            }[];
          };
        };
      };
      responses: {
        /** @description The run */
        200: {
          headers: {
            [name: string]: unknown;
          };
          content: {
            'application/json': components['schemas']['Run'];
          };
        };
        /** @description Invalid request */
        400: {
          headers: {
            [name: string]: unknown;
          };
          content: {
            'application/problem+json': components['schemas']['Problem'];
          };
        };
        /** @description Missing or invalid API key */
        401: {
          headers: {
            [name: string]: unknown;
          };
          content: {
            'application/problem+json': components['schemas']['Problem'];
          };
        };
        /** @description No such run (or not yours), or it made no such client tool call (unknown_tool_call) */
        404: {
          headers: {
            [name: string]: unknown;
          };
          content: {
            'application/problem+json': components['schemas']['Problem'];
          };
        };
        /** @description An output for the call was already delivered (already_delivered), or the run has ended */
        409: {
          headers: {
            [name: string]: unknown;
          };
          content: {
            'application/problem+json': components['schemas']['Problem'];
          };
        };
        /** @description The database cannot be reached right now (`store_unavailable`): try again after `Retry-After` */
        503: {
          headers: {
            [name: string]: unknown;
          };
          content: {
            'application/problem+json': components['schemas']['Problem'];
          };
        };
      };
    };
    delete?: never;
    options?: never;
    head?: never;
    patch?: never;
    trace?: never;
  };
  '/v1/runs/{id}/input': {
    parameters: {
      query?: never;
      header?: never;
      path?: never;
      cookie?: never;
    };
    get?: never;
    put?: never;
    /** Answer the run's ask_user question; the run resumes */
    post: {
      parameters: {
        query?: never;
        header?: never;
        path: {
          id: string;
        };
        cookie?: never;
      };
      requestBody: {
        content: {
          'application/json': {
            answers: unknown;
            tool_call_id?: string;
          };
        };
      };
      responses: {
        /** @description The run */
        200: {
          headers: {
            [name: string]: unknown;
          };
          content: {
            'application/json': components['schemas']['Run'];
          };
        };
        /** @description Invalid request */
        400: {
          headers: {
            [name: string]: unknown;
          };
          content: {
            'application/problem+json': components['schemas']['Problem'];
          };
        };
        /** @description Missing or invalid API key */
        401: {
          headers: {
            [name: string]: unknown;
          };
          content: {
            'application/problem+json': components['schemas']['Problem'];
          };
        };
        /** @description No such run (or not yours) */
        404: {
          headers: {
            [name: string]: unknown;
          };
          content: {
            'application/problem+json': components['schemas']['Problem'];
          };
        };
        /** @description Not possible in the run’s current state */
        409: {
          headers: {
            [name: string]: unknown;
          };
          content: {
            'application/problem+json': components['schemas']['Problem'];
          };
        };
        /** @description The database cannot be reached right now (`store_unavailable`): try again after `Retry-After` */
        503: {
          headers: {
            [name: string]: unknown;
          };
          content: {
            'application/problem+json': components['schemas']['Problem'];
          };
        };
      };
    };
    delete?: never;
    options?: never;
    head?: never;
    patch?: never;
    trace?: never;
  };
  '/v1/runs/{id}/approvals/{approval_id}': {
    parameters: {
      query?: never;
      header?: never;
      path?: never;
      cookie?: never;
    };
    get?: never;
    put?: never;
    /** Approve (optionally with edited arguments) or deny a pending tool call */
    post: {
      parameters: {
        query?: never;
        header?: never;
        path: {
          id: string;
          approval_id: string;
        };
        cookie?: never;
      };
      requestBody: {
        content: {
          'application/json': {
            /** @enum {string} */
            decision: 'approve' | 'deny';
            arguments?: unknown;
            reason?: string;
          };
        };
      };
      responses: {
        /** @description The run */
        200: {
          headers: {
            [name: string]: unknown;
          };
          content: {
            'application/json': components['schemas']['Run'];
          };
        };
        /** @description Invalid request */
        400: {
          headers: {
            [name: string]: unknown;
          };
          content: {
            'application/problem+json': components['schemas']['Problem'];
          };
        };
        /** @description Missing or invalid API key */
        401: {
          headers: {
            [name: string]: unknown;
          };
          content: {
            'application/problem+json': components['schemas']['Problem'];
          };
        };
        /** @description No such run (or not yours) */
        404: {
          headers: {
            [name: string]: unknown;
          };
          content: {
            'application/problem+json': components['schemas']['Problem'];
          };
        };
        /** @description Not possible in the run’s current state */
        409: {
          headers: {
            [name: string]: unknown;
          };
          content: {
            'application/problem+json': components['schemas']['Problem'];
          };
        };
        /** @description The database cannot be reached right now (`store_unavailable`): try again after `Retry-After` */
        503: {
          headers: {
            [name: string]: unknown;
          };
          content: {
            'application/problem+json': components['schemas']['Problem'];
          };
        };
      };
    };
    delete?: never;
    options?: never;
    head?: never;
    patch?: never;
    trace?: never;
  };
  '/v1/runs/{a}/compare/{b}': {
    parameters: {
      query?: never;
      header?: never;
      path?: never;
      cookie?: never;
    };
    /** Compare two runs step by step: requests, assistant text, tool calls, final answer, status, tokens, cost, latency */
    get: {
      parameters: {
        query?: never;
        header?: never;
        path: {
          a: string;
          b: string;
        };
        cookie?: never;
      };
      requestBody?: never;
      responses: {
        /** @description The comparison, aligned by step number */
        200: {
          headers: {
            [name: string]: unknown;
          };
          content: {
            'application/json': components['schemas']['RunComparison'];
          };
        };
        /** @description Invalid request */
        400: {
          headers: {
            [name: string]: unknown;
          };
          content: {
            'application/problem+json': components['schemas']['Problem'];
          };
        };
        /** @description Missing or invalid API key */
        401: {
          headers: {
            [name: string]: unknown;
          };
          content: {
            'application/problem+json': components['schemas']['Problem'];
          };
        };
        /** @description No such run (or not yours) */
        404: {
          headers: {
            [name: string]: unknown;
          };
          content: {
            'application/problem+json': components['schemas']['Problem'];
          };
        };
        /** @description The database cannot be reached right now (`store_unavailable`): try again after `Retry-After` */
        503: {
          headers: {
            [name: string]: unknown;
          };
          content: {
            'application/problem+json': components['schemas']['Problem'];
          };
        };
      };
    };
    put?: never;
    post?: never;
    delete?: never;
    options?: never;
    head?: never;
    patch?: never;
    trace?: never;
  };
  '/v1/runs/{id}/rerun': {
    parameters: {
      query?: never;
      header?: never;
      path?: never;
      cookie?: never;
    };
    get?: never;
    put?: never;
    /** Rerun a run from one of its steps, in a new session forked there (the original is untouched) */
    post: {
      parameters: {
        query?: never;
        header?: never;
        path: {
          id: string;
        };
        cookie?: never;
      };
      requestBody: {
        content: {
          'application/json': components['schemas']['RerunRequest'];
        };
      };
      responses: {
        /** @description The rerun, queued; its session is a fork of the source at the step */
        201: {
          headers: {
            [name: string]: unknown;
          };
          content: {
            'application/json': components['schemas']['Run'];
          };
        };
        /** @description Invalid request */
        400: {
          headers: {
            [name: string]: unknown;
          };
          content: {
            'application/problem+json': components['schemas']['Problem'];
          };
        };
        /** @description Missing or invalid API key */
        401: {
          headers: {
            [name: string]: unknown;
          };
          content: {
            'application/problem+json': components['schemas']['Problem'];
          };
        };
        /** @description No such run (or not yours) */
        404: {
          headers: {
            [name: string]: unknown;
          };
          content: {
            'application/problem+json': components['schemas']['Problem'];
          };
        };
        /** @description The rerun cannot be made (no such step, agent, tool or model) */
        422: {
          headers: {
            [name: string]: unknown;
          };
          content: {
            'application/problem+json': components['schemas']['Problem'];
          };
        };
        /** @description The database cannot be reached right now (`store_unavailable`): try again after `Retry-After` */
        503: {
          headers: {
            [name: string]: unknown;
          };
          content: {
            'application/problem+json': components['schemas']['Problem'];
          };
        };
      };
    };
    delete?: never;
    options?: never;
    head?: never;
    patch?: never;
    trace?: never;
  };
  '/v1/runs': {
    parameters: {
      query?: never;
      header?: never;
      path?: never;
      cookie?: never;
    };
    /** The tenant's runs, oldest first: by lineage (rerun_of), agent, status, creation time */
    get: {
      parameters: {
        query?: {
          /** @description The `next_cursor` of the previous page */
          cursor?: string;
          /** @description Deprecated: the older name of `cursor` */
          after?: string;
          limit?: number;
          /** @description Only the reruns of this run */
          rerun_of?: string;
          /** @description `name` or `name@version` */
          agent?: string;
          /** @description Comma-separated statuses (queued, running, waiting_approval, waiting_for_user, sleeping, waiting_for_signal, waiting_for_quota, paused, completed, failed, cancelled, timed_out) */
          status?: string;
          /** @description ISO 8601, inclusive */
          created_from?: string;
          /** @description ISO 8601, exclusive */
          created_to?: string;
        };
        header?: never;
        path?: never;
        cookie?: never;
      };
      requestBody?: never;
      responses: {
        /** @description A page of runs */
        200: {
          headers: {
            [name: string]: unknown;
          };
          content: {
            'application/json': {
              data: components['schemas']['Run'][];
              next_cursor: string | null;
            };
          };
        };
        /** @description Invalid request */
        400: {
          headers: {
            [name: string]: unknown;
          };
          content: {
            'application/problem+json': components['schemas']['Problem'];
          };
        };
        /** @description Missing or invalid API key */
        401: {
          headers: {
            [name: string]: unknown;
          };
          content: {
            'application/problem+json': components['schemas']['Problem'];
          };
        };
        /** @description No such run (or not yours) */
        404: {
          headers: {
            [name: string]: unknown;
          };
          content: {
            'application/problem+json': components['schemas']['Problem'];
          };
        };
        /** @description The database cannot be reached right now (`store_unavailable`): try again after `Retry-After` */
        503: {
          headers: {
            [name: string]: unknown;
          };
          content: {
            'application/problem+json': components['schemas']['Problem'];
          };
        };
      };
    };
    put?: never;
    post?: never;
    delete?: never;
    options?: never;
    head?: never;
    patch?: never;
    trace?: never;
  };
  '/v1/reruns': {
    parameters: {
      query?: never;
      header?: never;
      path?: never;
      cookie?: never;
    };
    get?: never;
    put?: never;
    /** Rerun every run a filter matches, the same way, as one tracked batch with a concurrency limit */
    post: {
      parameters: {
        query?: never;
        header?: never;
        path?: never;
        cookie?: never;
      };
      requestBody: {
        content: {
          'application/json': components['schemas']['BulkRerunRequest'];
        };
      };
      responses: {
        /** @description The batch, running */
        201: {
          headers: {
            [name: string]: unknown;
          };
          content: {
            'application/json': components['schemas']['RerunBatch'];
          };
        };
        /** @description Invalid request */
        400: {
          headers: {
            [name: string]: unknown;
          };
          content: {
            'application/problem+json': components['schemas']['Problem'];
          };
        };
        /** @description Missing or invalid API key */
        401: {
          headers: {
            [name: string]: unknown;
          };
          content: {
            'application/problem+json': components['schemas']['Problem'];
          };
        };
        /** @description No such run (or not yours) */
        404: {
          headers: {
            [name: string]: unknown;
          };
          content: {
            'application/problem+json': components['schemas']['Problem'];
          };
        };
        /** @description The database cannot be reached right now (`store_unavailable`): try again after `Retry-After` */
        503: {
          headers: {
            [name: string]: unknown;
          };
          content: {
            'application/problem+json': components['schemas']['Problem'];
          };
        };
      };
    };
    delete?: never;
    options?: never;
    head?: never;
    patch?: never;
    trace?: never;
  };
  '/v1/reruns/{id}': {
    parameters: {
      query?: never;
      header?: never;
      path?: never;
      cookie?: never;
    };
    /** A bulk rerun and how far it is */
    get: {
      parameters: {
        query?: never;
        header?: never;
        path: {
          id: string;
        };
        cookie?: never;
      };
      requestBody?: never;
      responses: {
        /** @description The batch */
        200: {
          headers: {
            [name: string]: unknown;
          };
          content: {
            'application/json': components['schemas']['RerunBatch'];
          };
        };
        /** @description Invalid request */
        400: {
          headers: {
            [name: string]: unknown;
          };
          content: {
            'application/problem+json': components['schemas']['Problem'];
          };
        };
        /** @description Missing or invalid API key */
        401: {
          headers: {
            [name: string]: unknown;
          };
          content: {
            'application/problem+json': components['schemas']['Problem'];
          };
        };
        /** @description No such rerun batch (or not yours) */
        404: {
          headers: {
            [name: string]: unknown;
          };
          content: {
            'application/problem+json': components['schemas']['Problem'];
          };
        };
        /** @description The database cannot be reached right now (`store_unavailable`): try again after `Retry-After` */
        503: {
          headers: {
            [name: string]: unknown;
          };
          content: {
            'application/problem+json': components['schemas']['Problem'];
          };
        };
      };
    };
    put?: never;
    post?: never;
    delete?: never;
    options?: never;
    head?: never;
    patch?: never;
    trace?: never;
  };
  '/v1/reruns/{id}/items': {
    parameters: {
      query?: never;
      header?: never;
      path?: never;
      cookie?: never;
    };
    /** A bulk rerun's items: each source run, its rerun and how it ended */
    get: {
      parameters: {
        query?: {
          /** @description The `next_cursor` of the previous page */
          cursor?: string;
          /** @description Deprecated: the older name of `cursor` */
          after?: string;
          limit?: number;
        };
        header?: never;
        path: {
          id: string;
        };
        cookie?: never;
      };
      requestBody?: never;
      responses: {
        /** @description A page of items */
        200: {
          headers: {
            [name: string]: unknown;
          };
          content: {
            'application/json': {
              data: {
                id: string;
                position: number;
                source_run_id: string;
                run_id: string | null;
                /** @enum {string} */
                status: 'pending' | 'running' | 'done' | 'failed';
                run_status: string | null;
                error: {
                  [key: string]: unknown;
                } | null;
              }[];
              next_cursor: string | null;
            };
          };
        };
        /** @description Invalid request */
        400: {
          headers: {
            [name: string]: unknown;
          };
          content: {
            'application/problem+json': components['schemas']['Problem'];
          };
        };
        /** @description Missing or invalid API key */
        401: {
          headers: {
            [name: string]: unknown;
          };
          content: {
            'application/problem+json': components['schemas']['Problem'];
          };
        };
        /** @description No such rerun batch (or not yours) */
        404: {
          headers: {
            [name: string]: unknown;
          };
          content: {
            'application/problem+json': components['schemas']['Problem'];
          };
        };
        /** @description The database cannot be reached right now (`store_unavailable`): try again after `Retry-After` */
        503: {
          headers: {
            [name: string]: unknown;
          };
          content: {
            'application/problem+json': components['schemas']['Problem'];
          };
        };
      };
    };
    put?: never;
    post?: never;
    delete?: never;
    options?: never;
    head?: never;
    patch?: never;
    trace?: never;
  };
  '/v1/datasets': {
    parameters: {
      query?: never;
      header?: never;
      path?: never;
      cookie?: never;
    };
    /** The tenant's datasets */
    get: {
      parameters: {
        query?: {
          /** @description The `next_cursor` of the previous page */
          cursor?: string;
          /** @description Deprecated: the older name of `cursor` */
          after?: string;
          limit?: number;
        };
        header?: never;
        path?: never;
        cookie?: never;
      };
      requestBody?: never;
      responses: {
        /** @description A page of datasets */
        200: {
          headers: {
            [name: string]: unknown;
          };
          content: {
            'application/json': {
              data: components['schemas']['Dataset'][];
              next_cursor: string | null;
            };
          };
        };
        /** @description Invalid request */
        400: {
          headers: {
            [name: string]: unknown;
          };
          content: {
            'application/problem+json': components['schemas']['Problem'];
          };
        };
        /** @description Missing or invalid API key */
        401: {
          headers: {
            [name: string]: unknown;
          };
          content: {
            'application/problem+json': components['schemas']['Problem'];
          };
        };
        /** @description No such dataset (or not yours) */
        404: {
          headers: {
            [name: string]: unknown;
          };
          content: {
            'application/problem+json': components['schemas']['Problem'];
          };
        };
        /** @description The database cannot be reached right now (`store_unavailable`): try again after `Retry-After` */
        503: {
          headers: {
            [name: string]: unknown;
          };
          content: {
            'application/problem+json': components['schemas']['Problem'];
          };
        };
      };
    };
    put?: never;
    /** A dataset from the tenant's ended runs (a list, or a filter): frozen copies of what they were asked and did */
    post: {
      parameters: {
        query?: never;
        header?: never;
        path?: never;
        cookie?: never;
      };
      requestBody: {
        content: {
          'application/json': components['schemas']['DatasetRequest'];
        };
      };
      responses: {
        /** @description The dataset */
        201: {
          headers: {
            [name: string]: unknown;
          };
          content: {
            'application/json': components['schemas']['Dataset'];
          };
        };
        /** @description Invalid request */
        400: {
          headers: {
            [name: string]: unknown;
          };
          content: {
            'application/problem+json': components['schemas']['Problem'];
          };
        };
        /** @description Missing or invalid API key */
        401: {
          headers: {
            [name: string]: unknown;
          };
          content: {
            'application/problem+json': components['schemas']['Problem'];
          };
        };
        /** @description No such run (or not yours) */
        404: {
          headers: {
            [name: string]: unknown;
          };
          content: {
            'application/problem+json': components['schemas']['Problem'];
          };
        };
        /** @description The database cannot be reached right now (`store_unavailable`): try again after `Retry-After` */
        503: {
          headers: {
            [name: string]: unknown;
          };
          content: {
            'application/problem+json': components['schemas']['Problem'];
          };
        };
      };
    };
    delete?: never;
    options?: never;
    head?: never;
    patch?: never;
    trace?: never;
  };
  '/v1/datasets/{id}': {
    parameters: {
      query?: never;
      header?: never;
      path?: never;
      cookie?: never;
    };
    /** Get a dataset */
    get: {
      parameters: {
        query?: never;
        header?: never;
        path: {
          id: string;
        };
        cookie?: never;
      };
      requestBody?: never;
      responses: {
        /** @description The dataset */
        200: {
          headers: {
            [name: string]: unknown;
          };
          content: {
            'application/json': components['schemas']['Dataset'];
          };
        };
        /** @description Invalid request */
        400: {
          headers: {
            [name: string]: unknown;
          };
          content: {
            'application/problem+json': components['schemas']['Problem'];
          };
        };
        /** @description Missing or invalid API key */
        401: {
          headers: {
            [name: string]: unknown;
          };
          content: {
            'application/problem+json': components['schemas']['Problem'];
          };
        };
        /** @description No such dataset (or not yours) */
        404: {
          headers: {
            [name: string]: unknown;
          };
          content: {
            'application/problem+json': components['schemas']['Problem'];
          };
        };
        /** @description The database cannot be reached right now (`store_unavailable`): try again after `Retry-After` */
        503: {
          headers: {
            [name: string]: unknown;
          };
          content: {
            'application/problem+json': components['schemas']['Problem'];
          };
        };
      };
    };
    put?: never;
    post?: never;
    /** Delete a dataset and its items (experiments run on it keep their results) */
    delete: {
      parameters: {
        query?: never;
        header?: never;
        path: {
          id: string;
        };
        cookie?: never;
      };
      requestBody?: never;
      responses: {
        /** @description Deleted */
        204: {
          headers: {
            [name: string]: unknown;
          };
          content?: never;
        };
        /** @description Invalid request */
        400: {
          headers: {
            [name: string]: unknown;
          };
          content: {
            'application/problem+json': components['schemas']['Problem'];
          };
        };
        /** @description Missing or invalid API key */
        401: {
          headers: {
            [name: string]: unknown;
          };
          content: {
            'application/problem+json': components['schemas']['Problem'];
          };
        };
        /** @description No such dataset (or not yours) */
        404: {
          headers: {
            [name: string]: unknown;
          };
          content: {
            'application/problem+json': components['schemas']['Problem'];
          };
        };
        /** @description The database cannot be reached right now (`store_unavailable`): try again after `Retry-After` */
        503: {
          headers: {
            [name: string]: unknown;
          };
          content: {
            'application/problem+json': components['schemas']['Problem'];
          };
        };
      };
    };
    options?: never;
    head?: never;
    patch?: never;
    trace?: never;
  };
  '/v1/datasets/{id}/items': {
    parameters: {
      query?: never;
      header?: never;
      path?: never;
      cookie?: never;
    };
    /** A dataset's items, in order */
    get: {
      parameters: {
        query?: {
          /** @description The `next_cursor` of the previous page */
          cursor?: string;
          /** @description Deprecated: the older name of `cursor` */
          after?: string;
          limit?: number;
        };
        header?: never;
        path: {
          id: string;
        };
        cookie?: never;
      };
      requestBody?: never;
      responses: {
        /** @description A page of items */
        200: {
          headers: {
            [name: string]: unknown;
          };
          content: {
            'application/json': {
              data: components['schemas']['DatasetItem'][];
              next_cursor: string | null;
            };
          };
        };
        /** @description Invalid request */
        400: {
          headers: {
            [name: string]: unknown;
          };
          content: {
            'application/problem+json': components['schemas']['Problem'];
          };
        };
        /** @description Missing or invalid API key */
        401: {
          headers: {
            [name: string]: unknown;
          };
          content: {
            'application/problem+json': components['schemas']['Problem'];
          };
        };
        /** @description No such dataset (or not yours) */
        404: {
          headers: {
            [name: string]: unknown;
          };
          content: {
            'application/problem+json': components['schemas']['Problem'];
          };
        };
        /** @description The database cannot be reached right now (`store_unavailable`): try again after `Retry-After` */
        503: {
          headers: {
            [name: string]: unknown;
          };
          content: {
            'application/problem+json': components['schemas']['Problem'];
          };
        };
      };
    };
    put?: never;
    post?: never;
    delete?: never;
    options?: never;
    head?: never;
    patch?: never;
    trace?: never;
  };
  '/v1/experiments': {
    parameters: {
      query?: never;
      header?: never;
      path?: never;
      cookie?: never;
    };
    /** The tenant's experiments */
    get: {
      parameters: {
        query?: {
          /** @description The `next_cursor` of the previous page */
          cursor?: string;
          /** @description Deprecated: the older name of `cursor` */
          after?: string;
          limit?: number;
        };
        header?: never;
        path?: never;
        cookie?: never;
      };
      requestBody?: never;
      responses: {
        /** @description A page */
        200: {
          headers: {
            [name: string]: unknown;
          };
          content: {
            'application/json': {
              data: components['schemas']['Experiment'][];
              next_cursor: string | null;
            };
          };
        };
        /** @description Invalid request */
        400: {
          headers: {
            [name: string]: unknown;
          };
          content: {
            'application/problem+json': components['schemas']['Problem'];
          };
        };
        /** @description Missing or invalid API key */
        401: {
          headers: {
            [name: string]: unknown;
          };
          content: {
            'application/problem+json': components['schemas']['Problem'];
          };
        };
        /** @description No such experiment (or not yours) */
        404: {
          headers: {
            [name: string]: unknown;
          };
          content: {
            'application/problem+json': components['schemas']['Problem'];
          };
        };
        /** @description The database cannot be reached right now (`store_unavailable`): try again after `Retry-After` */
        503: {
          headers: {
            [name: string]: unknown;
          };
          content: {
            'application/problem+json': components['schemas']['Problem'];
          };
        };
      };
    };
    put?: never;
    /** Run a dataset against candidates and a baseline (step replay or full reruns), each item once */
    post: {
      parameters: {
        query?: never;
        header?: never;
        path?: never;
        cookie?: never;
      };
      requestBody: {
        content: {
          'application/json': components['schemas']['ExperimentRequest'];
        };
      };
      responses: {
        /** @description The experiment, running */
        201: {
          headers: {
            [name: string]: unknown;
          };
          content: {
            'application/json': components['schemas']['Experiment'];
          };
        };
        /** @description Invalid request */
        400: {
          headers: {
            [name: string]: unknown;
          };
          content: {
            'application/problem+json': components['schemas']['Problem'];
          };
        };
        /** @description Missing or invalid API key */
        401: {
          headers: {
            [name: string]: unknown;
          };
          content: {
            'application/problem+json': components['schemas']['Problem'];
          };
        };
        /** @description No such dataset (or not yours) */
        404: {
          headers: {
            [name: string]: unknown;
          };
          content: {
            'application/problem+json': components['schemas']['Problem'];
          };
        };
        /** @description The database cannot be reached right now (`store_unavailable`): try again after `Retry-After` */
        503: {
          headers: {
            [name: string]: unknown;
          };
          content: {
            'application/problem+json': components['schemas']['Problem'];
          };
        };
      };
    };
    delete?: never;
    options?: never;
    head?: never;
    patch?: never;
    trace?: never;
  };
  '/v1/experiments/{id}': {
    parameters: {
      query?: never;
      header?: never;
      path?: never;
      cookie?: never;
    };
    /** Get an experiment and how far it is */
    get: {
      parameters: {
        query?: never;
        header?: never;
        path: {
          id: string;
        };
        cookie?: never;
      };
      requestBody?: never;
      responses: {
        /** @description The experiment */
        200: {
          headers: {
            [name: string]: unknown;
          };
          content: {
            'application/json': components['schemas']['Experiment'];
          };
        };
        /** @description Invalid request */
        400: {
          headers: {
            [name: string]: unknown;
          };
          content: {
            'application/problem+json': components['schemas']['Problem'];
          };
        };
        /** @description Missing or invalid API key */
        401: {
          headers: {
            [name: string]: unknown;
          };
          content: {
            'application/problem+json': components['schemas']['Problem'];
          };
        };
        /** @description No such experiment (or not yours) */
        404: {
          headers: {
            [name: string]: unknown;
          };
          content: {
            'application/problem+json': components['schemas']['Problem'];
          };
        };
        /** @description The database cannot be reached right now (`store_unavailable`): try again after `Retry-After` */
        503: {
          headers: {
            [name: string]: unknown;
          };
          content: {
            'application/problem+json': components['schemas']['Problem'];
          };
        };
      };
    };
    put?: never;
    post?: never;
    delete?: never;
    options?: never;
    head?: never;
    patch?: never;
    trace?: never;
  };
  '/v1/experiments/{id}/results': {
    parameters: {
      query?: never;
      header?: never;
      path?: never;
      cookie?: never;
    };
    /** Results per candidate: mean scores, metrics, the difference to the baseline, regressions worst first */
    get: {
      parameters: {
        query?: never;
        header?: never;
        path: {
          id: string;
        };
        cookie?: never;
      };
      requestBody?: never;
      responses: {
        /** @description The results so far */
        200: {
          headers: {
            [name: string]: unknown;
          };
          content: {
            'application/json': components['schemas']['ExperimentResults'];
          };
        };
        /** @description Invalid request */
        400: {
          headers: {
            [name: string]: unknown;
          };
          content: {
            'application/problem+json': components['schemas']['Problem'];
          };
        };
        /** @description Missing or invalid API key */
        401: {
          headers: {
            [name: string]: unknown;
          };
          content: {
            'application/problem+json': components['schemas']['Problem'];
          };
        };
        /** @description No such experiment (or not yours) */
        404: {
          headers: {
            [name: string]: unknown;
          };
          content: {
            'application/problem+json': components['schemas']['Problem'];
          };
        };
        /** @description The database cannot be reached right now (`store_unavailable`): try again after `Retry-After` */
        503: {
          headers: {
            [name: string]: unknown;
          };
          content: {
            'application/problem+json': components['schemas']['Problem'];
          };
        };
      };
    };
    put?: never;
    post?: never;
    delete?: never;
    options?: never;
    head?: never;
    patch?: never;
    trace?: never;
  };
  '/v1/experiments/{id}/items': {
    parameters: {
      query?: never;
      header?: never;
      path?: never;
      cookie?: never;
    };
    /** An experiment's items: one per dataset item and candidate, with its scores and result */
    get: {
      parameters: {
        query?: {
          /** @description The `next_cursor` of the previous page */
          cursor?: string;
          /** @description Deprecated: the older name of `cursor` */
          after?: string;
          limit?: number;
        };
        header?: never;
        path: {
          id: string;
        };
        cookie?: never;
      };
      requestBody?: never;
      responses: {
        /** @description A page */
        200: {
          headers: {
            [name: string]: unknown;
          };
          content: {
            'application/json': {
              data: components['schemas']['ExperimentItem'][];
              next_cursor: string | null;
            };
          };
        };
        /** @description Invalid request */
        400: {
          headers: {
            [name: string]: unknown;
          };
          content: {
            'application/problem+json': components['schemas']['Problem'];
          };
        };
        /** @description Missing or invalid API key */
        401: {
          headers: {
            [name: string]: unknown;
          };
          content: {
            'application/problem+json': components['schemas']['Problem'];
          };
        };
        /** @description No such experiment (or not yours) */
        404: {
          headers: {
            [name: string]: unknown;
          };
          content: {
            'application/problem+json': components['schemas']['Problem'];
          };
        };
        /** @description The database cannot be reached right now (`store_unavailable`): try again after `Retry-After` */
        503: {
          headers: {
            [name: string]: unknown;
          };
          content: {
            'application/problem+json': components['schemas']['Problem'];
          };
        };
      };
    };
    put?: never;
    post?: never;
    delete?: never;
    options?: never;
    head?: never;
    patch?: never;
    trace?: never;
  };
  '/v1/experiments/{id}/items/{item_id}/scores': {
    parameters: {
      query?: never;
      header?: never;
      path?: never;
      cookie?: never;
    };
    get?: never;
    put?: never;
    /** A late score (a person's rating): merged into the item's scores */
    post: {
      parameters: {
        query?: never;
        header?: never;
        path: {
          id: string;
          item_id: string;
        };
        cookie?: never;
      };
      requestBody: {
        content: {
          'application/json': {
            /** @description From 0 to 1, by name; `score` is reserved */
            scores: {
              [key: string]: number;
            };
          };
        };
      };
      responses: {
        /** @description The item */
        200: {
          headers: {
            [name: string]: unknown;
          };
          content: {
            'application/json': components['schemas']['ExperimentItem'];
          };
        };
        /** @description Invalid request */
        400: {
          headers: {
            [name: string]: unknown;
          };
          content: {
            'application/problem+json': components['schemas']['Problem'];
          };
        };
        /** @description Missing or invalid API key */
        401: {
          headers: {
            [name: string]: unknown;
          };
          content: {
            'application/problem+json': components['schemas']['Problem'];
          };
        };
        /** @description No such experiment (or not yours) */
        404: {
          headers: {
            [name: string]: unknown;
          };
          content: {
            'application/problem+json': components['schemas']['Problem'];
          };
        };
        /** @description The database cannot be reached right now (`store_unavailable`): try again after `Retry-After` */
        503: {
          headers: {
            [name: string]: unknown;
          };
          content: {
            'application/problem+json': components['schemas']['Problem'];
          };
        };
      };
    };
    delete?: never;
    options?: never;
    head?: never;
    patch?: never;
    trace?: never;
  };
  '/v1/experiments/{id}/cancel': {
    parameters: {
      query?: never;
      header?: never;
      path?: never;
      cookie?: never;
    };
    get?: never;
    put?: never;
    /** Cancel: no pending item starts (running ones finish) */
    post: {
      parameters: {
        query?: never;
        header?: never;
        path: {
          id: string;
        };
        cookie?: never;
      };
      requestBody?: never;
      responses: {
        /** @description The experiment */
        200: {
          headers: {
            [name: string]: unknown;
          };
          content: {
            'application/json': components['schemas']['Experiment'];
          };
        };
        /** @description Invalid request */
        400: {
          headers: {
            [name: string]: unknown;
          };
          content: {
            'application/problem+json': components['schemas']['Problem'];
          };
        };
        /** @description Missing or invalid API key */
        401: {
          headers: {
            [name: string]: unknown;
          };
          content: {
            'application/problem+json': components['schemas']['Problem'];
          };
        };
        /** @description No such experiment (or not yours) */
        404: {
          headers: {
            [name: string]: unknown;
          };
          content: {
            'application/problem+json': components['schemas']['Problem'];
          };
        };
        /** @description The database cannot be reached right now (`store_unavailable`): try again after `Retry-After` */
        503: {
          headers: {
            [name: string]: unknown;
          };
          content: {
            'application/problem+json': components['schemas']['Problem'];
          };
        };
      };
    };
    delete?: never;
    options?: never;
    head?: never;
    patch?: never;
    trace?: never;
  };
  '/v1/runs/{id}/signals/{name}': {
    parameters: {
      query?: never;
      header?: never;
      path?: never;
      cookie?: never;
    };
    get?: never;
    put?: never;
    /** Deliver a signal to a run: it ends the run's wait for it (the payload becomes the tool's result), or is kept until the wait starts. Exactly once per run and name. */
    post: {
      parameters: {
        query?: never;
        header?: never;
        path: {
          id: string;
          name: string;
        };
        cookie?: never;
      };
      requestBody?: {
        content: {
          'application/json': unknown;
        };
      };
      responses: {
        /** @description Delivered */
        200: {
          headers: {
            [name: string]: unknown;
          };
          content: {
            'application/json': {
              signal: string;
              /** @description Whether a wait took it now (else it is kept for the wait) */
              consumed: boolean;
              run: components['schemas']['Run'];
            };
          };
        };
        /** @description The payload does not match the waiting call’s schema (validation), or is not JSON */
        400: {
          headers: {
            [name: string]: unknown;
          };
          content: {
            'application/problem+json': components['schemas']['Problem'];
          };
        };
        /** @description Missing or invalid API key */
        401: {
          headers: {
            [name: string]: unknown;
          };
          content: {
            'application/problem+json': components['schemas']['Problem'];
          };
        };
        /** @description No such run (or not yours) */
        404: {
          headers: {
            [name: string]: unknown;
          };
          content: {
            'application/problem+json': components['schemas']['Problem'];
          };
        };
        /** @description Already delivered (already_delivered), or the run has ended (illegal_transition) */
        409: {
          headers: {
            [name: string]: unknown;
          };
          content: {
            'application/problem+json': components['schemas']['Problem'];
          };
        };
      };
    };
    delete?: never;
    options?: never;
    head?: never;
    patch?: never;
    trace?: never;
  };
  '/v1/callbacks/{token}': {
    parameters: {
      query?: never;
      header?: never;
      path?: never;
      cookie?: never;
    };
    get?: never;
    put?: never;
    /** Deliver the signal a callback token stands for (no API key: the token authorizes). Exactly once. */
    post: {
      parameters: {
        query?: never;
        header?: never;
        path: {
          token: string;
        };
        cookie?: never;
      };
      requestBody?: {
        content: {
          'application/json': unknown;
        };
      };
      responses: {
        /** @description Delivered */
        200: {
          headers: {
            [name: string]: unknown;
          };
          content: {
            'application/json': {
              signal: string;
              consumed: boolean;
            };
          };
        };
        /** @description The payload does not match the waiting call’s schema, or is not JSON */
        400: {
          headers: {
            [name: string]: unknown;
          };
          content: {
            'application/problem+json': components['schemas']['Problem'];
          };
        };
        /** @description No such callback */
        404: {
          headers: {
            [name: string]: unknown;
          };
          content: {
            'application/problem+json': components['schemas']['Problem'];
          };
        };
        /** @description Already delivered, or the run has ended */
        409: {
          headers: {
            [name: string]: unknown;
          };
          content: {
            'application/problem+json': components['schemas']['Problem'];
          };
        };
        /** @description Too many requests from this address, or too many unknown tokens */
        429: {
          headers: {
            [name: string]: unknown;
          };
          content: {
            'application/problem+json': components['schemas']['Problem'];
          };
        };
      };
    };
    delete?: never;
    options?: never;
    head?: never;
    patch?: never;
    trace?: never;
  };
  '/v1/sessions/{id}/stream': {
    parameters: {
      query?: never;
      header?: never;
      path?: never;
      cookie?: never;
    };
    /** SSE stream of a session */
    get: {
      parameters: {
        query?: {
          /** @description Resume after this id (seq or seq.n); Last-Event-ID wins */
          after?: string;
        };
        header?: {
          'last-event-id'?: string;
        };
        path: {
          id: string;
        };
        cookie?: never;
      };
      requestBody?: never;
      responses: {
        /** @description text/event-stream: durable events (id = seq) and deltas (event `delta`, id = seq.n) */
        200: {
          headers: {
            [name: string]: unknown;
          };
          content: {
            'text/event-stream': string;
          };
        };
      };
    };
    put?: never;
    post?: never;
    delete?: never;
    options?: never;
    head?: never;
    patch?: never;
    trace?: never;
  };
  '/v1/runs/{id}/stream': {
    parameters: {
      query?: never;
      header?: never;
      path?: never;
      cookie?: never;
    };
    /** SSE stream of a run; ends with an `end` event */
    get: {
      parameters: {
        query?: {
          /** @description Resume after this id (seq or seq.n); Last-Event-ID wins */
          after?: string;
        };
        header?: {
          'last-event-id'?: string;
        };
        path: {
          id: string;
        };
        cookie?: never;
      };
      requestBody?: never;
      responses: {
        /** @description text/event-stream: durable events (id = seq) and deltas (event `delta`, id = seq.n) */
        200: {
          headers: {
            [name: string]: unknown;
          };
          content: {
            'text/event-stream': string;
          };
        };
      };
    };
    put?: never;
    post?: never;
    delete?: never;
    options?: never;
    head?: never;
    patch?: never;
    trace?: never;
  };
  '/v1/sessions/{id}/chat': {
    parameters: {
      query?: never;
      header?: never;
      path?: never;
      cookie?: never;
    };
    get?: never;
    put?: never;
    /**
     * AI SDK chat: send the next user message, or approval responses and ask_user answers, and stream the run
     * @description The body `DefaultChatTransport` sends (`{ id, messages, trigger, messageId }`); only the last message is read. A user message starts a run (409 if one is active); an assistant message carrying approval responses (`addToolApprovalResponse`) or ask_user outputs (`addToolOutput`) decides the waiting run. The response streams that run until it settles.
     */
    post: {
      parameters: {
        query?: never;
        header?: never;
        path: {
          id: string;
        };
        cookie?: never;
      };
      requestBody: {
        content: {
          'application/json': components['schemas']['ChatRequest'];
        };
      };
      responses: {
        /** @description An AI SDK UI message stream (SSE, `x-vercel-ai-ui-message-stream: v1`): `start` (messageId = run id), `start-step`/`finish-step` per step, text and reasoning parts, tool parts (`tool-input-*`, `tool-approval-request` with approvalId = tool call id, `tool-output-*`), then `finish` when the run settles (or `error` when it failed) */
        200: {
          headers: {
            [name: string]: unknown;
          };
          content: {
            'text/event-stream': string;
          };
        };
        /** @description Invalid request */
        400: {
          headers: {
            [name: string]: unknown;
          };
          content: {
            'application/problem+json': components['schemas']['Problem'];
          };
        };
        /** @description Missing or invalid API key */
        401: {
          headers: {
            [name: string]: unknown;
          };
          content: {
            'application/problem+json': components['schemas']['Problem'];
          };
        };
        /** @description No such session (or not yours) */
        404: {
          headers: {
            [name: string]: unknown;
          };
          content: {
            'application/problem+json': components['schemas']['Problem'];
          };
        };
        /** @description The session has an active run (a new message), or nothing waits for this answer */
        409: {
          headers: {
            [name: string]: unknown;
          };
          content: {
            'application/problem+json': components['schemas']['Problem'];
          };
        };
        /** @description The database cannot be reached right now (`store_unavailable`): try again after `Retry-After` */
        503: {
          headers: {
            [name: string]: unknown;
          };
          content: {
            'application/problem+json': components['schemas']['Problem'];
          };
        };
      };
    };
    delete?: never;
    options?: never;
    head?: never;
    patch?: never;
    trace?: never;
  };
  '/v1/sessions/{id}/chat/stream': {
    parameters: {
      query?: never;
      header?: never;
      path?: never;
      cookie?: never;
    };
    /** Resume the chat stream: the session's active run from its start, or 204 when no run is active */
    get: {
      parameters: {
        query?: never;
        header?: never;
        path: {
          id: string;
        };
        cookie?: never;
      };
      requestBody?: never;
      responses: {
        /** @description An AI SDK UI message stream (SSE, `x-vercel-ai-ui-message-stream: v1`): `start` (messageId = run id), `start-step`/`finish-step` per step, text and reasoning parts, tool parts (`tool-input-*`, `tool-approval-request` with approvalId = tool call id, `tool-output-*`), then `finish` when the run settles (or `error` when it failed) */
        200: {
          headers: {
            [name: string]: unknown;
          };
          content: {
            'text/event-stream': string;
          };
        };
        /** @description No run is active: nothing to resume */
        204: {
          headers: {
            [name: string]: unknown;
          };
          content?: never;
        };
        /** @description Missing or invalid API key */
        401: {
          headers: {
            [name: string]: unknown;
          };
          content: {
            'application/problem+json': components['schemas']['Problem'];
          };
        };
        /** @description No such session (or not yours) */
        404: {
          headers: {
            [name: string]: unknown;
          };
          content: {
            'application/problem+json': components['schemas']['Problem'];
          };
        };
      };
    };
    put?: never;
    post?: never;
    delete?: never;
    options?: never;
    head?: never;
    patch?: never;
    trace?: never;
  };
  '/v1/sessions/{id}/chat/{chat_id}/stream': {
    parameters: {
      query?: never;
      header?: never;
      path?: never;
      cookie?: never;
    };
    /** Resume the chat stream (DefaultChatTransport's default reconnect URL; the chat id is ignored) */
    get: {
      parameters: {
        query?: never;
        header?: never;
        path: {
          id: string;
          chat_id: string;
        };
        cookie?: never;
      };
      requestBody?: never;
      responses: {
        /** @description An AI SDK UI message stream (SSE, `x-vercel-ai-ui-message-stream: v1`): `start` (messageId = run id), `start-step`/`finish-step` per step, text and reasoning parts, tool parts (`tool-input-*`, `tool-approval-request` with approvalId = tool call id, `tool-output-*`), then `finish` when the run settles (or `error` when it failed) */
        200: {
          headers: {
            [name: string]: unknown;
          };
          content: {
            'text/event-stream': string;
          };
        };
        /** @description No run is active: nothing to resume */
        204: {
          headers: {
            [name: string]: unknown;
          };
          content?: never;
        };
        /** @description Missing or invalid API key */
        401: {
          headers: {
            [name: string]: unknown;
          };
          content: {
            'application/problem+json': components['schemas']['Problem'];
          };
        };
        /** @description No such session (or not yours) */
        404: {
          headers: {
            [name: string]: unknown;
          };
          content: {
            'application/problem+json': components['schemas']['Problem'];
          };
        };
      };
    };
    put?: never;
    post?: never;
    delete?: never;
    options?: never;
    head?: never;
    patch?: never;
    trace?: never;
  };
  '/v1/session-summaries': {
    parameters: {
      query?: never;
      header?: never;
      path?: never;
      cookie?: never;
    };
    /**
     * Sessions with their latest run, run count, tokens and cost; `q` searches title, id and metadata
     * @description Oldest first, paged like every list. With `q`, a request looks at up to 2000 sessions: a page may hold fewer than `limit` matches and still have a `next_cursor`.
     */
    get: {
      parameters: {
        query?: {
          /** @description Case-insensitive text to find in the title, id or metadata (as JSON) */
          q?: string;
          /** @description The `next_cursor` of the previous page */
          cursor?: string;
          /** @description Deprecated: the older name of `cursor` */
          after?: string;
          limit?: number;
          include_archived?: 'true' | 'false';
        };
        header?: never;
        path?: never;
        cookie?: never;
      };
      requestBody?: never;
      responses: {
        /** @description A page of session summaries */
        200: {
          headers: {
            [name: string]: unknown;
          };
          content: {
            'application/json': {
              data: components['schemas']['SessionSummary'][];
              next_cursor: string | null;
            };
          };
        };
        /** @description Invalid request */
        400: {
          headers: {
            [name: string]: unknown;
          };
          content: {
            'application/problem+json': components['schemas']['Problem'];
          };
        };
        /** @description Missing or invalid API key */
        401: {
          headers: {
            [name: string]: unknown;
          };
          content: {
            'application/problem+json': components['schemas']['Problem'];
          };
        };
        /** @description No such session (or not yours) */
        404: {
          headers: {
            [name: string]: unknown;
          };
          content: {
            'application/problem+json': components['schemas']['Problem'];
          };
        };
        /** @description The database cannot be reached right now (`store_unavailable`): try again after `Retry-After` */
        503: {
          headers: {
            [name: string]: unknown;
          };
          content: {
            'application/problem+json': components['schemas']['Problem'];
          };
        };
      };
    };
    put?: never;
    post?: never;
    delete?: never;
    options?: never;
    head?: never;
    patch?: never;
    trace?: never;
  };
  '/v1/inbox': {
    parameters: {
      query?: never;
      header?: never;
      path?: never;
      cookie?: never;
    };
    /** Every run of the caller's tenant that waits for a person: an approval or an answer, oldest first (cursor pagination) */
    get: {
      parameters: {
        query?: {
          /** @description The `next_cursor` of the previous page */
          cursor?: string;
          /** @description Deprecated: the older name of `cursor` */
          after?: string;
          limit?: number;
        };
        header?: never;
        path?: never;
        cookie?: never;
      };
      requestBody?: never;
      responses: {
        /** @description A page of waiting runs */
        200: {
          headers: {
            [name: string]: unknown;
          };
          content: {
            'application/json': {
              data: components['schemas']['InboxItem'][];
              next_cursor: string | null;
            };
          };
        };
        /** @description Invalid request */
        400: {
          headers: {
            [name: string]: unknown;
          };
          content: {
            'application/problem+json': components['schemas']['Problem'];
          };
        };
        /** @description Missing or invalid API key */
        401: {
          headers: {
            [name: string]: unknown;
          };
          content: {
            'application/problem+json': components['schemas']['Problem'];
          };
        };
        /** @description No such session (or not yours) */
        404: {
          headers: {
            [name: string]: unknown;
          };
          content: {
            'application/problem+json': components['schemas']['Problem'];
          };
        };
        /** @description The database cannot be reached right now (`store_unavailable`): try again after `Retry-After` */
        503: {
          headers: {
            [name: string]: unknown;
          };
          content: {
            'application/problem+json': components['schemas']['Problem'];
          };
        };
      };
    };
    put?: never;
    post?: never;
    delete?: never;
    options?: never;
    head?: never;
    patch?: never;
    trace?: never;
  };
  '/v1/sessions/{id}/replay-check': {
    parameters: {
      query?: never;
      header?: never;
      path?: never;
      cookie?: never;
    };
    /** The replay check: does the log alone explain every model request the session recorded? (as `keel replay --verify`) */
    get: {
      parameters: {
        query?: never;
        header?: never;
        path: {
          id: string;
        };
        cookie?: never;
      };
      requestBody?: never;
      responses: {
        /** @description The verdict */
        200: {
          headers: {
            [name: string]: unknown;
          };
          content: {
            'application/json': {
              ok: boolean;
              events: number;
              requests: number;
              mismatches: {
                seq: number;
                message_id: string;
                kind: string;
                detail: string;
              }[];
            };
          };
        };
        /** @description Invalid request */
        400: {
          headers: {
            [name: string]: unknown;
          };
          content: {
            'application/problem+json': components['schemas']['Problem'];
          };
        };
        /** @description Missing or invalid API key */
        401: {
          headers: {
            [name: string]: unknown;
          };
          content: {
            'application/problem+json': components['schemas']['Problem'];
          };
        };
        /** @description No such session (or not yours) */
        404: {
          headers: {
            [name: string]: unknown;
          };
          content: {
            'application/problem+json': components['schemas']['Problem'];
          };
        };
        /** @description The database cannot be reached right now (`store_unavailable`): try again after `Retry-After` */
        503: {
          headers: {
            [name: string]: unknown;
          };
          content: {
            'application/problem+json': components['schemas']['Problem'];
          };
        };
      };
    };
    put?: never;
    post?: never;
    delete?: never;
    options?: never;
    head?: never;
    patch?: never;
    trace?: never;
  };
}
export type webhooks = Record<string, never>;
export interface components {
  schemas: {
    Session: {
      id: string;
      title: string | null;
      metadata: {
        [key: string]: unknown;
      };
      agent: string | null;
      /** @description ISO 8601 */
      created_at: string;
      last_seq: number;
      leaf_id: string | null;
      origin: {
        session_id: string;
        entry_id: string;
      } | null;
      archived_at: string | null;
      /** @description When the session was erased: a tombstone (only listed with include_archived) */
      erased_at: string | null;
      /** @description When retention moved its log to the archive store (reads answer session_in_archive until POST /v1/sessions/{id}/restore); not archived_at */
      in_archive_at: string | null;
    };
    Problem: {
      type: string;
      title: string;
      status: number;
      detail: string;
      instance?: string;
    } & {
      [key: string]: unknown;
    };
    Tombstone: {
      id: string;
      tenant: string;
      erased_at: string;
      /** @description What the session consumed, kept for billing */
      totals: {
        runs: number;
        usage: {
          [key: string]: unknown;
        };
        cost: number;
      };
    };
    Run: {
      id: string;
      session_id: string;
      parent_run_id: string | null;
      child_run_ids: string[];
      /** @description For a rerun: the run it re-runs (its reruns: GET /v1/runs?rerun_of=) */
      rerun_of: string | null;
      /** @description For a rerun: its lineage (source session, run and step, agent, overrides, tool policies; docs/evals.md) */
      rerun: {
        of: {
          session_id: string;
          run_id: string;
          step: number;
        };
        agent: {
          name: string;
          version: string;
        };
        overrides: {
          [key: string]: unknown;
        } | null;
        tools: {
          [key: string]: unknown;
        };
        message_replaced: boolean;
      } | null;
      agent: {
        name: string;
        version: string;
      };
      agent_spec: {
        [key: string]: unknown;
      };
      /** @enum {string} */
      status:
        | 'queued'
        | 'running'
        | 'waiting_approval'
        | 'waiting_for_user'
        | 'sleeping'
        | 'waiting_for_signal'
        | 'waiting_for_quota'
        | 'paused'
        | 'completed'
        | 'failed'
        | 'cancelled'
        | 'timed_out';
      /** @description Queued behind the session's active run (an enqueued message): it starts when that run and the runs queued before it have ended; its turn is numbered then */
      queued_behind: boolean;
      trigger_message_id: string | null;
      turn: number | null;
      created_at: string;
      started_at: string | null;
      ended_at: string | null;
      attempt: number;
      usage: {
        [key: string]: unknown;
      };
      cost: number;
      error: {
        [key: string]: unknown;
      } | null;
      waiting: {
        /**
         * @description quota: waiting_for_quota, no pending call; expires_at is when it tries again (ADR-0043)
         * @enum {string}
         */
        kind: 'approval' | 'input' | 'sleep' | 'signal' | 'quota';
        requests: {
          approval_id: string;
          tool_call_id: string;
          tool: string;
          arguments?: unknown;
          /** @enum {string} */
          kind: 'approval' | 'input' | 'sleep' | 'signal';
          decided: boolean;
          /** @description A sleep: when it wakes */
          until?: string;
          /** @description A sleep: a steering message wakes it early */
          wake_on_steer?: boolean;
          /** @description A signal wait: the name to deliver (POST /v1/runs/{id}/signals/{name}) */
          signal?: string;
          /** @description A signal wait: the JSON Schema of the payload */
          schema?: unknown;
          /** @description A client tool call: its output comes by POST /v1/runs/{id}/tool-results */
          client_tool?: boolean;
          /** @description When this wait ends by itself */
          deadline?: string;
          /** @description What happens then: 'timed_out', 'wake', { deny } or { answer } */
          on_deadline?: unknown;
          /** @description An approval asked because the call started before a crash and its outcome is unknown: approve runs it again with this idempotency key, deny tells the model it was not run again */
          outcome_unknown?: {
            idempotency_key: string;
            started_at: string | null;
          };
        }[];
        /** @description The first deadline of what the run still waits for (a sleep: its wake-up) */
        expires_at: string | null;
        /** @description A quota wait: the limit that refused the next model call, and what was charged to it then */
        quota?: {
          /** @description tenant:<id> or key:<id> */
          scope: string;
          /** @description tokensPerDay, costPerDay, costPerMonth, concurrentRuns, or unavailable (the store did not answer) */
          limit: string;
          max: number;
          used: number;
          reserved: number;
        };
      } | null;
      lease: {
        owner: string;
        expires_at: string;
      } | null;
      cancel_requested: boolean;
      pause_requested: boolean;
      /** @description Where the run continues if it is interrupted: its last step boundary (steps done, and the session seq of the step end or turn end that recorded it) */
      resume_cursor: {
        step: number;
        seq: number;
      } | null;
    };
    Content:
      | string
      | (
          | {
              /** @enum {string} */
              type: 'text';
              text: string;
            }
          | {
              /** @enum {string} */
              type: 'file';
              media_type: string;
              /** @description base64, or an http(s) URL */
              data: string;
              filename?: string;
            }
        )[];
    ClientTool: {
      name: string;
      description?: string;
      /** @description The JSON Schema of the tool's arguments (an object schema) */
      parameters?: {
        [key: string]: unknown;
      };
    };
    Event: {
      id: string;
      session_id: string;
      seq: number;
      type: string;
      v: number;
      time: string;
      run_id?: string;
      turn?: number;
      step?: number;
      entry: boolean;
      parent_id?: string;
      data?: unknown;
    };
    ErasureResult: components['schemas']['Erasure'] & {
      /** @description The sessions it erased (not kept in the audit) */
      session_ids: string[];
      /** @description What the store did about physical copies, and what it cannot do */
      physical: string;
    };
    Erasure: {
      id: string;
      /** @enum {string} */
      scope: 'session' | 'tenant' | 'before';
      /** @description SHA-256 (hex) of `scope:target`: the audit keeps no target */
      target_hash: string;
      /** @description The API key id that asked, or 'operator' */
      by: string;
      at: string;
      /** @description What it removed, by kind */
      counts: {
        [key: string]: number;
      };
    };
    EraseRequest: {
      /** @enum {string} */
      scope: 'session' | 'tenant' | 'before';
      /** @description scope session: the session */
      session_id?: string;
      /** @description scope tenant: the tenant */
      tenant?: string;
      /** @description scope before: an ISO 8601 date; sessions idle since before it */
      before?: string;
      /** @description scope tenant: the tenant again; scope before: the date again (what is erased cannot be brought back) */
      confirm?: string;
    };
    ErasureFinding: {
      table: string;
      column: string;
      /** @description The row's key columns, `name=value` joined by `,` */
      row: string;
      needle: string;
      /** @description Why an erasure keeps it by design (tombstones): absent for a remnant */
      kept?: string;
    };
    VerifyRequest: {
      /** @description Ids that should be found nowhere but in tombstones */
      ids?: string[];
      /** @description Strings (e.g. a marker from erased content) that should be found nowhere */
      strings?: string[];
    };
    UsageReport: {
      /** @description ISO 8601, inclusive */
      from: string;
      /** @description ISO 8601, exclusive */
      to: string;
      group_by: ('tenant' | 'agent' | 'model' | 'day' | 'hour')[];
      /** @description One row per group, ordered by the keys in group_by order (a missing model last) */
      data: components['schemas']['UsageRow'][];
      totals: {
        /** @description Runs that ended in the group */
        runs: number;
        input_tokens: number;
        output_tokens: number;
        /** @description Input tokens served from the provider’s prompt cache (part of input_tokens) */
        cached_input_tokens: number;
        /** @description Output tokens spent on reasoning (part of output_tokens) */
        reasoning_tokens: number;
        /** @description US dollars, to the nano-dollar */
        cost: number;
      };
      /** @description Quotas against their use now, whatever the range (ADR-0043) */
      quota: {
        tenant: components['schemas']['QuotaReport'];
        key: components['schemas']['QuotaReport'] & unknown;
      };
    };
    UsageRow: {
      tenant?: string;
      agent?: string;
      /** @description provider:modelId as recorded when the run was created; null if its agent spec names none */
      model?: string | null;
      /** @description 2025-01-31 (UTC) */
      day?: string;
      /** @description 2025-01-31T12:00:00Z */
      hour?: string;
      /** @description Runs that ended in the group */
      runs: number;
      input_tokens: number;
      output_tokens: number;
      /** @description Input tokens served from the provider’s prompt cache (part of input_tokens) */
      cached_input_tokens: number;
      /** @description Output tokens spent on reasoning (part of output_tokens) */
      reasoning_tokens: number;
      /** @description US dollars, to the nano-dollar */
      cost: number;
    };
    /** @description The caller's tenant's quotas against their use now (null: none apply) */
    QuotaReport: {
      /** @description tenant:<id> or key:<id> */
      scope: string;
      /**
       * @description What happens to a run at a limit (waiting_for_quota, or failed with quota_exceeded)
       * @enum {string}
       */
      on_limit: 'wait' | 'fail';
      concurrent_runs?: {
        limit: number;
        /** @description Settled: the actual tokens or cost of calls made (runs started, for runs_per_minute; runs holding a slot, for concurrent_runs) */
        used: number;
        /** @description Reserved by model calls in flight (their estimate, until they settle) */
        reserved?: number;
        /** @description ISO 8601: when the period ends (the next UTC day or month; a minute from now for runs_per_minute) */
        resets_at: string | null;
      };
      runs_per_minute?: {
        limit: number;
        /** @description Settled: the actual tokens or cost of calls made (runs started, for runs_per_minute; runs holding a slot, for concurrent_runs) */
        used: number;
        /** @description Reserved by model calls in flight (their estimate, until they settle) */
        reserved?: number;
        /** @description ISO 8601: when the period ends (the next UTC day or month; a minute from now for runs_per_minute) */
        resets_at: string | null;
      };
      tokens_per_day?: {
        limit: number;
        /** @description Settled: the actual tokens or cost of calls made (runs started, for runs_per_minute; runs holding a slot, for concurrent_runs) */
        used: number;
        /** @description Reserved by model calls in flight (their estimate, until they settle) */
        reserved?: number;
        /** @description ISO 8601: when the period ends (the next UTC day or month; a minute from now for runs_per_minute) */
        resets_at: string | null;
      };
      cost_per_day?: {
        limit: number;
        /** @description Settled: the actual tokens or cost of calls made (runs started, for runs_per_minute; runs holding a slot, for concurrent_runs) */
        used: number;
        /** @description Reserved by model calls in flight (their estimate, until they settle) */
        reserved?: number;
        /** @description ISO 8601: when the period ends (the next UTC day or month; a minute from now for runs_per_minute) */
        resets_at: string | null;
      };
      cost_per_month?: {
        limit: number;
        /** @description Settled: the actual tokens or cost of calls made (runs started, for runs_per_minute; runs holding a slot, for concurrent_runs) */
        used: number;
        /** @description Reserved by model calls in flight (their estimate, until they settle) */
        reserved?: number;
        /** @description ISO 8601: when the period ends (the next UTC day or month; a minute from now for runs_per_minute) */
        resets_at: string | null;
      };
    } | null;
    Tenant: {
      id: string;
      name: string | null;
      /** @description Share of the workers' claims when tenants compete (fair dispatch) */
      weight: number;
      quotas: components['schemas']['Quotas'];
      created_at: string;
      updated_at: string;
    };
    Quotas: {
      /** @description Runs not terminal and not queued at once */
      concurrent_runs?: number;
      /** @description Runs created in any sliding minute */
      runs_per_minute?: number;
      /** @description Model tokens (input + output) in a UTC day */
      tokens_per_day?: number;
      /** @description Model cost (USD) in a UTC day */
      cost_per_day?: number;
      /** @description Model cost (USD) in a UTC calendar month */
      cost_per_month?: number;
      /**
       * @description At a limit a run waits (default) or fails
       * @enum {string}
       */
      on_limit?: 'wait' | 'fail';
    };
    TenantUpdate: {
      name?: string | null;
      /** @description Default 1 */
      weight?: number;
      quotas?: components['schemas']['Quotas'] & unknown;
    };
    ApiKey: {
      id: string;
      tenant: string;
      name: string | null;
      /** @description The first characters of the secret */
      prefix: string;
      /** @enum {string} */
      scope: 'tenant' | 'admin';
      rate_per_minute: number | null;
      quotas: components['schemas']['Quotas'] & (Record<string, never> | null);
      created_at: string;
      revoked_at: string | null;
    };
    ApiKeyRequest: {
      name?: string;
      rate_per_minute?: number;
      quotas?: components['schemas']['Quotas'];
    };
    CreatedWebhook: components['schemas']['Webhook'] & {
      /** @description The signing secret: shown here once, keep it to verify Keel-Signature */
      secret: string;
    };
    Webhook: {
      id: string;
      url: string;
      events: (
        | 'run.queued'
        | 'run.running'
        | 'run.waiting_approval'
        | 'run.waiting_for_user'
        | 'run.paused'
        | 'run.completed'
        | 'run.failed'
        | 'run.cancelled'
        | 'run.timed_out'
        | 'run.sleeping'
        | 'run.waiting_for_signal'
        | 'run.waiting_for_quota'
        | 'schedule.fired'
      )[];
      active: boolean;
      /** @description While a rotation’s overlap lasts: until when the replaced secret also signs deliveries */
      previous_secret_expires_at: string | null;
      created_at: string;
      updated_at: string;
    };
    WebhookDelivery: {
      /** @description The delivery id (the Keel-Delivery header and the body’s id): receivers dedupe by it */
      id: string;
      webhook_id: string;
      /** @enum {string} */
      event_type:
        | 'run.queued'
        | 'run.running'
        | 'run.waiting_approval'
        | 'run.waiting_for_user'
        | 'run.paused'
        | 'run.completed'
        | 'run.failed'
        | 'run.cancelled'
        | 'run.timed_out'
        | 'run.sleeping'
        | 'run.waiting_for_signal'
        | 'run.waiting_for_quota'
        | 'schedule.fired';
      /** @description The session event that caused it */
      event_id: string;
      /** @description That event’s session (erasing the session removes its deliveries) */
      session_id: string | null;
      /** @enum {string} */
      status: 'pending' | 'delivered' | 'failed';
      attempts: components['schemas']['WebhookAttempt'][];
      created_at: string;
      next_attempt_at: string | null;
      retry_until: string;
      delivered_at: string | null;
      last_error: string | null;
      last_status_code: number | null;
      /** @description The JSON body sent */
      payload: {
        [key: string]: unknown;
      };
    };
    WebhookAttempt: {
      n: number;
      started_at: string;
      duration_ms: number;
      /** @description The receiver's HTTP status; null when no response came */
      status_code: number | null;
      /** @description Why the attempt failed (HTTP 500, ECONNREFUSED, timeout…); null for a 2xx */
      error: string | null;
    };
    Schedule: {
      id: string;
      name: string | null;
      cron: {
        expression: string;
        timezone: string;
      } | null;
      interval: {
        seconds: number;
      } | null;
      message?: unknown;
      target:
        | {
            session_id: string;
          }
        | {
            new_session: {
              title?: string | null;
              metadata?: {
                [key: string]: unknown;
              };
            };
          };
      agent: string | null;
      /** @enum {string} */
      overlap: 'skip' | 'enqueue' | 'interrupt';
      /** @enum {string} */
      catch_up: 'once' | 'skip';
      paused: boolean;
      paused_at: string | null;
      /** @description Why Keel paused it by itself (its target session was archived or erased, its tenant erased); null when paused by request, or running */
      paused_reason: string | null;
      /** @description The next tick (null while paused) */
      next_fire_at: string | null;
      last_tick: string | null;
      last_run_id: string | null;
      created_at: string;
      updated_at: string;
    };
    CreateSchedule: {
      name?: string;
      cron?: {
        /** @description 5 fields (minute hour day-of-month month day-of-week), or 6 with seconds first */
        expression: string;
        /**
         * @description An IANA time zone, e.g. Europe/Paris
         * @default UTC
         */
        timezone: string;
      };
      interval?: {
        /** @description Whole seconds, at least 1 */
        seconds: number;
      };
      message: components['schemas']['Content'];
      target:
        | {
            session_id: string;
          }
        | {
            new_session: {
              title?: string;
              metadata?: {
                [key: string]: unknown;
              };
            };
          };
      agent?: string;
      /**
       * @description When the target session's previous run is still active at a tick (one-session targets only)
       * @default skip
       * @enum {string}
       */
      overlap: 'skip' | 'enqueue' | 'interrupt';
      /**
       * @description After downtime: the latest missed tick fires once, or none does
       * @default once
       * @enum {string}
       */
      catch_up: 'once' | 'skip';
    };
    ScheduleFire: {
      /** @description The time the schedule was due */
      tick: string;
      /** @description When it was fired (later than the tick after downtime) */
      fired_at: string;
      /** @enum {string} */
      outcome: 'fired' | 'skipped' | 'failed';
      reason: string | null;
      run_id: string | null;
      session_id: string | null;
    };
    RetentionPolicy: {
      tenant: string;
      agent: string | null;
      /** @description What the tenant set (null: nothing) */
      policy: {
        /** @description Days; null: never */
        archive_after_days?: number | null;
        /** @description Days; null: never */
        delete_after_days?: number | null;
      } | null;
      /** @description What applies, every source resolved (keel.config and this) */
      effective: {
        /** @description Days; null: never */
        archive_after_days: number | null;
        /** @description Days; null: never */
        delete_after_days: number | null;
      };
      updated_at: string | null;
    };
    RetentionPolicyUpdate: {
      /** @description The policy of this agent’s sessions (default: the tenant’s own) */
      agent?: string;
      /** @description Days; null: never */
      archive_after_days?: number | null;
      /** @description Days; null: never */
      delete_after_days?: number | null;
      /** @description Not available (ADR-0044): refused (invalid_retention_policy) */
      keep_runs?: number;
    };
    RetentionStatus: {
      policy: {
        /** @description Days; null: never */
        archive_after_days: number | null;
        /** @description Days; null: never */
        delete_after_days: number | null;
      };
      /** @description Whether an archive store is configured */
      archive_store: boolean;
      plan: components['schemas']['RetentionReport'];
    };
    RetentionReport: {
      dry_run: boolean;
      tenant: string | null;
      at: string;
      sessions: {
        archived: number;
        deleted: number;
        skipped: number;
        /** @description The first 1000 */
        archived_ids: string[];
        /** @description The first 1000 */
        deleted_ids: string[];
        errors: {
          session_id: string;
          message: string;
        }[];
      };
      tables: {
        [key: string]: {
          days: number | null;
          rows: number;
        };
      };
      duration_ms: number;
    };
    RetentionRun: {
      /** @default false */
      dry_run: boolean;
    };
    RestoredSession: {
      session_id: string;
      events: number;
    };
    RunComparison: {
      a: {
        id: string;
        sessionId: string;
        turn: number | null;
        agent: {
          name: string;
          version: string;
        };
        status: string;
        steps: number;
      };
      b: {
        id: string;
        sessionId: string;
        turn: number | null;
        agent: {
          name: string;
          version: string;
        };
        status: string;
        steps: number;
      };
      status: {
        a: string | null;
        b: string | null;
        equal: boolean;
      };
      tokens: {
        input: {
          a: number | null;
          b: number | null;
          equal: boolean;
        };
        output: {
          a: number | null;
          b: number | null;
          equal: boolean;
        };
      };
      cost: {
        a: number | null;
        b: number | null;
        equal: boolean;
      };
      latencyMs: {
        a: number | null;
        b: number | null;
        equal: boolean;
      };
      finalAnswer: {
        a: string | null;
        b: string | null;
        equal: boolean;
        parts: {
          /** @enum {string} */
          op: 'equal' | 'delete' | 'insert';
          text: string;
        }[];
      };
      /** @description When one run is a rerun of the other: the step it was rerun from (earlier steps are the source's alone and left out) */
      forkedAt: number | null;
      steps: {
        step: number;
        /** @enum {string} */
        presentIn: 'both' | 'a' | 'b';
        request: {
          provider: {
            a: string | null;
            b: string | null;
            equal: boolean;
          };
          modelId: {
            a: string | null;
            b: string | null;
            equal: boolean;
          };
          settings: {
            a: {
              [key: string]: unknown;
            } | null;
            b: {
              [key: string]: unknown;
            } | null;
            equal: boolean;
          };
          system: {
            hash: {
              a: string | null;
              b: string | null;
              equal: boolean;
            };
            diff: {
              a: string | null;
              b: string | null;
              equal: boolean;
              parts: {
                /** @enum {string} */
                op: 'equal' | 'delete' | 'insert';
                text: string;
              }[];
            } | null;
          };
          tools: {
            hash: {
              a: string | null;
              b: string | null;
              equal: boolean;
            };
            diff: {
              a: string | null;
              b: string | null;
              equal: boolean;
              parts: {
                /** @enum {string} */
                op: 'equal' | 'delete' | 'insert';
                text: string;
              }[];
            } | null;
            names: {
              a: string[] | null;
              b: string[] | null;
              equal: boolean;
            };
          };
          fingerprint: {
            a: string | null;
            b: string | null;
            equal: boolean;
          };
        } | null;
        text: {
          a: string | null;
          b: string | null;
          equal: boolean;
          parts: {
            /** @enum {string} */
            op: 'equal' | 'delete' | 'insert';
            text: string;
          }[];
        };
        toolCalls: {
          index: number;
          /** @enum {string} */
          presentIn: 'both' | 'a' | 'b';
          a: {
            toolCallId: string;
            name: string;
            arguments?: unknown;
            /** @description The tool output ({type, value} or an error); null without a result */
            result?: unknown;
            durationMs: number | null;
            /**
             * @description Where the result came from: the tool ran, or a rerun served the source's recorded result or a mock
             * @enum {string}
             */
            source: 'executed' | 'reused' | 'mocked';
          } | null;
          b: {
            toolCallId: string;
            name: string;
            arguments?: unknown;
            /** @description The tool output ({type, value} or an error); null without a result */
            result?: unknown;
            durationMs: number | null;
            /**
             * @description Where the result came from: the tool ran, or a rerun served the source's recorded result or a mock
             * @enum {string}
             */
            source: 'executed' | 'reused' | 'mocked';
          } | null;
          name: boolean;
          arguments: boolean;
          result: boolean;
          equal: boolean;
        }[];
        endReason: {
          a: string | null;
          b: string | null;
          equal: boolean;
        };
        tokens: {
          input: {
            a: number | null;
            b: number | null;
            equal: boolean;
          };
          output: {
            a: number | null;
            b: number | null;
            equal: boolean;
          };
        };
        cost: {
          a: number | null;
          b: number | null;
          equal: boolean;
        };
        latencyMs: {
          a: number | null;
          b: number | null;
          equal: boolean;
        };
      }[];
    };
    RerunRequest: {
      /** @description The source run's step to rerun from; default its first */
      from?: number;
      /** @description `name@version` (or `name`: its latest) of a registered agent; default the source run's */
      agent?: string;
      overrides?: components['schemas']['AgentOverrides'];
      message?: components['schemas']['Content'] & unknown;
      tools?: components['schemas']['ToolPolicies'];
      title?: string;
    };
    AgentOverrides: {
      system?: string;
      /** @description A model id, e.g. openai:gpt-4.1-mini */
      model?: string;
      settings?: {
        maxOutputTokens?: number;
        temperature?: number;
        topP?: number;
        topK?: number;
        stopSequences?: string[];
        seed?: number;
        /** @enum {string} */
        reasoning?: 'provider-default' | 'none' | 'minimal' | 'low' | 'medium' | 'high' | 'xhigh' | 'max';
      };
      /** @description Only these of the agent's tools */
      tools?: string[];
      max_steps?: number;
    };
    /** @description Default: read-only tools execute, the others reuse the recorded result; an effectful call without one fails the rerun */
    ToolPolicies:
      | ('reuse' | 'execute')
      | {
          /** @enum {string} */
          default?: 'reuse' | 'execute';
          by_tool?: {
            [key: string]:
              | ('reuse' | 'execute')
              | {
                  /** @enum {string} */
                  mode: 'reuse';
                  /**
                   * @description A call with no recorded result of the same arguments: run it, fail the rerun, or serve a recorded one
                   * @enum {string}
                   */
                  on_mismatch?: 'execute' | 'fail' | 'serve';
                }
              | {
                  /** @enum {string} */
                  mode: 'execute';
                }
              | {
                  /** @enum {string} */
                  mode: 'mock';
                  /** @description The result every call of the tool gets */
                  value?: unknown;
                };
          };
        };
    RerunBatch: {
      id: string;
      /** @enum {string} */
      status: 'running' | 'completed' | 'cancelled';
      filter: {
        [key: string]: unknown;
      };
      rerun: {
        [key: string]: unknown;
      };
      concurrency: number;
      counts: {
        pending: number;
        running: number;
        done: number;
        failed: number;
      };
      created_at: string;
      ended_at: string | null;
    };
    BulkRerunRequest: {
      filter: components['schemas']['RunFilter'];
      /** @description How each run is rerun */
      rerun?: {
        /** @description The source run's step to rerun from; default its first */
        from?: number;
        /** @description `name@version` (or `name`: its latest) of a registered agent; default the source run's */
        agent?: string;
        overrides?: components['schemas']['AgentOverrides'];
        tools?: components['schemas']['ToolPolicies'];
      };
      /** @description Reruns at once (default 4) */
      concurrency?: number;
    };
    RunFilter: {
      /** @description `name` or `name@version` */
      agent?: string;
      status?: (
        | 'queued'
        | 'running'
        | 'waiting_approval'
        | 'waiting_for_user'
        | 'sleeping'
        | 'waiting_for_signal'
        | 'waiting_for_quota'
        | 'paused'
        | 'completed'
        | 'failed'
        | 'cancelled'
        | 'timed_out'
      )[];
      /**
       * Format: date-time
       * @description ISO 8601, inclusive
       */
      created_from?: string;
      /**
       * Format: date-time
       * @description ISO 8601, exclusive
       */
      created_to?: string;
      limit?: number;
    };
    Dataset: {
      id: string;
      name: string;
      /** @description The runs or the filter it was made from */
      source: {
        [key: string]: unknown;
      };
      item_count: number;
      created_at: string;
    };
    DatasetRequest: {
      name: string;
      runs?: (
        | string
        | {
            run_id: string;
            /** @description What a person expects (a text is compared by final_text) */
            expected?: unknown;
            notes?: string;
          }
      )[];
      filter?: components['schemas']['RunFilter'];
    };
    DatasetItem: {
      id: string;
      position: number;
      source_session_id: string;
      source_run_id: string;
      agent: {
        name: string;
        version: string;
      };
      /** @description Recorded steps (each a request step replay sends again) */
      steps: number;
      /** @description The text of the message that started the run */
      trigger: string | null;
      /** @description How the recorded run came out: status, final text, tool calls, usage, cost, latency */
      reference: {
        [key: string]: unknown;
      };
      expected?: unknown;
      notes: string | null;
      created_at: string;
    };
    Experiment: {
      id: string;
      name: string;
      /** @enum {string} */
      status: 'running' | 'completed' | 'cancelled';
      /** @enum {string} */
      mode: 'step_replay' | 'rerun';
      dataset_id: string;
      candidates: {
        [key: string]: unknown;
      }[];
      /** @description `recorded` or the baseline candidate’s label */
      baseline: string;
      scorers: string[];
      concurrency: number;
      counts: {
        pending: number;
        running: number;
        done: number;
        failed: number;
      };
      created_at: string;
      ended_at: string | null;
    };
    ExperimentRequest: {
      dataset: string;
      name?: string;
      /**
       * @description Default step_replay
       * @enum {string}
       */
      mode?: 'step_replay' | 'rerun';
      candidates: (
        | string
        | {
            agent: string;
            /** @description Its name in the results (default `agent`) */
            label?: string;
            overrides?: components['schemas']['AgentOverrides'];
          }
      )[];
      /** @description `recorded` (default): the recorded runs; or a candidate */
      baseline?:
        | 'recorded'
        | string
        | {
            agent: string;
            /** @description Its name in the results (default `agent`) */
            label?: string;
            overrides?: components['schemas']['AgentOverrides'];
          };
      /** @description Default: every built-in and configured scorer */
      scorers?: string[];
      tools?: components['schemas']['ToolPolicies'] & unknown;
      concurrency?: number;
    };
    ExperimentResults: {
      id: string;
      name: string;
      status: string;
      mode: string;
      dataset_id: string;
      baseline: string;
      counts: {
        [key: string]: number;
      };
      candidates: {
        label: string;
        agent: string;
        items: number;
        done: number;
        failed: number;
        /** @description Mean of each score over the items done; `score` is the overall one */
        scores: {
          [key: string]: number;
        };
        /** @description Mean tokens, cost and latency_ms */
        metrics: {
          [key: string]: number;
        };
        /** @description Mean score minus the baseline’s, over the same items */
        vs_baseline: number | null;
        regressions: {
          dataset_item_id: string;
          source_run_id: string;
          score: number;
          baseline: number;
          diff: number;
        }[];
      }[];
      created_at: string;
      ended_at: string | null;
    };
    ExperimentItem: {
      id: string;
      position: number;
      dataset_item_id: string;
      /** @description The recorded run the dataset item froze */
      source_run_id: string;
      candidate: string;
      /** @enum {string} */
      status: 'pending' | 'running' | 'done' | 'failed';
      /** @description A full rerun: the run */
      run_id: string | null;
      attempt: number;
      scores: {
        [key: string]: unknown;
      };
      /** @description Outcome, reference, metrics; per step for step replay */
      result: {
        [key: string]: unknown;
      } | null;
      error: {
        [key: string]: unknown;
      } | null;
      started_at: string | null;
      ended_at: string | null;
    };
    ChatRequest: {
      /** @description The chat id (ignored: the session is the chat) */
      id?: string;
      messages: ({
        id: string;
        /** @enum {string} */
        role: 'system' | 'user' | 'assistant';
        parts: ({
          type: string;
        } & {
          [key: string]: unknown;
        })[];
      } & {
        [key: string]: unknown;
      })[];
      /**
       * @default submit-message
       * @enum {string}
       */
      trigger: 'submit-message' | 'regenerate-message';
      messageId?: string;
    } & {
      [key: string]: unknown;
    };
    SessionSummary: {
      session: components['schemas']['Session'];
      /** @description How many runs the session has had */
      runs: number;
      /** @description The cost of its runs, summed */
      cost: number;
      /** @description Tokens of its runs, summed */
      usage: {
        input_tokens: number;
        output_tokens: number;
      };
      latest_run: {
        id: string;
        /** @enum {string} */
        status:
          | 'queued'
          | 'running'
          | 'waiting_approval'
          | 'waiting_for_user'
          | 'sleeping'
          | 'waiting_for_signal'
          | 'waiting_for_quota'
          | 'paused'
          | 'completed'
          | 'failed'
          | 'cancelled'
          | 'timed_out';
        created_at: string;
      } | null;
    };
    InboxItem: {
      session: {
        id: string;
        title: string | null;
      };
      run: components['schemas']['Run'];
    };
  };
  responses: never;
  parameters: never;
  requestBodies: never;
  headers: never;
  pathItems: never;
}
export type $defs = Record<string, never>;
export type operations = Record<string, never>;
