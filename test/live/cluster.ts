/**
 * An envtest-style control plane for the real-API-server test tier: one etcd and one
 * kube-apiserver on free loopback ports, an admin token and a kubeconfig, all in one temp
 * dir. Flags and the stop order (apiserver first) are the ones scripts/ENVTEST-NOTES.md
 * verified. Runs in vitest's main process, which may be an old Node: node: modules only.
 */
import { type ChildProcess, execFile, spawn } from "node:child_process"
import { generateKeyPairSync, randomBytes } from "node:crypto"
import * as fs from "node:fs"
import * as https from "node:https"
import * as net from "node:net"
import * as os from "node:os"
import * as path from "node:path"
import { setTimeout as sleep } from "node:timers/promises"
import { fileURLToPath } from "node:url"

export const ROOT = fileURLToPath(new URL("../..", import.meta.url))

export interface ControlPlane {
  readonly dir: string
  /** `https://127.0.0.1:<port>` */
  readonly server: string
  readonly token: string
  readonly kubeconfigPath: string
  /** The apiserver's self-signed serving cert (leaf + CA), trusted by the kubeconfig. */
  readonly caPem: string
  /** SIGTERM, wait (SIGKILL after a grace period); etcd keeps running. */
  readonly stopApiServer: () => Promise<void>
  /** Starts it again with the same port, certs and etcd; resolves once /readyz answers ok. */
  readonly startApiServer: () => Promise<void>
  /** Apiserver, then etcd, then the temp dir. Idempotent. */
  readonly stop: () => Promise<void>
  /** The last lines of both logs, for failure reports. */
  readonly logTail: (lines?: number) => string
}

/** Temp dirs of the harness start with this, so a later run can find what a killed one left. */
export const DIR_PREFIX = "whereabouts-envtest-"
/** Written in a harness dir: its owner pid and its children, for reapOrphans. */
export const STATE_FILE = "harness.json"
const STOP_GRACE_MS = 5_000

export interface Running {
  readonly child: ChildProcess
  readonly exited: Promise<void>
  done: boolean
}

const EXIT_HOOKS = Symbol.for("whereabouts-controller.test.exit-hooks")

/**
 * Runs `hook` when this process exits (Ctrl-C, a crash, process.exit), to kill what it started.
 * One listener per process: the live project runs every file in one fork, each file with its own
 * copy of these modules.
 */
export const onProcessExit = (hook: () => void): void => {
  const global = globalThis as { [EXIT_HOOKS]?: Set<() => void> }
  if (global[EXIT_HOOKS] === undefined) {
    const hooks = new Set<() => void>()
    global[EXIT_HOOKS] = hooks
    // Prepended: vitest's own exit listener calls process.exit() again, which skips later listeners.
    process.prependListener("exit", () => {
      for (const h of hooks) h()
    })
  }
  global[EXIT_HOOKS].add(hook)
}

// Whatever is still running when this process exits is killed, and its directory removed.
const everything = new Set<{ readonly children: () => ReadonlyArray<Running>; readonly dir: string }>()
let exitHookInstalled = false
const installExitHook = () => {
  if (exitHookInstalled) return
  exitHookInstalled = true
  onProcessExit(() => {
    for (const plane of everything) {
      for (const r of plane.children()) if (!r.done) r.child.kill("SIGKILL")
      fs.rmSync(plane.dir, { recursive: true, force: true, maxRetries: 3 })
    }
  })
}

/** Whether a TCP port on loopback can be bound now; 0 asks the kernel for any, and yields it. */
const bindable = (port: number): Promise<number | undefined> =>
  new Promise((resolve) => {
    const srv = net.createServer()
    srv.once("error", () => resolve(undefined))
    srv.listen(port, "127.0.0.1", () => {
      const address = srv.address()
      srv.close(() => resolve(typeof address === "object" && address !== null ? address.port : undefined))
    })
  })

/** Slices of the range: each vitest worker draws from its own. */
const PORT_SLICES = 16

/**
 * Where freePort draws from: this process's slice of the 12,000 ports below the kernel's ephemeral
 * range (what outgoing connections draw from; 32768 when /proc cannot be read). Each vitest worker
 * (VITEST_POOL_ID) has a slice of its own, so test files running at once never both find one port
 * free and then race to bind it (a controller of the RBAC tier once lost its health port so).
 */
