/**
 * The controller as `npm start` runs it (`node src/programs/main.ts run`), as a child process of
 * the test: free loopback ports for its probes and metrics, its JSON log lines kept for
 * assertions, and a reliable stop (SIGTERM, then SIGKILL) that test hooks call for every child
 * still running. A child that outlives the test process is killed by an exit hook, or, when the
 * test process is SIGKILLed, by a watchdog preloaded into the child.
 */
import { type ChildProcess, spawn } from "node:child_process"
import { createWriteStream, readdirSync, readFileSync } from "node:fs"
import { setTimeout as sleep } from "node:timers/promises"
import { OPTION_SPECS } from "../../../src/programs/cli.ts"
import { ROOT, freePort, onProcessExit } from "../cluster.ts"
import { parseProm, sum } from "../../../src/testing/prom.ts"

const MAIN = "src/programs/main.ts"
const MAX_LINES = 20_000
const ORPHAN_WATCHDOG =
  "data:text/javascript,const parent = process.ppid; setInterval(() => { if (process.ppid !== parent) process.kill(process.pid, 'SIGKILL') }, 500).unref()"

export interface Exit {
  readonly code: number | null
  readonly signal: NodeJS.Signals | null
}

export interface LogLine {
  readonly message: string
  readonly logLevel: string
  readonly annotations: Readonly<Record<string, unknown>>
  /** The raw line (JSON lines of stdout, plain lines of stderr). */
  readonly raw: string
}

export interface ControllerOptions {
  readonly kubeconfig: string
  /** `--namespace`: the IPPools, reservations and (by default) the Lease. */
  readonly namespace: string
  /** Lease identity (POD_NAME); a readable name in logs and in the Lease. */
  readonly identity?: string
  /** Extra flags, e.g. ["--no-leader-elect"], ["--terminating-grace", "1s"]. */
  readonly args?: ReadonlyArray<string>
  /** The program to run instead of src/programs/main.ts (the image's bundle, say). */
  readonly script?: string
  /** Extra environment variables. */
  readonly env?: Readonly<Record<string, string>>
  /** Node flags before the program (the image's, say). */
  readonly nodeArgs?: ReadonlyArray<string>
  /** Every line is also appended to this file (for runs too long to keep every line in memory). */
  readonly logFile?: string
  /** Called with every line as it arrives. */
  readonly onLine?: (line: LogLine) => void
}

export interface ControllerProcess {
  readonly identity: string
  readonly pid: number
  readonly healthPort: number
  readonly metricsPort: number
  readonly logs: () => ReadonlyArray<LogLine>
  /** What the process wrote on stdout alone (its first 64 KiB); logs go to stderr. */
  readonly stdout: () => string
  /** Every line, for failure messages. */
  readonly tail: (lines?: number) => string
  readonly running: () => boolean
  readonly exited: Promise<Exit>
  /** HTTP status of GET on the health port (0 when nothing answers). */
  readonly probe: (path: "/healthz" | "/readyz") => Promise<number>
  /** The /metrics text ("" when nothing answers). */
  readonly metrics: () => Promise<string>
  /** The samples of /metrics with these labels, summed (sampleOf); undefined when absent. */
  readonly metric: (name: string, labels?: Readonly<Record<string, string>>) => Promise<number | undefined>
  /** SIGTERM, then SIGKILL after `graceMs`; resolves with how it exited. */
  readonly stop: (graceMs?: number) => Promise<Exit>
  /** SIGKILL (a crashed node). */
  readonly kill: () => Promise<Exit>
}

const children = new Set<ControllerProcess & { readonly child: ChildProcess }>()
let exitHook = false

export { freePort }

const get = async (url: string): Promise<{ readonly status: number; readonly body: string }> => {
  try {
    const res = await fetch(url, { signal: AbortSignal.timeout(3_000) })
    return { status: res.status, body: await res.text() }
  } catch {
    return { status: 0, body: "" }
  }
}

/**
 * The samples of `name` whose labels include `labels`, summed (`name{a="x",b="y"} 3`); undefined
 * when there is none. With every label given that is the one sample.
 */
export const sampleOf = (text: string, name: string, labels: Readonly<Record<string, string>> = {}): number | undefined => {
  const samples = parseProm(text, (n) => n === name).filter((s) => Object.entries(labels).every(([k, v]) => s.labels[k] === v))
  return samples.length === 0 ? undefined : sum(samples, name)
}

