/**
 * The Vercel AI SDK adapter: a language-model middleware for `wrapLanguageModel` (`ai` 6) that
 * asks the console for a verdict at each stage of a turn, under one trace id:
 *
 * - `input`, before the model runs on a new user message;
 * - `tool-call`, for each tool call the model proposes, before the SDK can execute it;
 * - `output`, on the model's answer.
 *
 * `generateText`: a halted verdict throws `KindgiHalted` out of the model call (and so out of
 * `generateText`), before the SDK sees the result: a forbidden tool never runs, a refused answer
 * is never returned.
 *
 * `streamText`: the input is checked before the model's stream starts. The step's tool calls are
 * held back until the model has finished the step, then checked, and only passed to the SDK (which
 * runs them) when none is halted. The answer's text (and its sources) are held too, by default,
 * until the output verdict allows them (`holdStreamedText: false` lets them stream as they come, the
 * verdict then arriving after the text). A halt ends the stream: an `error` part carrying the
 * `KindgiHalted` (streamText's `onError` and `fullStream` see it), then the stream fails with it, so
 * that iterating `textStream` or `fullStream` throws it and `await result.text` rejects with it.
 */
import type { Kindgi } from "./client.js";
import type { RunTrace, ToolCall, Verdict } from "./types.js";

// The parts of `ai` 6's LanguageModelV3Middleware the adapter reads, stated here so that the
// package builds without `ai` (the tests pass the middleware to ai's own wrapLanguageModel).
type TextPart = { type: string; text?: string };
type PromptMessage =
  | { role: "system"; content: string }
  | { role: "user"; content: TextPart[] }
  | { role: "assistant"; content: (TextPart | { type: "tool-call"; toolCallId: string; toolName: string; input: unknown })[] }
  | {
      role: "tool";
      content: (
        | { type: "tool-result"; toolCallId: string; output: { type: string; value?: unknown; reason?: string } }
        | { type: "tool-approval-response" }
      )[];
    };
type Prompt = PromptMessage[];
interface CallOptions {
  prompt: Prompt;
  providerOptions?: Record<string, Record<string, unknown>>;
}
type ContentPart =
  | TextPart
  | { type: "tool-call"; toolCallId: string; toolName: string; input: string; providerExecuted?: boolean }
  | { type: "source"; sourceType: "url"; id: string; url: string; title?: string }
  | { type: "source"; sourceType: "document"; id: string; title: string };
interface GenerateResult {
  content: ContentPart[];
}
/** A stream part (LanguageModelV3StreamPart): the adapter reads the ones `Read` states, and
 * passes the others through as they are. */
type StreamPart = { type: string };
type Read =
  | { type: "text-start" | "text-end"; id: string }
  | { type: "text-delta"; id: string; delta: string }
  | Extract<ContentPart, { type: "tool-call" | "source" }>
  | { type: "finish" };
interface StreamResult<P extends StreamPart> {
  stream: ReadableStream<P>;
}
/** A language-model middleware for `wrapLanguageModel` (`ai` 6, specification v3). */
export interface KindgiLanguageModelMiddleware {
  readonly specificationVersion: "v3";
  wrapGenerate<R extends GenerateResult>(options: { doGenerate: () => PromiseLike<R>; params: CallOptions }): Promise<R>;
  wrapStream<P extends StreamPart, R extends StreamResult<P>>(options: {
    doStream: () => PromiseLike<R>;
    params: CallOptions;
  }): Promise<R>;
}
type Message = RunTrace["messages"] extends (infer M)[] | undefined ? M : never;

export interface KindgiMiddlewareOptions {
  /** The client that asks the console (its failMode decides when the console cannot answer). */
  kindgi: Kindgi;
  /** The agent id of every turn (matched by a guardrail's scope.agents). */
  agent: string;
  /** The flow id of every turn (matched by scope.flows). */
  flow?: string;
  /** The turn's trace id. Else `providerOptions.kindgi.traceId` of the call; else an id the
   * middleware makes when a turn starts (its last message the user's) and keeps for the steps
   * that carry on that conversation. */
  traceId?: (params: CallOptions) => string | undefined;
  /** streamText: hold the answer's text and sources back until the output verdict allows them
   * (default true: a halted answer never reaches the caller). false streams them as they come,
   * the verdict (and a halt's error) arriving after the text. */
  holdStreamedText?: boolean;
}

/** Thrown when a verdict halts the turn: at `tool-call`, the tool was not run. */
export class KindgiHalted extends Error {
  override readonly name = "KindgiHalted";
  constructor(
    readonly verdict: Verdict,
    readonly traceId: string,
    readonly toolCall?: ToolCall,
  ) {
    const by = verdict.haltedBy ?? verdict.error ?? verdict.reason ?? "the console";
    const what = toolCall ? `tool call ${toolCall.name}` : `turn at ${verdict.stage}`;
    super(`Kindgi halted the ${what} (${by})`);
  }
}

