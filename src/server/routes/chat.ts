import type { OpenAPIHono } from '@hono/zod-openapi';
import type { AppContext, AppEnv } from '../app.ts';

/** The AI SDK UI message stream endpoints (POST /v1/sessions/{id}/chat, GET …/chat/stream). */
export function chatRoutes(_app: OpenAPIHono<AppEnv>, _ctx: AppContext): void {
  // Filled in by the chat module.
}
