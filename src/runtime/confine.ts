// The runtime's use of the sandbox: every execution's spawn recipe comes from
// here, and so does the honest reason it ended with. With a Sandbox (the node
// always has one, `--confine off` included) the recipe is the sandbox's
// Prepared; a bare Computer without one spawns the argv untouched, with the
// same checks of `limits` and `network` so that a request is refused the same
// way everywhere. Kept apart from process.ts so the process code only sees
// "what to spawn" and "what the exit meant".

import { builtInMaxima, DEFAULT_LIMITS, resolveLimits } from "../sandbox/limits.js";
import { checkPolicy, describe } from "../sandbox/network.js";
import { verdictOf } from "../sandbox/sandbox.js";
import type {
  ExitVerdict,
  LimitName,
  Limits,
  Prepared,
  Sandbox,
  SandboxExecSpec,
  SpawnedExit,
} from "../sandbox/types.js";
import { ComputerError } from "../wire/errors.js";
import type { ExitReason } from "../wire/types.js";

export type { Prepared, Sandbox };

/** The recipe for one execution: through the sandbox when there is one. */
export async function prepareExec(
  sandbox: Sandbox | undefined,
  req: SandboxExecSpec,
): Promise<Prepared> {
  if (sandbox) {
    return sandbox.prepare(req);
  }
  const limits = resolveLimits(DEFAULT_LIMITS, builtInMaxima(), req.limits);
  if (req.network !== undefined && req.network !== "host") {
    throw new ComputerError(
      "EUNAVAILABLE",
      `network ${describe(checkPolicy(req.network, "network"))} needs a sandbox; this computer has none`,
    );
  }
  return {
    file: req.argv[0]!,
    args: req.argv.slice(1),
    env: req.env,
    cwd: req.cwd,
    detached: true,
    limits,
    network: "host",
    confined: false,
    afterExit: async (status: SpawnedExit) => verdictOf(status, false, []),
    dispose: async () => {},
  };
}

/** Words for the stderr notice the runtime writes when a limit ended an execution. */
const LIMIT_TEXT: Record<LimitName, (l: Limits) => string> = {
  memory: (l) => `memory limit (${l.memoryBytes} bytes)`,
  pids: (l) => `process limit (${l.pids} processes)`,
  cpu: (l) => `CPU time limit (${l.cpuSeconds} s)`,
  file: (l) => `file size limit (${l.fileSizeBytes} bytes)`,
  tmp: (l) => `/tmp size limit (${l.tmpBytes} bytes)`,
  openFiles: (l) => `open files limit (${l.openFiles})`,
  wallTime: (l) => `wall time limit (${l.wallTimeMs} ms)`,
  output: (l) => `output limit (${l.outputBytes} bytes)`,
};

/**
 * The exit as logged: the sandbox's decoding of the status, and the reason.
 * A reason the runtime chose (killed, timeout, an output limit) stands; else
 * the limit that ended the execution, if one did.
 */
export function exitOf(
  verdict: ExitVerdict,
  runtimeReason: ExitReason | null,
  runtimeLimit: LimitName | null,
  limits: Limits,
): { code: number | null; signal: NodeJS.Signals | null; reason: ExitReason; notice?: string } {
  const limit = runtimeLimit ?? (runtimeReason ? null : (verdict.limit ?? null));
  const reason: ExitReason = runtimeReason ?? verdict.reason ?? "exited";
  const out: ReturnType<typeof exitOf> = { code: verdict.code, signal: verdict.signal, reason };
  if (limit && (reason === "oom" || reason === "limit")) {
    out.notice = `agent-computer: stopped by the ${LIMIT_TEXT[limit](limits)} [limit=${limit}]\n`;
  }
  return out;
}
