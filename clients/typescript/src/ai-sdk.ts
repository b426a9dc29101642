/**
 * The Vercel AI SDK adapter: a language-model middleware for `wrapLanguageModel` (`ai` 6) that
 * asks the console for a verdict at each stage of a turn, under one trace id:
 *
 * - `input`, before the model runs on a new user message;
 * - `tool-call`, for each tool call the model proposes, before the SDK can execute it;
 * - `output`, on the model's answer.
 *
 * A halted verdict throws `KindgiHalted` out of the model call (and so out of `generateText`),
 * before the SDK sees the result: a forbidden tool never runs, a refused answer is never
 * returned. Streaming (`streamText`) is not checked yet and throws rather than pass unchecked.
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
/** A language-model middleware for `wrapLanguageModel` (`ai` 6, specification v3). */
export interface KindgiLanguageModelMiddleware {
  readonly specificationVersion: "v3";
  wrapGenerate<R extends GenerateResult>(options: { doGenerate: () => PromiseLike<R>; params: CallOptions }): Promise<R>;
  wrapStream(options: { params: CallOptions }): never;
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

  const halt = (verdict: Verdict, id: string, call?: ToolCall): void => {
    if (verdict.halted) throw new KindgiHalted(verdict, id, call);
  };

  return {
    specificationVersion: "v3",
    wrapGenerate: async <R extends GenerateResult>({ doGenerate, params }: { doGenerate: () => PromiseLike<R>; params: CallOptions }) => {
      const id = traceIdOf(params);
      const turn = base(params, id);
      if (params.prompt.at(-1)?.role === "user") halt(await kindgi.checkInput(turn), id);

      const result = await doGenerate();
      const proposed = result.content.flatMap((part) =>
        isToolCall(part) && !part.providerExecuted
          ? [{ id: part.toolCallId, name: part.toolName, arguments: parsed(part.input) }]
          : [],
      );
      if (proposed.length) {
        // Each call is checked with the calls proposed before it in this step, as the turn so far.
        const calls = [...(turn.toolCalls ?? [])];
        for (const call of proposed) {
          halt(await kindgi.checkToolCall({ ...turn, toolCalls: calls }, call), id, call);
          calls.push(call);
        }
        return result;
      }
      halt(await kindgi.checkOutput(answered(turn, result)), id);
      return result;
    },
    wrapStream: () => {
      throw new Error("kindgiMiddleware checks generateText only: streaming is not checked yet");
    },
  };
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
function answered(turn: RunTrace, result: GenerateResult): RunTrace {
  const output = texts(result.content);
  const citations = result.content.flatMap((part) =>
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

function isToolCall(part: ContentPart): part is Extract<ContentPart, { type: "tool-call" }> {
  return part.type === "tool-call";
}

function isSource(part: ContentPart): part is Extract<ContentPart, { type: "source" }> {
  return part.type === "source";
}
