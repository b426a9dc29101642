/** The Vercel AI SDK adapter against a live console, with the SDK's own generateText and streamText
 * and its OpenAI-compatible provider, the model served by the suite's OpenAI-protocol server
 * (tests/fakeproviders.py, scripted per model over HTTP). The console has `no-refunds`
 * (never-call-tool issue_refund) and `cite` (must-cite), as live.test.ts. */
import assert from "node:assert/strict";
import { randomUUID } from "node:crypto";
import { describe, it } from "node:test";

import { createOpenAICompatible } from "@ai-sdk/openai-compatible";
import { generateText, jsonSchema, stepCountIs, streamText, tool, wrapLanguageModel } from "ai";

import { KindgiHalted, kindgiMiddleware } from "../src/ai-sdk.js";
import { Kindgi } from "../src/index.js";
import { liveConsole } from "./helpers.js";

const QUESTION = "Can I get a refund for order 1234?";
const UNCITED = "Sure, your order 1234 is refunded.";
const CITED = "Refunds take 30 days [policy-refunds].";

/** The OpenAI-protocol server tests/clients/test_typescript_client.py started (its /v1 address). */
function modelServer(): string {
  const url = process.env.KINDGI_MODEL_BASE_URL;
  if (!url) throw new Error("KINDGI_MODEL_BASE_URL names the suite's OpenAI-protocol server (tests/fakeproviders.py)");
  return url;
}

/** One step of the model: an answer, or tool calls. */
type Step = { text: string } | { call: [string, Record<string, unknown>] };

/** A model of its own on the server, answering `steps` in order. */
async function scripted(steps: Step[]): Promise<string> {
  const name = `agent-${randomUUID()}`;
  const body = {
    model: name,
    steps: steps.map((step) => ("text" in step ? { text: step.text } : { text: null, toolCalls: [step.call] })),
  };
  const answer = await fetch(new URL("/fake/script", modelServer()), { method: "POST", body: JSON.stringify(body) });
  assert.equal(answer.status, 200, await answer.text());
  return name;
}

/** What the model was asked, in order (the request bodies). */
async function asked(name: string): Promise<{ messages: { role: string; content: unknown }[]; stream?: boolean }[]> {
  const answer = await fetch(new URL(`/fake/requests?model=${encodeURIComponent(name)}`, modelServer()));
  return (await answer.json()) as { messages: { role: string; content: unknown }[]; stream?: boolean }[];
}

/** A support agent's turn: the scripted model through the middleware, a refund and a lookup tool. */
async function agent(steps: Step[], options: { holdStreamedText?: boolean; agent?: string } = {}) {
  const ran: string[] = [];
  const name = await scripted(steps);
  const provider = createOpenAICompatible({ name: "fake", baseURL: modelServer(), apiKey: "sk-fake", includeUsage: true });
  const kindgi = new Kindgi({ ...liveConsole(), timeoutMs: 10_000 });
  const traceId = `ai-sdk-${randomUUID()}`;
  const order = jsonSchema<{ order: string }>({ type: "object", properties: { order: { type: "string" } }, required: ["order"] });
  const tools = {
    issue_refund: tool({
      description: "Refund an order",
      inputSchema: order,
      execute: async ({ order }) => (ran.push(`issue_refund ${order}`), "refunded"),
    }),
    lookup_order: tool({
      description: "Look an order up",
      inputSchema: order,
      execute: async ({ order }) => (ran.push(`lookup_order ${order}`), "delivered"),
    }),
  };
  const model = wrapLanguageModel({
    model: provider.chatModel(name),
    middleware: kindgiMiddleware({ kindgi, agent: "support-bot", flow: "refund", ...options }),
  });
  const call = { model, prompt: QUESTION, tools, stopWhen: stepCountIs(4), maxRetries: 0, providerOptions: { kindgi: { traceId } } };
  return { call, ran, name, traceId };
}

type Turn = Awaited<ReturnType<typeof agent>>;