/** How many turns the middleware remembers the ids of, when the caller gives none. */
const REMEMBERED_TURNS = 1000;

/** The middleware: `wrapLanguageModel({ model, middleware: kindgiMiddleware({ kindgi, agent }) })`. */
export function kindgiMiddleware(options: KindgiMiddlewareOptions): KindgiLanguageModelMiddleware {
  const { kindgi } = options;
  const turns = new Map<string, string>();

  const traceIdOf = (params: CallOptions): string => {
    const given = options.traceId?.(params) ?? params.providerOptions?.["kindgi"]?.["traceId"];
    if (typeof given === "string" && given) return given;
    // The conversation up to the turn's user message names the turn for its later steps.
    const asked = params.prompt.map((message) => message.role).lastIndexOf("user");
    const key = JSON.stringify(params.prompt.slice(0, asked + 1));
    let id = turns.get(key);
    if (id === undefined || params.prompt.at(-1)?.role === "user") {
      id = `ai-${crypto.randomUUID()}`;
      turns.delete(key);
      turns.set(key, id);
      if (turns.size > REMEMBERED_TURNS) turns.delete(turns.keys().next().value as string);
    }
    return id;
  };

  const base = (params: CallOptions, id: string): RunTrace => {
    const { input, messages, toolCalls } = fromPrompt(params.prompt);
    return {
      id,
      agent: options.agent,
      ...(options.flow !== undefined ? { flow: options.flow } : {}),
      input,
      messages,
      ...(toolCalls.length ? { toolCalls } : {}),
    };
  };

  /** The halt of the turn's input, if any (only a step that starts from the user's message). */
  const inputHalt = async (params: CallOptions, turn: RunTrace): Promise<KindgiHalted | undefined> => {
    if (params.prompt.at(-1)?.role !== "user") return undefined;
    const verdict = await kindgi.checkInput(turn);
    return verdict.halted ? new KindgiHalted(verdict, turn.id) : undefined;
  };

  /** The halt of a step the model has finished, if any: its tool calls, each before it may run
   * (with the calls proposed before it in the step, as the turn so far), or else its answer. */
  const stepHalt = async (turn: RunTrace, content: readonly ContentPart[]): Promise<KindgiHalted | undefined> => {
    const proposed = content.flatMap((part) =>
      isToolCall(part) && !part.providerExecuted
        ? [{ id: part.toolCallId, name: part.toolName, arguments: parsed(part.input) }]
        : [],
    );
    if (proposed.length) {
      const calls = [...(turn.toolCalls ?? [])];
      for (const call of proposed) {
        const verdict = await kindgi.checkToolCall({ ...turn, toolCalls: calls }, call);
        if (verdict.halted) return new KindgiHalted(verdict, turn.id, call);
        calls.push(call);
      }
      return undefined;
    }
    const verdict = await kindgi.checkOutput(answered(turn, content));
    return verdict.halted ? new KindgiHalted(verdict, turn.id) : undefined;
  };

  return {
    specificationVersion: "v3",
    wrapGenerate: async <R extends GenerateResult>({ doGenerate, params }: { doGenerate: () => PromiseLike<R>; params: CallOptions }) => {
      const turn = base(params, traceIdOf(params));
      const atInput = await inputHalt(params, turn);
      if (atInput) throw atInput;
      const result = await doGenerate();
      const atStep = await stepHalt(turn, result.content);
      if (atStep) throw atStep;
      return result;
    },
    wrapStream: async <P extends StreamPart, R extends StreamResult<P>>({
      doStream,
      params,
    }: {
      doStream: () => PromiseLike<R>;
      params: CallOptions;
    }) => {
      const turn = base(params, traceIdOf(params));
      const atInput = await inputHalt(params, turn);
      // The model is not called: the stream is the halt alone (a result without request or response).
      if (atInput) return { stream: halting(atInput) } as unknown as R;
      const result = await doStream();
      return { ...result, stream: checked(result.stream, (content) => stepHalt(turn, content), options.holdStreamedText ?? true) };
    },
  };
}

/**
 * The model's stream, its step checked when the model has finished it (its `finish` part, or its
 * end): tool calls are held until then; text and sources too when `hold`. On a halt, the held
 * parts are dropped and the stream ends with the halt (`halting`); otherwise they follow in order.
 */
