/** Against a live console over real sockets: the guardrails the Python test saved for acme,
 * `no-refunds` (never-call-tool issue_refund, halt) and `cite` (must-cite, halt); and
 * `no-refund-talk`, scoped to another agent (ai-sdk.test.ts's), skipped for these turns. */
import assert from "node:assert/strict";
import { describe, it } from "node:test";

import { Kindgi, KindgiApiError } from "../src/index.js";
import { closedPort, liveConsole, turn } from "./helpers.js";

const kindgi = () => new Kindgi({ ...liveConsole(), timeoutMs: 10_000 });

describe("a live console", () => {
  it("lets a cited answer through at output", async () => {
    const verdict = await kindgi().checkOutput(turn());

    assert.equal(verdict.halted, false);
    assert.equal(verdict.error, null);
    assert.equal(verdict.stage, "output");
    const statuses = Object.fromEntries(verdict.results.map((result) => [result.guardrail, result.status]));
    assert.deepEqual(statuses, { cite: "pass", "no-refunds": "pass", "no-refund-talk": "skipped" });
    assert.equal(verdict.trace?.status, "created");
  });

  it("halts an uncited answer at output", async () => {
    const verdict = await kindgi().checkOutput(turn({ output: "Sure, refunded.", citations: [] }));

    assert.equal(verdict.halted, true);
    assert.equal(verdict.reason, "guardrail-violation");
    assert.equal(verdict.haltedBy, "cite");
  });

  it("halts a forbidden tool call at tool-call, before it runs", async () => {
    const client = kindgi();
    const trace = turn({ output: null, citations: [] });
    const lookup = await client.checkToolCall(trace, { id: "c1", name: "lookup_order", arguments: { order: "1234" } });
    const refund = await client.checkToolCall(
      { ...trace, toolCalls: [{ id: "c1", name: "lookup_order", arguments: { order: "1234" }, result: "delivered" }] },
      { id: "c2", name: "issue_refund", arguments: { order: "1234" } },
    );

    assert.equal(lookup.halted, false);
    assert.equal(refund.halted, true);
    assert.equal(refund.stage, "tool-call");
    assert.equal(refund.haltedBy, "no-refunds");
  });

  it("checks the input without the output guardrails, which are skipped at that stage", async () => {
    const verdict = await kindgi().checkInput(turn({ output: null, citations: [] }));

    assert.equal(verdict.halted, false);
    const cite = verdict.results.find((result) => result.guardrail === "cite");
    assert.equal(cite?.status, "skipped");
    assert.equal(cite?.skipReason, "stage");
  });

  it("checks one turn at its three stages as one trace", async () => {
    const client = kindgi();
    const { output: _, citations: __, ...asked } = turn();
    const call = { id: "c1", name: "lookup_order", arguments: { order: "1234" } };
    await client.checkInput(asked);
    await client.checkToolCall(asked, call);
    const done = await client.checkOutput({ ...turn(), id: asked.id, toolCalls: [{ ...call, result: "delivered" }] });

    assert.equal(done.halted, false);
    assert.equal(done.trace?.status, "updated");
  });

  it("ingests in the background and flushes", async () => {
    const client = kindgi();
    assert.equal(client.ingest(turn()), true);
    assert.equal(client.ingest(turn()), true);
    await client.close();

    assert.deepEqual(client.ingestStats, { sent: 2, rejected: 0, dropped: 0 });
  });

  it("throws on a key the console refuses", async () => {
    const client = new Kindgi({ baseUrl: liveConsole().baseUrl, apiKey: "not-a-key" });

    await assert.rejects(client.checkOutput(turn()), (error) => error instanceof KindgiApiError && error.status === 401);
  });
});

describe("a console that is down", () => {
  it("lets the turn go on when failMode is open, saying why", async () => {
    const client = new Kindgi({ baseUrl: `http://127.0.0.1:${await closedPort()}`, apiKey: "k", timeoutMs: 300 });
    const verdict = await client.checkOutput(turn());

    assert.equal(verdict.halted, false);
    assert.equal(verdict.reason, null);
    assert.match(verdict.error ?? "", /cannot reach .*ECONNREFUSED.*fail mode open/);
  });

  it("halts the turn when failMode is closed", async () => {
    const baseUrl = `http://127.0.0.1:${await closedPort()}`;
    const verdict = await new Kindgi({ baseUrl, apiKey: "k", timeoutMs: 300, failMode: "closed" }).checkToolCall(
      turn(),
      { name: "issue_refund" },
    );

    assert.equal(verdict.halted, true);
    assert.equal(verdict.reason, "console-unavailable");
    assert.equal(verdict.stage, "tool-call");
    assert.match(verdict.error ?? "", /fail mode closed/);
  });

  it("drops and counts what ingest() could not send", async () => {
    const baseUrl = `http://127.0.0.1:${await closedPort()}`;
    const client = new Kindgi({ baseUrl, apiKey: "k", timeoutMs: 200, maxQueue: 2 });
    assert.equal(client.ingest(turn()), true);
    assert.equal(client.ingest(turn()), true);
    assert.equal(client.ingest(turn()), false);
    await client.close();

    assert.deepEqual(client.ingestStats, { sent: 0, rejected: 0, dropped: 3 });
  });
});
