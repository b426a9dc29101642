/** Retries and the deadline, against a local stand-in for the console (429, 503, silence). */
import assert from "node:assert/strict";
import { afterEach, describe, it } from "node:test";

import { Kindgi } from "../src/index.js";
import { COMPLETED, reply, standIn, turn, type StandIn } from "./helpers.js";

let server: StandIn | undefined;
afterEach(async () => {
  await server?.close();
  server = undefined;
});

function client(baseUrl: string, timeoutMs: number, failMode: "open" | "closed" = "open"): Kindgi {
  return new Kindgi({ baseUrl, apiKey: "k", timeoutMs, failMode });
}

describe("retries", () => {
  it("waits for Retry-After after a 429, then retries with the same Idempotency-Key", async () => {
    server = await standIn((_, response, attempt) =>
      attempt === 1 ? reply(response, 429, { errors: [] }, { "Retry-After": "1" }) : reply(response, 200, COMPLETED),
    );
    const started = Date.now();
    const verdict = await client(server.baseUrl, 5000).checkOutput(turn());

    assert.equal(verdict.error, null);
    assert.ok(Date.now() - started >= 950, "the retry came after Retry-After");
    assert.equal(server.seen.length, 2);
    assert.ok(server.seen[0]?.idempotencyKey);
    assert.equal(server.seen[1]?.idempotencyKey, server.seen[0]?.idempotencyKey);
    assert.equal(server.seen[1]?.body, server.seen[0]?.body);
  });

  it("gives up at once when Retry-After is past the deadline", async () => {
    server = await standIn((_, response) => reply(response, 429, { errors: [] }, { "Retry-After": "30" }));
    const started = Date.now();
    const verdict = await client(server.baseUrl, 2000, "closed").checkOutput(turn());

    assert.equal(verdict.halted, true);
    assert.match(verdict.error ?? "", /answered 429; a retry in 30000 ms would pass the 2000 ms deadline/);
    assert.ok(Date.now() - started < 1500);
    assert.equal(server.seen.length, 1);
  });

  it("retries a 503 until the deadline, then follows failMode", async () => {
    server = await standIn((_, response) => reply(response, 503, { errors: [] }, { "Retry-After": "0" }));
    const verdict = await client(server.baseUrl, 500).checkInput(turn());

    assert.equal(verdict.halted, false);
    assert.match(verdict.error ?? "", /503/);
    assert.ok(server.seen.length > 1, "the 503 was retried");
    assert.ok(server.seen.every((seen) => seen.url === "/api/v1/evaluate?stage=input"));
  });

  it("recovers when a 503 passes", async () => {
    server = await standIn((_, response, attempt) =>
      attempt < 3 ? reply(response, 503, { errors: [] }) : reply(response, 200, { ...COMPLETED, stage: "input" }),
    );
    const verdict = await client(server.baseUrl, 5000).checkInput(turn());

    assert.equal(verdict.error, null);
    assert.equal(verdict.stage, "input");
    assert.equal(server.seen.length, 3);
  });
});

describe("the deadline", () => {
  it("holds when the console never answers", async () => {
    server = await standIn(() => undefined);
    const started = Date.now();
    const verdict = await client(server.baseUrl, 300, "closed").checkOutput(turn());

    assert.equal(verdict.halted, true);
    assert.match(verdict.error ?? "", /no answer within 300 ms/);
    assert.ok(Date.now() - started < 1500, "the call ended near its deadline");
  });

  it("holds when the console stops in the middle of its answer", async () => {
    server = await standIn((_, response) => {
      response.writeHead(200, { "Content-Type": "application/json" });
      response.write('{"turn": "comp');
    });
    const verdict = await client(server.baseUrl, 300).checkOutput(turn());

    assert.equal(verdict.halted, false);
    assert.match(verdict.error ?? "", /no answer within 300 ms/);
  });
});