export const freePortRange = (): { readonly low: number; readonly high: number } => {
  let high = 32_768
  try {
    const first = Number(fs.readFileSync("/proc/sys/net/ipv4/ip_local_port_range", "utf8").trim().split(/\s+/)[0])
    if (Number.isInteger(first) && first > 2_048) high = first
  } catch {
    // not Linux: the default range's floor
  }
  const low = Math.max(1_025, high - 12_000)
  const pool = Number(process.env["VITEST_POOL_ID"] ?? 0)
  const width = Math.floor((high - low) / PORT_SLICES)
  const start = low + (Number.isInteger(pool) && pool > 0 ? pool % PORT_SLICES : 0) * width
  return { low: start, high: start + width }
}

/** Ports this process handed out lately: not handed out again while their user may still bind them. */
const handedOut: Array<number> = []

/**
 * A free TCP port on loopback (the listener is closed again before it is used). Drawn at random
 * from this process's slice below the ephemeral range, so an outgoing connection cannot take it
 * before its user binds it (the kernel's own pick, port 0, comes from that range), and never one
 * handed out in the last 64 draws; the kernel's pick only when ten tries found nothing free there.
 */
export const freePort = async (): Promise<number> => {
  const { low, high } = freePortRange()
  const give = (port: number) => {
    handedOut.push(port)
    if (handedOut.length > 64) handedOut.shift()
    return port
  }
  for (let i = 0; i < 10; i++) {
    const draw = low + Math.floor(Math.random() * (high - low))
    if (handedOut.includes(draw)) continue
    const port = await bindable(draw)
    if (port !== undefined) return give(port)
  }
  const any = await bindable(0)
  if (any === undefined) throw new Error("no free port on 127.0.0.1")
  return give(any)
}

const tail = (file: string, lines: number): string => {
  try {
    return fs.readFileSync(file, "utf8").trimEnd().split("\n").slice(-lines).join("\n")
  } catch {
    return "(no log)"
  }
}

/** Spawns `bin` with stdout and stderr appended to `logFile`. */
export const launch = (bin: string, args: ReadonlyArray<string>, logFile: string): Running => {
  const fd = fs.openSync(logFile, "a")
  try {
    // detached: false keeps them in our process group, so a terminal Ctrl-C reaches them too.
    const child = spawn(bin, args, { stdio: ["ignore", fd, fd], detached: false })
    const running: Running = {
      child,
      done: false,
      exited: new Promise((resolve) => {
        child.once("exit", () => resolve())
        child.once("error", () => resolve())
      })
    }
    void running.exited.then(() => (running.done = true))
    return running
  } finally {
    fs.closeSync(fd)
  }
}

/** SIGTERM, then SIGKILL after a grace period; resolves once it exited. */
export const terminate = async (r: Running | undefined): Promise<void> => {
  if (r === undefined || r.done) return
  r.child.kill("SIGTERM")
  const timer = sleep(STOP_GRACE_MS).then(() => "late" as const)
  if ((await Promise.race([r.exited.then(() => "exited" as const), timer])) === "late") r.child.kill("SIGKILL")
  await r.exited
}

/**
 * One HTTPS request with a bearer token, trusting only the given CA; resolves with status and body
 * text (never rejects on HTTP errors). A string body goes as is, anything else as JSON.
 */
export const adminRequest = (
  target: { readonly server: string; readonly token: string; readonly caPem: string },
  method: string,
  urlPath: string,
  body?: unknown,
  options: { readonly contentType?: string; readonly timeoutMs?: number } = {}
): Promise<{ readonly status: number; readonly body: string }> =>
  new Promise((resolve, reject) => {
    const data = body === undefined ? undefined : typeof body === "string" ? body : JSON.stringify(body)
    const req = https.request(
      `${target.server}${urlPath}`,
      {
        method,
        ca: target.caPem,
        timeout: options.timeoutMs ?? 10_000,
        headers: {
          Authorization: `Bearer ${target.token}`,
          Accept: "application/json",
          ...(data === undefined ? {} : { "Content-Type": options.contentType ?? "application/json" })
        }
      },
      (res) => {
        let text = ""
        res.setEncoding("utf8")
        res.on("data", (c: string) => (text += c))
        res.on("end", () => resolve({ status: res.statusCode ?? 0, body: text }))
        res.on("error", reject)
      }
    )
    req.on("timeout", () => req.destroy(new Error(`${method} ${urlPath}: timed out`)))
    req.on("error", reject)
    req.end(data)
  })

