/** Plain JSON values as the port stores them. */

export type JsonObject = { [key: string]: unknown };