/** The env of the child: ours, without anything the controller's Config would read. */
const childEnv = (identity: string): NodeJS.ProcessEnv => {
  const env: NodeJS.ProcessEnv = { ...process.env }
  for (const o of OPTION_SPECS) delete env[o.env]
  for (const k of ["POD_NAME", "POD_NAMESPACE", "KUBERNETES_SERVICE_HOST", "KUBERNETES_SERVICE_PORT", "NODE_OPTIONS"]) delete env[k]
  return { ...env, POD_NAME: identity }
}

let counter = 0

/** Starts the controller; resolves once its process is spawned (not yet ready: poll `probe`). */
export const startController = async (options: ControllerOptions): Promise<ControllerProcess> => {
  if (!exitHook) {
    exitHook = true
    onProcessExit(() => {
      for (const c of children) if (c.running()) c.child.kill("SIGKILL")
    })
  }
  const [healthPort, metricsPort, inspectPort] = [await freePort(), await freePort(), await freePort()]
  const identity = options.identity ?? `ctl-${process.pid}-${++counter}`
  const args = [
    options.script ?? MAIN,
    "run",
    "--kubeconfig",
    options.kubeconfig,
    "--namespace",
    options.namespace,
    "--health-port",
    String(healthPort),
    "--metrics-port",
    String(metricsPort),
    "--log-format",
    "json",
    ...(options.args ?? [])
  ]
  // process.execPath: the Node running vitest (the node@24 devDependency through npm), as `npm start`
  // uses. The preloaded watchdog only makes the child die with us should we be SIGKILLed (it is
  // then re-parented): no controller outlives its test run. The program itself runs unchanged.
  // --inspect-port only names the port: the inspector stays off unless jsStack's SIGUSR1 opens it.
  const child = spawn(process.execPath, [`--inspect-port=127.0.0.1:${inspectPort}`, "--import", ORPHAN_WATCHDOG, ...(options.nodeArgs ?? []), ...args], {
    cwd: ROOT,
    env: { ...childEnv(identity), ...options.env },
    stdio: ["ignore", "pipe", "pipe"]
  })
  const lines: Array<LogLine> = []
  const logFile = options.logFile === undefined ? undefined : createWriteStream(options.logFile, { flags: "a" })
  const keep = (raw: string) => {
    if (raw.trim() === "") return
    logFile?.write(`${raw}\n`)
    let parsed: Partial<LogLine> = {}
    try {
      const o = JSON.parse(raw) as { message?: unknown; logLevel?: unknown; annotations?: unknown }
      parsed = {
        message: Array.isArray(o.message) ? o.message.map(String).join(" ") : String(o.message ?? ""),
        logLevel: String(o.logLevel ?? ""),
        annotations: typeof o.annotations === "object" && o.annotations !== null ? (o.annotations as Record<string, unknown>) : {}
      }
    } catch {
      parsed = { message: raw, logLevel: "RAW", annotations: {} }
    }
    const line = { message: parsed.message ?? raw, logLevel: parsed.logLevel ?? "RAW", annotations: parsed.annotations ?? {}, raw }
    lines.push(line)
    options.onLine?.(line)
    if (lines.length > MAX_LINES) lines.splice(0, lines.length - MAX_LINES)
  }
  const pipe = (stream: NodeJS.ReadableStream | null) => {
    let buffer = ""
    stream?.setEncoding("utf8")
    stream?.on("data", (chunk: string) => {
      buffer += chunk
      const parts = buffer.split("\n")
      buffer = parts.pop()!
      parts.forEach(keep)
    })
    stream?.on("end", () => keep(buffer))
  }
  pipe(child.stdout)
  pipe(child.stderr)
  let stdoutText = ""
  child.stdout?.on("data", (chunk: string) => void (stdoutText.length < 65_536 && (stdoutText += chunk)))
  let done = false
  const exited = new Promise<Exit>((resolve) => {
    // "close", not "exit": by then its stdout and stderr are read to the end (every log line is in).
    child.once("close", (code, signal) => {
      done = true
      logFile?.end()
      resolve({ code, signal })
    })
    child.once("error", (e) => {
      done = true
      keep(`spawn error: ${e.message}`)
      resolve({ code: null, signal: null })
    })
  })

  const signalAndWait = async (signal: NodeJS.Signals, graceMs: number): Promise<Exit> => {
    if (!done) child.kill(signal)
    let timer: NodeJS.Timeout | undefined
    const late = new Promise<"late">((resolve) => (timer = setTimeout(() => resolve("late"), graceMs)))
    const first = await Promise.race([exited, late])
    clearTimeout(timer)
    if (first === "late" && !done) {
      // Before the SIGKILL, what the process is doing, into its log tail: evidence for a hang.
      if (child.pid !== undefined) keep(`[harness] still running ${graceMs} ms after ${signal}: ${await procView(child.pid)}`)
      if (child.pid !== undefined && !done) keep(`[harness] native stack of the main thread: ${await nativeStack(child.pid)}`)
      if (child.pid !== undefined && !done) keep(`[harness] JavaScript stack when paused: ${await jsStack(child.pid, inspectPort)}`)
      if (!done) child.kill("SIGKILL")
    }
    return exited
  }

  const handle = {
    child,
    identity,
    pid: child.pid ?? -1,
    healthPort,
    metricsPort,
    logs: () => lines,
    stdout: () => stdoutText,
    tail: (n = 40) => lines.slice(-n).map((l) => l.raw).join("\n"),
    running: () => !done,
    exited,
    probe: async (path: "/healthz" | "/readyz") => (await get(`http://127.0.0.1:${healthPort}${path}`)).status,
    metrics: async () => (await get(`http://127.0.0.1:${metricsPort}/metrics`)).body,
    metric: async (name: string, labels: Readonly<Record<string, string>> = {}) =>
      sampleOf((await get(`http://127.0.0.1:${metricsPort}/metrics`)).body, name, labels),
    stop: (graceMs = 15_000) => signalAndWait("SIGTERM", graceMs),
    kill: () => signalAndWait("SIGKILL", 5_000)
  }
  children.add(handle)
  void exited.then(() => children.delete(handle))
  return handle
}