/** Polls `check` every 200 ms until it returns true; fails after `timeoutMs` or when `abort()` says why. */
const waitFor = async (what: string, timeoutMs: number, check: () => Promise<boolean>, abort: () => string | undefined) => {
  const deadline = Date.now() + timeoutMs
  let last = ""
  for (;;) {
    const why = abort()
    if (why !== undefined) throw new Error(`${what}: ${why}`)
    try {
      if (await check()) return
    } catch (e) {
      last = e instanceof Error ? e.message : String(e)
    }
    if (Date.now() > deadline) throw new Error(`${what}: not within ${timeoutMs / 1000} s${last === "" ? "" : ` (last error: ${last})`}`)
    await sleep(200)
  }
}

/** A kubeconfig that reaches `server` (trusting `caPem`) as `user` with a bearer token. */
export const kubeconfigYaml = (server: string, caPem: string, token: string, user = "admin"): string =>
  [
    "apiVersion: v1",
    "kind: Config",
    "clusters:",
    "- name: envtest",
    "  cluster:",
    `    server: ${server}`,
    `    certificate-authority-data: ${Buffer.from(caPem).toString("base64")}`,
    "users:",
    `- name: ${user}`,
    "  user:",
    `    token: ${token}`,
    "contexts:",
    "- name: envtest",
    "  context:",
    "    cluster: envtest",
    `    user: ${user}`,
    "current-context: envtest",
    ""
  ].join("\n")

/** Attempts at a start whose ports were taken between picking them and binding them. */
const PORT_ATTEMPTS = 3

/**
 * Starts etcd and kube-apiserver from `assets` (a dir with both binaries) under `dir` (created,
 * and removed by `stop`). Resolves once /readyz is ok and the kubeconfig is written. A port picked
 * free can still be taken before etcd or the API server binds it (another test process may draw
 * the same one): then it starts again on fresh ports.
 */
export const startControlPlane = async (dir: string, assets: string): Promise<ControlPlane> => {
  for (let attempt = 1; ; attempt++) {
    try {
      return await startOnce(dir, assets)
    } catch (e) {
      if (attempt >= PORT_ATTEMPTS || !/address already in use/.test(e instanceof Error ? e.message : String(e))) throw e
      process.stderr.write(`envtest: a port was taken before it was bound; starting again on fresh ports (attempt ${attempt + 1} of ${PORT_ATTEMPTS})\n`)
    }
  }
}

