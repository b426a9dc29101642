/**
 * ingest()'s queue: bounded, sent in batches in the background, never blocking or failing
 * the agent. A trace that does not fit is dropped and counted; flush() sends what is queued.
 */
import { ConsoleUnavailable, KindgiApiError, post, type Connection } from "./transport.js";
import type { IngestBatchAnswer, IngestStats, RunTrace } from "./types.js";

const ACCEPTED = new Set(["created", "duplicate"]);

export interface QueueOptions {
  maxQueue: number;
  batchSize: number;
  flushIntervalMs: number;
}

export class IngestQueue {
  readonly stats: IngestStats = { sent: 0, rejected: 0, dropped: 0 };
  private readonly queued: RunTrace[] = [];
  private sending: Promise<void> = Promise.resolve();
  private timer: ReturnType<typeof setTimeout> | undefined;
  private readonly onExit = (): void => {
    if (this.queued.length) void this.flush();
  };

  constructor(
    private readonly connection: Connection,
    private readonly options: QueueOptions,
  ) {
    nodeProcess()?.on("beforeExit", this.onExit);
  }

  /** Queue `trace`; false when the queue is full and the trace was dropped. */
  add(trace: RunTrace): boolean {
    if (this.queued.length >= this.options.maxQueue) {
      this.stats.dropped++;
      return false;
    }
    this.queued.push(trace);
    if (this.queued.length >= this.options.batchSize) void this.flush();
    else this.timer ??= unref(setTimeout(() => void this.flush(), this.options.flushIntervalMs));
    return true;
  }

  /** Send everything queued; resolves when it has been sent, refused or dropped. */
  flush(): Promise<void> {
    clearTimeout(this.timer);
    this.timer = undefined;
    this.sending = this.sending.then(() => this.drain());
    return this.sending;
  }

  /** Flush, and stop listening for the process's exit. */
  async close(): Promise<void> {
    nodeProcess()?.off("beforeExit", this.onExit);
    await this.flush();
  }

  private async drain(): Promise<void> {
    while (this.queued.length) {
      await this.send(this.queued.splice(0, this.options.batchSize));
    }
  }

  private async send(batch: RunTrace[]): Promise<void> {
    try {
      const answer = await post(this.connection, "/api/v1/traces", { traces: batch });
      const { results } = answer.body as IngestBatchAnswer;
      const accepted = results.filter((result) => ACCEPTED.has(result.status)).length;
      this.stats.sent += accepted;
      this.stats.rejected += batch.length - accepted;
    } catch (error) {
      if (error instanceof KindgiApiError) this.stats.rejected += batch.length;
      else if (error instanceof ConsoleUnavailable) this.stats.dropped += batch.length;
      else throw error;
    }
  }
}

interface NodeProcess {
  on(event: "beforeExit", listener: () => void): unknown;
  off(event: "beforeExit", listener: () => void): unknown;
}

/** Node's `process`, where there is one (not in browsers or most edge runtimes). */
function nodeProcess(): NodeProcess | undefined {
  const candidate = (globalThis as { process?: Partial<NodeProcess> }).process;
  return typeof candidate?.on === "function" && typeof candidate.off === "function"
    ? (candidate as NodeProcess)
    : undefined;
}

/** A timer that does not keep Node's process alive by itself (exit flushes the queue). */
function unref<T>(timer: T): T {
  (timer as { unref?: () => void }).unref?.();
  return timer;
}
