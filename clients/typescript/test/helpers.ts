/** What the tests share: the live console's address and key, turns, a local stand-in server. */
import { randomUUID } from "node:crypto";
import { createServer, type IncomingMessage, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";

import type { RunTrace } from "../src/index.js";

/** The console tests/clients/test_typescript_client.py started, and its key for acme. */
export function liveConsole(): { baseUrl: string; apiKey: string } {
  const baseUrl = process.env.KINDGI_BASE_URL;
  const apiKey = process.env.KINDGI_API_KEY;
  if (!baseUrl || !apiKey) {
    throw new Error("KINDGI_BASE_URL and KINDGI_API_KEY name a live console (tests/clients/test_typescript_client.py)");
  }
  return { baseUrl, apiKey };
}

/** A support turn under a new id: a cited answer, no tool call. */
export function turn(fields: Partial<RunTrace> = {}): RunTrace {
  return {
    id: `ts-${randomUUID()}`,
    agent: "support-bot",
    flow: "refund",
    input: "Can I get a refund for order 1234?",
    messages: [{ role: "user", content: "Can I get a refund for order 1234?" }],
    output: "Orders can be refunded within 30 days [policy-refunds].",
    citations: [{ source: "policy-refunds" }],
    ...fields,
  };
}

export interface Seen {
  url: string;
  idempotencyKey: string | undefined;
  body: string;
}

export interface StandIn {
  baseUrl: string;
  seen: Seen[];
  close(): Promise<void>;
}

type Handler = (request: IncomingMessage, response: ServerResponse, attempt: number) => void;

/** A local HTTP server answering as `handler` says, recording what it was sent. */
export async function standIn(handler: Handler): Promise<StandIn> {
  const seen: Seen[] = [];
  const server = createServer((request, response) => {
    let body = "";
    request.on("data", (chunk: Buffer) => (body += chunk.toString()));
    request.on("end", () => {
      const key = request.headers["idempotency-key"];
      seen.push({ url: request.url ?? "", idempotencyKey: typeof key === "string" ? key : undefined, body });
      handler(request, response, seen.length);
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as AddressInfo;
  return {
    baseUrl: `http://127.0.0.1:${port}`,
    seen,
    close: () => {
      server.closeAllConnections();
      return new Promise((resolve) => server.close(() => resolve()));
    },
  };
}

/** Answer `status` with `body` as JSON and `headers`. */
export function reply(response: ServerResponse, status: number, body: unknown, headers: Record<string, string> = {}): void {
  response.writeHead(status, { "Content-Type": "application/json", ...headers });
  response.end(JSON.stringify(body));
}

/** A verdict as the console answers one: the turn completes. */
export const COMPLETED = { turn: "completed", reason: null, stage: "output", haltedBy: null, results: [] };

/** A port on 127.0.0.1 where nothing listens. */
export async function closedPort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as AddressInfo;
  await new Promise((resolve) => server.close(resolve));
  return port;
}