const startOnce = async (dir: string, assets: string): Promise<ControlPlane> => {
  installExitHook()
  const certs = path.join(dir, "certs")
  fs.mkdirSync(certs, { recursive: true })
  const [etcdClient, etcdPeer, apiPort] = [await freePort(), await freePort(), await freePort()]
  const server = `https://127.0.0.1:${apiPort}`
  const token = randomBytes(24).toString("hex")
  const { privateKey, publicKey } = generateKeyPairSync("rsa", { modulusLength: 2048 })
  fs.writeFileSync(path.join(certs, "sa.key"), privateKey.export({ type: "pkcs1", format: "pem" }))
  fs.writeFileSync(path.join(certs, "sa.pub"), publicKey.export({ type: "spki", format: "pem" }))
  fs.writeFileSync(path.join(certs, "tokens.csv"), `${token},admin,admin-uid,system:masters\n`)
  const etcdLog = path.join(dir, "etcd.log")
  const apiLog = path.join(dir, "kube-apiserver.log")
  const kubeconfigPath = path.join(dir, "kubeconfig")

  let etcd: Running | undefined
  let apiserver: Running | undefined
  let stopped = false
  const entry = { dir, children: () => [apiserver, etcd].filter((r): r is Running => r !== undefined) }
  everything.add(entry)
  const saveState = () =>
    fs.writeFileSync(
      path.join(dir, STATE_FILE),
      JSON.stringify({ owner: process.pid, pids: entry.children().map((r) => r.child.pid).filter((p) => p !== undefined) })
    )
  const logTail = (lines = 25) => `--- ${etcdLog}\n${tail(etcdLog, lines)}\n--- ${apiLog}\n${tail(apiLog, lines)}`
  const exitedEarly = (r: Running | undefined, name: string) => () =>
    r?.done === true ? `${name} exited (code ${r.child.exitCode ?? r.child.signalCode})` : undefined

  const etcdArgs = [
    "--name=envtest",
    `--data-dir=${path.join(dir, "etcd")}`,
    `--listen-client-urls=http://127.0.0.1:${etcdClient}`,
    `--advertise-client-urls=http://127.0.0.1:${etcdClient}`,
    `--listen-peer-urls=http://127.0.0.1:${etcdPeer}`,
    `--initial-advertise-peer-urls=http://127.0.0.1:${etcdPeer}`,
    `--initial-cluster=envtest=http://127.0.0.1:${etcdPeer}`,
    "--unsafe-no-fsync=true",
    "--log-level=warn"
  ]
  const apiArgs = [
    `--etcd-servers=http://127.0.0.1:${etcdClient}`,
    "--bind-address=127.0.0.1",
    "--advertise-address=127.0.0.1",
    `--secure-port=${apiPort}`,
    "--endpoint-reconciler-type=none",
    `--cert-dir=${certs}`,
    "--service-cluster-ip-range=10.0.0.0/24",
    "--authorization-mode=RBAC",
    `--token-auth-file=${path.join(certs, "tokens.csv")}`,
    `--service-account-issuer=${server}/`,
    `--service-account-key-file=${path.join(certs, "sa.pub")}`,
    `--service-account-signing-key-file=${path.join(certs, "sa.key")}`,
    "--disable-admission-plugins=ServiceAccount",
    "--allow-privileged=true"
  ]

  const caFile = path.join(certs, "apiserver.crt")
  let caPem = ""
  const ready = async () => {
    if (caPem === "") {
      if (!fs.existsSync(caFile)) return false
      caPem = fs.readFileSync(caFile, "utf8")
    }
    const res = await adminRequest({ server, token, caPem }, "GET", "/readyz")
    return res.status === 200 && res.body.trim() === "ok"
  }

  const startApiServer = async () => {
    if (apiserver !== undefined && !apiserver.done) return
    apiserver = launch(path.join(assets, "kube-apiserver"), apiArgs, apiLog)
    saveState()
    await waitFor("kube-apiserver /readyz", 60_000, ready, exitedEarly(apiserver, "kube-apiserver"))
  }
  const stopApiServer = () => terminate(apiserver)
  const stop = async () => {
    if (stopped) return
    stopped = true
    // Never the other way round: an apiserver without its etcd retries for minutes before exiting.
    await terminate(apiserver)
    await terminate(etcd)
    everything.delete(entry)
    fs.rmSync(dir, { recursive: true, force: true, maxRetries: 3 })
  }

  try {
    etcd = launch(path.join(assets, "etcd"), etcdArgs, etcdLog)
    saveState()
    await waitFor(
      "etcd",
      30_000,
      () =>
        new Promise<boolean>((resolve) => {
          const socket = net.connect(etcdClient, "127.0.0.1", () => {
            socket.destroy()
            resolve(true)
          })
          socket.once("error", () => resolve(false))
        }),
      exitedEarly(etcd, "etcd")
    )
    await startApiServer()
    fs.writeFileSync(kubeconfigPath, kubeconfigYaml(server, caPem, token), { mode: 0o600 })
  } catch (e) {
    const message = `${e instanceof Error ? e.message : String(e)}\n${logTail()}`
    await stop()
    throw new Error(message)
  }

  return { dir, server, token, kubeconfigPath, caPem, stopApiServer, startApiServer, stop, logTail }
}

const alive = (pid: number): boolean => {
  try {
    process.kill(pid, 0)
    return true
  } catch (e) {
    return (e as NodeJS.ErrnoException).code === "EPERM"
  }
}

interface HarnessState {
  readonly owner?: number
  readonly pids?: ReadonlyArray<number>
}

const stateOf = (dir: string): HarnessState => JSON.parse(fs.readFileSync(path.join(dir, STATE_FILE), "utf8")) as HarnessState

/** The processes a harness dir's state file records that still run with the dir on their command line, with their argv. */
export const harnessProcesses = (dir: string, state = stateOf(dir)): ReadonlyArray<{ readonly pid: number; readonly args: ReadonlyArray<string> }> =>
  (state.pids ?? []).flatMap((pid) => {
    try {
      const args = fs.readFileSync(`/proc/${pid}/cmdline`, "utf8").split("\0")
      return args.some((a) => a.includes(dir)) ? [{ pid, args }] : []
    } catch {
      return [] // gone
    }
  })

/**
 * Cleans up after harness runs that died without their exit hook (SIGKILL): kills the
 * etcd/kube-apiserver they left (only processes whose command line names that run's dir)
 * and removes the dir. Returns what it reaped, for a log line.
 */
