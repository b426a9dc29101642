export { Kindgi } from "./client.js";
export { ConsoleUnavailable, KindgiApiError } from "./transport.js";
export type {
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