/** streamText's turn as a caller sees it: the text it was streamed, the error parts, and how it ended. */
async function streamed(turn: Turn) {
  const errors: unknown[] = [];
  const result = streamText({ ...turn.call, onError: ({ error }) => void errors.push(error) });
  const parts: string[] = [];
  let text = "";
  let thrown: unknown;
  try {
    for await (const part of result.fullStream) {
      parts.push(part.type);
      if (part.type === "text-delta") text += part.text;
    }
  } catch (error) {
    thrown = error;
  }
  const final = await result.text.then(
    (value) => ({ value, error: undefined }),
    (error: unknown) => ({ value: undefined, error }),
  );
  return { parts, text, thrown, errors, final };
}

/** The trace the console stored under `id`, read back with GET /api/v1/traces/{id}. */
async function stored(id: string): Promise<{ withheld: boolean; document: Record<string, unknown>; results: Record<string, unknown>[] }> {
  const { baseUrl, apiKey } = liveConsole();
  const answer = await fetch(`${baseUrl}/api/v1/traces/${encodeURIComponent(id)}`, {
    headers: { Authorization: `Bearer ${apiKey}` },
  });
  assert.equal(answer.status, 200, await answer.clone().text());
  return (await answer.json()) as { withheld: boolean; document: Record<string, unknown>; results: Record<string, unknown>[] };
}

/** Every stored result of the trace as `stage guardrail status` (skipped results are not stored). */
async function stages(id: string): Promise<string[]> {
  const { results } = await stored(id);
  return results.map((result) => `${String(result["stage"])} ${String(result["guardrail"])} ${String(result["status"])}`).sort();
}

function isHalt(error: unknown, stage: string, by: string, traceId: string): error is KindgiHalted {
  assert.ok(error instanceof KindgiHalted, String(error));
  assert.equal(error.verdict.stage, stage);
  assert.equal(error.verdict.haltedBy, by);
  assert.equal(error.traceId, traceId);
  return true;
}

/** The trace of a turn whose lookup ran and whose uncited answer was halted: one trace, per stage. */
async function assertLookupThenHaltedAnswer(turn: Turn): Promise<void> {
  const trace = await stored(turn.traceId);
  assert.equal(trace.document["agent"], "support-bot");
  assert.equal(trace.document["flow"], "refund");
  assert.equal(trace.document["input"], QUESTION);
  const calls = trace.document["toolCalls"] as { name: string; arguments: unknown; result?: unknown }[];
  assert.deepEqual(
    calls.map(({ name, arguments: args, result }) => ({ name, args, result })),
    [{ name: "lookup_order", args: { order: "1234" }, result: "delivered" }],
  );
  assert.ok(trace.withheld && !("output" in trace.document), "a halted answer is withheld");
  assert.deepEqual(await stages(turn.traceId), ["output cite fail", "output no-refunds pass", "tool-call no-refunds pass"]);
}

describe("the Vercel AI SDK middleware, generateText", () => {
  it("halts a proposed refund before the tool runs", async () => {
    const turn = await agent([{ call: ["issue_refund", { order: "1234" }] }, { text: CITED }]);

    await assert.rejects(generateText(turn.call), (error) => isHalt(error, "tool-call", "no-refunds", turn.traceId));

    assert.deepEqual(turn.ran, []);
    assert.equal((await asked(turn.name)).length, 1, "the model is not asked again");
    assert.deepEqual(await stages(turn.traceId), ["tool-call no-refunds fail"]);
    const calls = (await stored(turn.traceId)).document["toolCalls"] as { name: string; result?: unknown }[];
    assert.deepEqual(calls.map((call) => [call.name, "result" in call]), [["issue_refund", false]]);
  });

  it("halts an uncited answer at output, the turn one trace with its results per stage", async () => {
    const turn = await agent([{ call: ["lookup_order", { order: "1234" }] }, { text: UNCITED }]);

    await assert.rejects(generateText(turn.call), (error) => isHalt(error, "output", "cite", turn.traceId));

    assert.deepEqual(turn.ran, ["lookup_order 1234"]);
    await assertLookupThenHaltedAnswer(turn);
  });

  it("lets a cited answer through", async () => {
    const turn = await agent([{ call: ["lookup_order", { order: "1234" }] }, { text: CITED }]);

    const result = await generateText(turn.call);

    assert.equal(result.text, CITED);
    assert.equal((await stored(turn.traceId)).document["output"], CITED);
    assert.deepEqual(await stages(turn.traceId), ["output cite pass", "output no-refunds pass", "tool-call no-refunds pass"]);
  });
});