function checked<P extends StreamPart>(
  source: ReadableStream<P>,
  verdict: (content: ContentPart[]) => Promise<KindgiHalted | undefined>,
  hold: boolean,
): ReadableStream<P> {
  const reader = source.getReader();
  const content: ContentPart[] = [];
  const texts = new Map<string, { type: "text"; text: string }>();
  let held: P[] = [];
  let settled = false;
  let failed: KindgiHalted | undefined;

  /** The verdict on the step: the parts to pass on now (the held ones, then `last`). */
  const settle = async (last: P[]): Promise<P[]> => {
    settled = true;
    failed = await verdict(content);
    if (failed) {
      await reader.cancel(failed).catch(() => undefined);
      return [errorPart<P>(failed)];
    }
    const out = [...held, ...last];
    held = [];
    return out;
  };

  return new ReadableStream<P>({
    async pull(controller) {
      if (failed) return controller.error(failed);
      for (;;) {
        const next = await reader.read();
        if (next.done) {
          // A stream without a finish part is checked at its end all the same.
          if (!settled) for (const part of await settle([])) controller.enqueue(part);
          if (!failed) controller.close();
          return;
        }
        const given = next.value;
        const part = given as unknown as Read;
        let keep = false;
        if (part.type === "tool-call") {
          content.push(part);
          keep = !part.providerExecuted;
        } else if (part.type === "text-start") {
          const text = { type: "text" as const, text: "" };
          texts.set(part.id, text);
          content.push(text);
          keep = hold;
        } else if (part.type === "text-delta") {
          const text = texts.get(part.id);
          if (text) text.text += part.delta;
          else content.push({ type: "text", text: part.delta });
          keep = hold;
        } else if (part.type === "text-end") {
          keep = hold;
        } else if (part.type === "source") {
          content.push(part);
          keep = hold;
        } else if (part.type === "finish" && !settled) {
          for (const out of await settle([given])) controller.enqueue(out);
          return;
        }
        if (keep) {
          held.push(given);
          continue;
        }
        controller.enqueue(given);
        return;
      }
    },
    cancel(reason) {
      return reader.cancel(reason);
    },
  });
}

/** A stream of the halt alone: its `error` part, then the stream fails with it. */
function halting<P extends StreamPart>(halt: KindgiHalted): ReadableStream<P> {
  const queue: P[] = [errorPart<P>(halt)];
  return new ReadableStream<P>({
    pull(controller) {
      const part = queue.shift();
      if (part) controller.enqueue(part);
      else controller.error(halt);
    },
  });
}

/** The turn as the console reads it: the user's input, the messages, the tool calls with their results. */
function fromPrompt(prompt: Prompt): { input: string | null; messages: Message[]; toolCalls: ToolCall[] } {
  const messages: Message[] = [];
  const toolCalls: ToolCall[] = [];
  let input: string | null = null;
  for (const message of prompt) {
    if (message.role === "system") {
      messages.push({ role: "system", content: message.content });
    } else if (message.role === "user") {
      input = texts(message.content);
      messages.push({ role: "user", content: input });
    } else if (message.role === "assistant") {
      const said = texts(message.content);
      messages.push({ role: "assistant", content: said || null });
      for (const part of message.content) {
        if ("toolCallId" in part) toolCalls.push({ id: part.toolCallId, name: part.toolName, arguments: part.input });
      }
    } else {
      for (const part of message.content) {
        if (part.type !== "tool-result") continue;
        const output = part.output;
        const value = "value" in output ? output.value : (output.reason ?? output.type);
        const error = output.type.startsWith("error") || output.type === "execution-denied";
        const call = toolCalls.find((known) => known.id === part.toolCallId);
        if (call) Object.assign(call, error ? { error: typeof value === "string" ? value : JSON.stringify(value) } : { result: value });
        messages.push({
          role: "tool",
          toolCallId: part.toolCallId,
          content: typeof value === "string" ? value : JSON.stringify(value),
        });
      }
    }
  }
  return { input, messages, toolCalls };
}

/** The turn with the model's answer: its text, and its sources as citations when it has any. */
function answered(turn: RunTrace, content: readonly ContentPart[]): RunTrace {
  const output = texts(content);
  const citations = content.flatMap((part) =>
    isSource(part)
      ? [{ source: part.sourceType === "url" ? part.url : part.id, ...(part.title ? { title: part.title } : {}) }]
      : [],
  );
  return {
    ...turn,
    messages: [...(turn.messages ?? []), { role: "assistant", content: output }],
    output,
    ...(citations.length ? { citations } : {}),
  };
}

function texts(parts: readonly { type: string; text?: string }[]): string {
  return parts
    .flatMap((part) => (part.type === "text" && part.text ? [part.text] : []))
    .join("\n");
}

/** A tool call's input as the SDK hands it to the tool: parsed JSON (the model sends a string). */
function parsed(input: string): unknown {
  try {
    return JSON.parse(input);
  } catch {
    return input;
  }
}

/** The stream's `error` part (LanguageModelV3StreamPart has one: `{ type: "error", error }`). */
function errorPart<P extends StreamPart>(error: KindgiHalted): P {
  return { type: "error", error } as unknown as P;
}

function isToolCall(part: ContentPart): part is Extract<ContentPart, { type: "tool-call" }> {
  return part.type === "tool-call";
}

function isSource(part: ContentPart): part is Extract<ContentPart, { type: "source" }> {
  return part.type === "source";
}