/**
 * A process seen from /proc (Linux), needing nothing from it: its state, the CPU it used over one
 * second (busy in a loop, or waiting) and where each thread waits in the kernel (wchan: a pipe
 * write, a futex, epoll). For a controller that did not exit after SIGTERM: its own deadline did
 * not fire once (stop 13), which points at a blocked event loop.
 */
export const procView = async (pid: number): Promise<string> => {
  const fields = (file: string) => {
    const stat = readFileSync(file, "utf8")
    return { name: stat.slice(stat.indexOf("(") + 1, stat.lastIndexOf(")")), rest: stat.slice(stat.lastIndexOf(")") + 2).split(" ") }
  }
  // After the name: [0] state, [11] utime, [12] stime (clock ticks).
  const ticks = () => {
    const { rest } = fields(`/proc/${pid}/stat`)
    return Number(rest[11]) + Number(rest[12])
  }
  try {
    const before = ticks()
    await sleep(1_000)
    const used = ticks() - before
    const threads = readdirSync(`/proc/${pid}/task`).map((tid) => {
      const { name, rest } = fields(`/proc/${pid}/task/${tid}/stat`)
      let wchan = ""
      try {
        wchan = readFileSync(`/proc/${pid}/task/${tid}/wchan`, "utf8")
      } catch {
        // not readable here
      }
      return `${name}:${rest[0]}${wchan !== "" && wchan !== "0" ? `@${wchan}` : ""}`
    })
    return `state ${fields(`/proc/${pid}/stat`).rest[0]}, ${used} CPU ticks in 1 s, threads ${threads.join(" ")}`
  } catch (e) {
    return `no /proc view (${e instanceof Error ? e.message : String(e)})`
  }
}

/**
 * Where the main thread is in native code (gdb attached in batch mode, when the machine has it):
 * for a process whose event loop is stuck outside JavaScript, where the inspector cannot start
 * (stop 24: the main thread on a whole core, no inspector answered SIGUSR1).
 */