export const reapOrphans = (tmp = os.tmpdir()): ReadonlyArray<string> => {
  const reaped: Array<string> = []
  for (const name of fs.readdirSync(tmp)) {
    if (!name.startsWith(DIR_PREFIX)) continue
    const dir = path.join(tmp, name)
    let state: HarnessState
    try {
      state = stateOf(dir)
    } catch {
      continue // not started yet, or not ours
    }
    if (typeof state.owner !== "number" || alive(state.owner)) continue
    for (const { pid } of harnessProcesses(dir, state)) {
      try {
        process.kill(pid, "SIGKILL")
      } catch {
        // gone already
      }
    }
    fs.rmSync(dir, { recursive: true, force: true, maxRetries: 3 })
    reaped.push(dir)
  }
  return reaped
}

/** deploy/'s CRD manifests: whereabouts' and the NAD's. */
const projectCrds = (): ReadonlyArray<string> =>
  ["deploy/components/whereabouts-crds", "deploy/components/nad-crd"].flatMap((d) =>
    fs.readdirSync(path.join(ROOT, d)).filter((f) => f.endsWith(".yaml") && f !== "kustomization.yaml").map((f) => path.join(ROOT, d, f))
  )

/**
 * Creates the CustomResourceDefinitions in `files` (YAML, several documents each; deploy/'s by
 * default) and waits until each is Established and its resource answers a list.
 */
export const installCrds = async (plane: ControlPlane, files: ReadonlyArray<string> = projectCrds()): Promise<ReadonlyArray<string>> => {
  const { parseAllDocuments } = await import("yaml")
  const crds = files.flatMap((f) =>
    parseAllDocuments(fs.readFileSync(f, "utf8")).flatMap((doc) => {
      if (doc.errors.length > 0) throw new Error(`${f}: ${doc.errors[0]!.message}`)
      const o = doc.toJS() as { kind?: string; metadata?: { name?: string } } | null
      return o?.kind === "CustomResourceDefinition" ? [o] : []
    })
  )
  for (const crd of crds) {
    const res = await adminRequest(plane, "POST", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions", crd)
    if (res.status !== 201 && res.status !== 409) throw new Error(`creating CRD ${crd.metadata?.name}: HTTP ${res.status}: ${res.body}`)
  }
  const served = async (crd: (typeof crds)[number]) => {
    const res = await adminRequest(plane, "GET", `/apis/apiextensions.k8s.io/v1/customresourcedefinitions/${crd.metadata?.name}`)
    const o = JSON.parse(res.body) as {
      spec?: { group?: string; versions?: Array<{ name?: string }>; names?: { plural?: string } }
      status?: { conditions?: Array<{ type?: string; status?: string }> }
    }
    if (!o.status?.conditions?.some((c) => c.type === "Established" && c.status === "True")) return false
    const list = await adminRequest(plane, "GET", `/apis/${o.spec?.group}/${o.spec?.versions?.[0]?.name}/${o.spec?.names?.plural}?limit=1`)
    return list.status === 200
  }
  for (const crd of crds) await waitFor(`CRD ${crd.metadata?.name} established`, 30_000, () => served(crd), () => undefined)
  return crds.map((c) => c.metadata?.name ?? "?")
}

/**
 * The one line a scripts/ asset script prints (envtest-assets.sh, whereabouts-plugin.sh, …: each
 * honours its variable and caches builds), or a rejection with its last error line. A cold build
 * takes minutes: its progress lines (all of its stderr when `verbose`) go to stderr meanwhile.
 */
export const scriptAsset = (script: string, verbose = false): Promise<string> =>
  new Promise((resolve, reject) => {
    const child = execFile("bash", [path.join(ROOT, "scripts", script)], { cwd: ROOT, maxBuffer: 16 << 20 }, (err, stdout, stderr) => {
      const out = stdout.trim()
      if (err === null && out !== "") return resolve(out)
      const last = stderr.trim().split("\n").filter((l) => l !== "").at(-1) ?? err?.message ?? "no output"
      reject(new Error(last.replace(/^[\w-]+: (ERROR: )?/, "")))
    })
    child.stderr?.on("data", (chunk: Buffer) => {
      if (verbose) process.stderr.write(chunk)
      else for (const line of chunk.toString().split("\n")) if (/building|built|done in/.test(line)) process.stderr.write(`${line}\n`)
    })
  })
