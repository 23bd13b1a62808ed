/** Counters and gauges in the Prometheus text format (GET /metrics). */
export class Metrics {
  private readonly requests = new Map<string, number>();
  private readonly durations = new Map<string, { sum: number; count: number }>();
  sseConnections = 0;
  sseConnectionsTotal = 0;
  eventsPublished = 0;

  request(method: string, route: string, status: number, ms: number): void {
    const key = `method="${method}",route="${route}",status="${status}"`;
    this.requests.set(key, (this.requests.get(key) ?? 0) + 1);
    const d = this.durations.get(`method="${method}",route="${route}"`) ?? { sum: 0, count: 0 };
    d.sum += ms / 1000;
    d.count++;
    this.durations.set(`method="${method}",route="${route}"`, d);
  }

  render(gauges: Record<string, { help: string; value: number; labels?: string }[]>): string {
    const out: string[] = [];
    out.push('# HELP keel_http_requests_total HTTP requests by method, route and status.', '# TYPE keel_http_requests_total counter');
    for (const [k, v] of this.requests) out.push(`keel_http_requests_total{${k}} ${v}`);
    out.push('# HELP keel_http_request_duration_seconds Time to the response headers.', '# TYPE keel_http_request_duration_seconds summary');
    for (const [k, v] of this.durations) {
      out.push(`keel_http_request_duration_seconds_sum{${k}} ${v.sum.toFixed(6)}`, `keel_http_request_duration_seconds_count{${k}} ${v.count}`);
    }
    out.push('# HELP keel_sse_connections Open SSE connections.', '# TYPE keel_sse_connections gauge', `keel_sse_connections ${this.sseConnections}`);
    out.push('# HELP keel_sse_connections_total SSE connections opened.', '# TYPE keel_sse_connections_total counter', `keel_sse_connections_total ${this.sseConnectionsTotal}`);
    out.push('# HELP keel_events_published_total Durable events appended by this process.', '# TYPE keel_events_published_total counter', `keel_events_published_total ${this.eventsPublished}`);
    for (const [name, series] of Object.entries(gauges)) {
      out.push(`# HELP ${name} ${series[0]?.help ?? ''}`, `# TYPE ${name} gauge`);
      for (const g of series) out.push(`${name}${g.labels ? `{${g.labels}}` : ''} ${g.value}`);
    }
    return `${out.join('\n')}\n`;
  }
}
