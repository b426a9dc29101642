/** The Vercel AI SDK adapter against a live console, the model the SDK's own MockLanguageModelV3:
 * `no-refunds` (never-call-tool issue_refund) and `cite` (must-cite), as live.test.ts. */
import assert from "node:assert/strict";
import { randomUUID } from "node:crypto";
import { describe, it } from "node:test";

import { generateText, jsonSchema, stepCountIs, tool, wrapLanguageModel } from "ai";
import { MockLanguageModelV3 } from "ai/test";

import { KindgiHalted, kindgiMiddleware } from "../src/ai-sdk.js";
import { Kindgi } from "../src/index.js";
import { liveConsole } from "./helpers.js";

const USAGE = {
  inputTokens: { total: 10, noCache: 10, cacheRead: undefined, cacheWrite: undefined },
  outputTokens: { total: 5, text: 5, reasoning: undefined },
};

/** One model step proposing `name(input)`. */
function proposes(name: string, input: object) {
  return {
    content: [{ type: "tool-call" as const, toolCallId: `call-${name}`, toolName: name, input: JSON.stringify(input) }],
    finishReason: { unified: "tool-calls" as const, raw: "tool_calls" },
    usage: USAGE,
    warnings: [],
  };
}

/** One model step answering `text`, citing `sources`. */
function answers(text: string, sources: string[] = []) {
  return {
    content: [
      { type: "text" as const, text },
      ...sources.map((url) => ({ type: "source" as const, sourceType: "url" as const, id: url, url })),
    ],
    finishReason: { unified: "stop" as const, raw: "stop" },
    usage: USAGE,
    warnings: [],
  };
}

/** A support agent's turn: the scripted model, wrapped, with a refund and a lookup tool. */
function agent(steps: ReturnType<typeof proposes | typeof answers>[]) {
  const ran: string[] = [];
  const model = new MockLanguageModelV3({ doGenerate: steps });
  const kindgi = new Kindgi({ ...liveConsole(), timeoutMs: 10_000 });
  const traceId = `ai-sdk-${randomUUID()}`;
  const tools = {
    issue_refund: tool({
      description: "Refund an order",
      inputSchema: jsonSchema<{ order: string }>({ type: "object", properties: { order: { type: "string" } } }),
      execute: async ({ order }) => (ran.push(`issue_refund ${order}`), "refunded"),
    }),
    lookup_order: tool({
      description: "Look an order up",
      inputSchema: jsonSchema<{ order: string }>({ type: "object", properties: { order: { type: "string" } } }),
      execute: async ({ order }) => (ran.push(`lookup_order ${order}`), "delivered"),
    }),
  };
  const run = () =>
    generateText({
      model: wrapLanguageModel({ model, middleware: kindgiMiddleware({ kindgi, agent: "support-bot", flow: "refund" }) }),
      prompt: "Can I get a refund for order 1234?",
      tools,
      stopWhen: stepCountIs(4),
      providerOptions: { kindgi: { traceId } },
    });
  return { run, ran, model, traceId };
}

/** The trace the console stored under `id`, read back with GET /api/v1/traces/{id}. */
async function stored(id: string): Promise<{ document: Record<string, unknown>; results: Record<string, unknown>[] }> {
  const { baseUrl, apiKey } = liveConsole();
  const answer = await fetch(`${baseUrl}/api/v1/traces/${encodeURIComponent(id)}`, {
    headers: { Authorization: `Bearer ${apiKey}` },
  });
  assert.equal(answer.status, 200, await answer.clone().text());
  return (await answer.json()) as { document: Record<string, unknown>; results: Record<string, unknown>[] };
}

describe("the Vercel AI SDK middleware", () => {
  it("halts a proposed refund before the tool runs", async () => {
    const turn = agent([proposes("issue_refund", { order: "1234" }), answers("Refunded [policy-refunds].")]);

    await assert.rejects(turn.run(), (error) => {
      assert.ok(error instanceof KindgiHalted, String(error));
      assert.equal(error.verdict.stage, "tool-call");
      assert.equal(error.verdict.haltedBy, "no-refunds");
      assert.equal(error.toolCall?.name, "issue_refund");
      assert.equal(error.traceId, turn.traceId);
      return true;
    });
    assert.deepEqual(turn.ran, []);
    assert.equal(turn.model.doGenerateCalls.length, 1);
  });

  it("halts an uncited answer at output, the turn one trace with results per stage", async () => {
    const turn = agent([proposes("lookup_order", { order: "1234" }), answers("Sure, it is refunded.")]);

    await assert.rejects(turn.run(), (error) => {
      assert.ok(error instanceof KindgiHalted, String(error));
      assert.equal(error.verdict.stage, "output");
      assert.equal(error.verdict.haltedBy, "cite");
      return true;
    });
    assert.deepEqual(turn.ran, ["lookup_order 1234"]);

    const { document: trace, results } = await stored(turn.traceId);
    assert.equal(trace["agent"], "support-bot");
    assert.equal(trace["flow"], "refund");
    assert.deepEqual(trace["toolCalls"], [
      { id: "call-lookup_order", name: "lookup_order", arguments: { order: "1234" }, result: "delivered" },
    ]);
    // The API lists no stage: the tool-call stage's result (no-refunds), then the output's two.
    // (A guardrail skipped at a stage stores no result: input has none here.)
    const rows = results.map((result) => `${String(result["guardrail"])} ${String(result["status"])}`);
    assert.deepEqual(rows, ["no-refunds pass", "cite fail", "no-refunds pass"]);
  });

  it("lets a cited answer through", async () => {
    const turn = agent([proposes("lookup_order", { order: "1234" }), answers("Refunds take 30 days.", ["policy-refunds"])]);

    const result = await turn.run();

    assert.equal(result.text, "Refunds take 30 days.");
    assert.equal((await stored(turn.traceId)).document["output"], "Refunds take 30 days.");
  });
});
