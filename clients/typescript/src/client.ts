/** The Kindgi client: a verdict at each stage of an agent turn, and background ingestion. */
import { IngestQueue } from "./ingest.js";
import { ConsoleUnavailable, post, type Connection } from "./transport.js";
import type {
  EvaluateAnswer,
  FailMode,
  GuardrailResult,
  IngestStats,
  KindgiOptions,
  RunTrace,
  Stage,
  ToolCall,
  Verdict,
} from "./types.js";

const DEFAULTS = { timeoutMs: 2000, failMode: "open", maxQueue: 1000, batchSize: 100, flushIntervalMs: 1000 } as const;

export class Kindgi {
  readonly failMode: FailMode;
  private readonly connection: Connection;
  private readonly queue: IngestQueue;

  constructor(options: KindgiOptions) {
    if (!options.baseUrl || !options.apiKey) throw new TypeError("Kindgi needs a baseUrl and an apiKey");
    this.failMode = options.failMode ?? DEFAULTS.failMode;
    if (this.failMode !== "open" && this.failMode !== "closed") {
      throw new TypeError(`failMode is "open" or "closed", not ${JSON.stringify(this.failMode)}`);
    }
    this.connection = {
      baseUrl: options.baseUrl,
      apiKey: options.apiKey,
      timeoutMs: options.timeoutMs ?? DEFAULTS.timeoutMs,
      fetch: options.fetch ?? ((input, init) => fetch(input, init)),
    };
    this.queue = new IngestQueue(this.connection, {
      maxQueue: options.maxQueue ?? DEFAULTS.maxQueue,
      batchSize: options.batchSize ?? DEFAULTS.batchSize,
      flushIntervalMs: options.flushIntervalMs ?? DEFAULTS.flushIntervalMs,
    });
  }

  /** Before the model runs: the user's input (and the messages so far). */
  checkInput(trace: RunTrace): Promise<Verdict> {
    return this.evaluate(trace, "input");
  }

  /** Before a tool call runs: the turn so far and `call`, the proposed call (without a result).
   * A halted verdict means the tool must not run. */
  checkToolCall(trace: RunTrace, call: ToolCall): Promise<Verdict> {
    return this.evaluate({ ...trace, toolCalls: [...(trace.toolCalls ?? []), call] }, "tool-call");
  }

  /** Once the turn has its answer: the whole turn. */
  checkOutput(trace: RunTrace): Promise<Verdict> {
    return this.evaluate(trace, "output");
  }

  /** Queue `trace` for ingestion in the background; false when the queue was full. */
  ingest(trace: RunTrace): boolean {
    return this.queue.add(trace);
  }

  /** Send every queued trace now. */
  flush(): Promise<void> {
    return this.queue.flush();
  }

  /** Flush, and stop flushing at the process's exit (Node). */
  close(): Promise<void> {
    return this.queue.close();
  }

  /** Traces ingest() has sent, had refused and dropped. */
  get ingestStats(): Readonly<IngestStats> {
    return { ...this.queue.stats };
  }

  private async evaluate(trace: RunTrace, stage: Stage): Promise<Verdict> {
    try {
      const answer = await post(this.connection, `/api/v1/evaluate?stage=${stage}`, trace);
      return answered(answer.body as EvaluateAnswer);
    } catch (error) {
      if (error instanceof ConsoleUnavailable) return this.unanswered(stage, error.message);
      throw error;
    }
  }

  /** The verdict when the console gave none: failMode's. */
  private unanswered(stage: Stage, error: string): Verdict {
    const closed = this.failMode === "closed";
    return {
      halted: closed,
      reason: closed ? "console-unavailable" : null,
      haltedBy: null,
      stage,
      results: [],
      error: `${error} (fail mode ${this.failMode})`,
    };
  }
}

function answered(answer: EvaluateAnswer): Verdict {
  return {
    halted: answer.turn === "failed",
    reason: answer.reason,
    haltedBy: answer.haltedBy,
    stage: answer.stage,
    results: answer.results as unknown as GuardrailResult[],
    // A guardrail that fails closed on its error names it: the turn halted on that error.
    error: answer.error ? `${answer.error.guardrail}: ${answer.error.message}` : null,
    ...(answer.trace ? { trace: answer.trace } : {}),
  };
}