export const nativeStack = (pid: number, timeoutMs = 20_000): Promise<string> =>
  new Promise((resolve) => {
    const gdb = spawn("gdb", ["-p", String(pid), "-batch", "-nx", "-ex", "bt 40"], { stdio: ["ignore", "pipe", "pipe"] })
    let out = ""
    gdb.stdout?.on("data", (b: Buffer) => void (out += b.toString()))
    const timer = setTimeout(() => gdb.kill("SIGKILL"), timeoutMs)
    gdb.on("error", (e) => {
      clearTimeout(timer)
      resolve(`no gdb (${e.message})`)
    })
    gdb.on("close", () => {
      clearTimeout(timer)
      const frames = out.split("\n").filter((l) => /^#\d+/.test(l)).map((l) => l.replace(/\s+/g, " ").slice(0, 200))
      resolve(frames.length > 0 ? frames.join(" | ") : `gdb printed no frames: ${out.slice(-300).replace(/\s+/g, " ")}`)
    })
  })

/** Stops every child still running (SIGTERM, then SIGKILL): for afterEach/afterAll. */
export const stopAllControllers = async (graceMs = 10_000): Promise<void> => {
  await Promise.all([...children].map((c) => c.stop(graceMs)))
}

/** A one-shot command of the program (`audit`, …) as a user runs it: its exit code and both streams, kept apart; `input` is its stdin. */
export const runCommand = (
  command: string,
  options: { readonly kubeconfig: string; readonly namespace: string; readonly args?: ReadonlyArray<string>; readonly input?: string }
) =>
  new Promise<{ readonly code: number | null; readonly stdout: string; readonly stderr: string }>((resolve, reject) => {
    const args = [MAIN, command, "--kubeconfig", options.kubeconfig, "--namespace", options.namespace, ...(options.args ?? [])]
    const stdin = options.input === undefined ? "ignore" : "pipe"
    const child = spawn(process.execPath, ["--import", ORPHAN_WATCHDOG, ...args], { cwd: ROOT, env: childEnv(`cmd-${process.pid}-${++counter}`), stdio: [stdin, "pipe", "pipe"] })
    let stdout = ""
    let stderr = ""
    child.stdout?.on("data", (b: Buffer) => void (stdout += b.toString()))
    child.stderr?.on("data", (b: Buffer) => void (stderr += b.toString()))
    child.on("error", reject)
    child.on("close", (code) => resolve({ code, stdout, stderr }))
    if (options.input !== undefined) child.stdin?.end(options.input)
  })

/**
 * Where the JavaScript of a live process is, right now: SIGUSR1 opens its inspector (on the port
 * its --inspect-port named), and the Chrome DevTools protocol pauses it and reads its call stack.
 * This works when its event loop is blocked (a busy loop, which procView shows as a thread using a
 * whole core), since V8 breaks into running code; an idle process pauses at its next task.
 */
export const jsStack = async (pid: number, port: number, timeoutMs = 5_000): Promise<string> => {
  try {
    process.kill(pid, "SIGUSR1")
    const deadline = Date.now() + timeoutMs
    let url: string | undefined
    while (url === undefined && Date.now() < deadline) {
      try {
        const res = await fetch(`http://127.0.0.1:${port}/json/list`, { signal: AbortSignal.timeout(1_000) })
        url = ((await res.json()) as Array<{ webSocketDebuggerUrl?: string }>)[0]?.webSocketDebuggerUrl
      } catch {
        await sleep(100)
      }
    }
    if (url === undefined) return `no inspector on 127.0.0.1:${port}`
    const ws = new WebSocket(url)
    return await new Promise<string>((resolve) => {
      const timer = setTimeout(() => {
        ws.close()
        resolve("the inspector answered, but the process did not pause")
      }, Math.max(0, deadline - Date.now()))
      ws.addEventListener("open", () => {
        ws.send(JSON.stringify({ id: 1, method: "Debugger.enable" }))
        ws.send(JSON.stringify({ id: 2, method: "Debugger.pause" }))
      })
      ws.addEventListener("message", (m) => {
        const msg = JSON.parse(String(m.data)) as {
          method?: string
          params?: { callFrames?: Array<{ functionName: string; url: string; location: { lineNumber: number; columnNumber: number } }> }
        }
        if (msg.method !== "Debugger.paused") return
        clearTimeout(timer)
        const frames = (msg.params?.callFrames ?? []).map((f) => `${f.functionName || "<anonymous>"} (${f.url.replace(`file://${ROOT}`, "")}:${f.location.lineNumber + 1}:${f.location.columnNumber + 1})`)
        ws.close()
        resolve(frames.join(" <- "))
      })
      ws.addEventListener("error", () => {
        clearTimeout(timer)
        resolve("the inspector's WebSocket failed")
      })
    })
  } catch (e) {
    return `no stack (${e instanceof Error ? e.message : String(e)})`
  }
}
