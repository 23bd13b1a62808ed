/**
 * The served OpenAPI document as test input: its operations (method, path, parameters, body), a
 * minimal valid value of a JSON Schema (`exampleOf`) and a fast-check arbitrary of values that pass
 * it (`arbitraryOf`), so that tests reach every route with requests the first checks accept.
 */
import fc from 'fast-check';
import type { Api, Json } from './server-helpers.ts';

export interface OpenApiDoc {
  paths: Record<string, Record<string, Json>>;
  components?: { schemas?: Record<string, Json> };
}

export interface Operation {
  method: string;
  /** As the document writes it: `/v1/runs/{id}/approvals/{approval_id}`. */
  path: string;
  pathParams: string[];
  query: Array<{ name: string; schema: Json }>;
  /** The request body: its media type and schema, when the operation takes one. */
  body: { type: 'application/json' | 'application/x-ndjson'; schema: Json; required: boolean } | undefined;
  /** `[]`: no API key (a callback URL). */
  security: unknown[] | undefined;
}

export async function loadOperations(api: Api): Promise<{ doc: OpenApiDoc; ops: Operation[] }> {
  const doc = (await api.get('/openapi.json')).body as OpenApiDoc;
  const ops = Object.entries(doc.paths).flatMap(([path, byMethod]) =>
    Object.entries(byMethod).map(([method, op]): Operation => {
      const params = (op.parameters ?? []) as Array<{ in: string; name: string; schema?: Json }>;
      const content = (op.requestBody?.content ?? {}) as Record<string, { schema: Json }>;
      const type = content['application/json']
        ? 'application/json'
        : content['application/x-ndjson']
          ? 'application/x-ndjson'
          : undefined;
      return {
        method: method.toUpperCase(),
        path,
        pathParams: params.filter((p) => p.in === 'path').map((p) => p.name),
        query: params.filter((p) => p.in === 'query').map((p) => ({ name: p.name, schema: p.schema ?? {} })),
        body: type ? { type, schema: content[type]!.schema, required: op.requestBody?.required === true } : undefined,
        security: op.security as unknown[] | undefined,
      };
    }),
  );
  return { doc, ops };
}

const resolve = (doc: OpenApiDoc, schema: Json): Json => {
  let s = schema ?? {};
  for (let i = 0; s.$ref && i < 10; i++) s = doc.components?.schemas?.[String(s.$ref).split('/').at(-1)!] ?? {};
  return s;
};

const typesOf = (s: Json): string[] => (Array.isArray(s.type) ? s.type : s.type ? [s.type] : []);

/** A minimal value the schema accepts: required properties only, the first enum value, the shortest strings. */
export function exampleOf(doc: OpenApiDoc, schema: Json): unknown {
  const s = resolve(doc, schema);
  if (s.default !== undefined) return s.default;
  if (s.const !== undefined) return s.const;
  if (Array.isArray(s.enum)) return s.enum[0];
  const variants = s.anyOf ?? s.oneOf;
  if (Array.isArray(variants)) return exampleOf(doc, variants[0]);
  const type = typesOf(s).find((t) => t !== 'null');
  switch (type) {
    case 'object': {
      const props = (s.properties ?? {}) as Record<string, Json>;
      return Object.fromEntries(((s.required ?? []) as string[]).map((k) => [k, exampleOf(doc, props[k])]));
    }
    case 'array':
      return Array.from({ length: s.minItems ?? 0 }, () => exampleOf(doc, s.items ?? {}));
    case 'string':
      return 'x'.repeat(Math.max(1, s.minLength ?? 0));
    case 'integer':
    case 'number':
      return s.minimum ?? (s.exclusiveMinimum !== undefined ? s.exclusiveMinimum + 1 : 1);
    case 'boolean':
      return true;
    default:
      return typesOf(s).includes('null') ? null : {};
  }
}

/**
 * Values the schema accepts (mostly): every property, required ones always, optional ones
 * sometimes; strings within their lengths; numbers within their bounds. `leaf` gives strings
 * (ids and names worth trying); `fields` the values of properties by name (a URL where a URL goes).
 */
export function arbitraryOf(
  doc: OpenApiDoc,
  schema: Json,
  leaf: fc.Arbitrary<string>,
  fields: Record<string, fc.Arbitrary<unknown>> = {},
  depth = 0,
): fc.Arbitrary<unknown> {
  const s = resolve(doc, schema);
  if (s.const !== undefined) return fc.constant(s.const);
  if (Array.isArray(s.enum)) return fc.constantFrom(...(s.enum as unknown[]));
  const variants = s.anyOf ?? s.oneOf;
  if (Array.isArray(variants))
    return fc.oneof(...variants.map((v: Json) => arbitraryOf(doc, v, leaf, fields, depth + 1)));
  const types = typesOf(s);
  const one = (type: string | undefined): fc.Arbitrary<unknown> => {
    switch (type) {
      case 'object': {
        const props = (s.properties ?? {}) as Record<string, Json>;
        const keys = Object.keys(props);
        if (keys.length === 0)
          return fc.dictionary(fc.string({ maxLength: 8 }), fc.jsonValue({ maxDepth: 2 }), { maxKeys: 3 });
        return fc.record(
          Object.fromEntries(keys.map((k) => [k, fields[k] ?? arbitraryOf(doc, props[k], leaf, fields, depth + 1)])),
          { requiredKeys: (s.required ?? []) as string[] },
        );
      }
      case 'array':
        return fc.array(arbitraryOf(doc, s.items ?? {}, leaf, fields, depth + 1), {
          minLength: s.minItems ?? 0,
          maxLength: Math.min(s.maxItems ?? 3, (s.minItems ?? 0) + 3),
        });
      case 'string': {
        const min = s.minLength ?? 0;
        const max = s.maxLength ?? 200;
        return leaf.filter((v) => v.length >= min && v.length <= max);
      }
      case 'integer':
      case 'number': {
        const min = s.minimum ?? (s.exclusiveMinimum !== undefined ? s.exclusiveMinimum + 1 : 0);
        return fc.integer({ min, max: Math.max(min, s.maximum ?? min + 100_000) });
      }
      case 'boolean':
        return fc.boolean();
      case 'null':
        return fc.constant(null);
      default:
        // Any JSON value (a payload, an answer, arguments).
        return depth > 3 ? fc.constant(null) : fc.jsonValue({ maxDepth: 3 });
    }
  };
  return types.length > 1 ? fc.oneof(...types.map(one)) : one(types[0]);
}

/** The path with each `{param}` filled in (percent-encoded). */
export const fillPath = (path: string, values: Record<string, string>): string =>
  path.replace(/\{([^}]+)\}/g, (_, name: string) => {
    const v = values[name];
    if (v === undefined) throw new Error(`no value for {${name}} in ${path}`);
    return encodeURIComponent(v);
  });