describe("the Vercel AI SDK middleware, streamText", () => {
  it("halts a proposed refund before the tool runs: the stream ends with the halt", async () => {
    const turn = await agent([{ call: ["issue_refund", { order: "1234" }] }, { text: CITED }]);

    const seen = await streamed(turn);

    assert.deepEqual(turn.ran, []);
    assert.ok(!seen.parts.includes("tool-call") && !seen.parts.includes("tool-result"), seen.parts.join(" "));
    isHalt(seen.thrown, "tool-call", "no-refunds", turn.traceId);
    assert.equal(seen.final.error, seen.thrown, "await result.text rejects with the same halt");
    assert.equal(seen.errors.length, 1, "onError sees the halt's error part");
    isHalt(seen.errors[0], "tool-call", "no-refunds", turn.traceId);
    assert.equal((await asked(turn.name)).length, 1, "the model is not asked again");
    assert.deepEqual(await stages(turn.traceId), ["tool-call no-refunds fail"]);
  });

  it("holds an uncited answer back and halts it at output, one trace with its results per stage", async () => {
    const turn = await agent([{ call: ["lookup_order", { order: "1234" }] }, { text: UNCITED }]);

    const seen = await streamed(turn);

    assert.deepEqual(turn.ran, ["lookup_order 1234"]);
    assert.equal(seen.text, "", "no text of the halted answer reached the caller");
    isHalt(seen.thrown, "output", "cite", turn.traceId);
    isHalt(seen.final.error, "output", "cite", turn.traceId);
    const requests = await asked(turn.name);
    assert.deepEqual(requests.map((request) => request.stream), [true, true]);
    await assertLookupThenHaltedAnswer(turn);
  });

  it("streams a cited answer once its verdict allows it", async () => {
    const turn = await agent([{ call: ["lookup_order", { order: "1234" }] }, { text: CITED }]);

    const seen = await streamed(turn);

    assert.equal(seen.thrown, undefined);
    assert.equal(seen.text, CITED);
    assert.equal(seen.final.value, CITED);
    assert.ok(seen.parts.indexOf("tool-call") < seen.parts.indexOf("tool-result"));
    assert.deepEqual(turn.ran, ["lookup_order 1234"]);
    assert.equal((await stored(turn.traceId)).document["output"], CITED);
    assert.deepEqual(await stages(turn.traceId), ["output cite pass", "output no-refunds pass", "tool-call no-refunds pass"]);
  });

  it("with holdStreamedText false, streams the text as it comes and halts after it", async () => {
    const turn = await agent([{ text: UNCITED }], { holdStreamedText: false });

    const seen = await streamed(turn);

    assert.equal(seen.text, UNCITED, "the text was streamed before the verdict");
    isHalt(seen.thrown, "output", "cite", turn.traceId);
    assert.ok(seen.parts.indexOf("text-delta") < seen.parts.indexOf("error"), seen.parts.join(" "));
  });

  it("halts the input before the model is asked", async () => {
    // `no-refund-talk` (forbidden-substring "refund", at input only) is scoped to this agent.
    const turn = await agent([{ text: CITED }], { agent: "front-desk" });

    const seen = await streamed(turn);

    isHalt(seen.thrown, "input", "no-refund-talk", turn.traceId);
    assert.deepEqual(seen.errors.length, 1);
    assert.deepEqual(await asked(turn.name), [], "the model was never asked");
    assert.deepEqual(await stages(turn.traceId), ["input no-refund-talk fail"]);
  });
});

describe("the Vercel AI SDK middleware, generateText at input", () => {
  it("halts the input before the model is asked", async () => {
    const turn = await agent([{ text: CITED }], { agent: "front-desk" });

    await assert.rejects(generateText(turn.call), (error) => isHalt(error, "input", "no-refund-talk", turn.traceId));

    assert.deepEqual(await asked(turn.name), []);
  });
});
