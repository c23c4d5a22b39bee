/**
 * Which kubeconfig the controller uses: an explicit path or the KUBECONFIG list (merged like
 * kubectl), else ~/.kube/config, else the in-cluster service account. client-node parses and
 * authenticates; this decides, and says what was tried when nothing works.
 */
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { KubeConfig } from "@kubernetes/client-node/dist/config.js"
import { Config, Data, Effect } from "effect"

export interface KubeConfigAttempt {
  readonly source: string
  readonly problem: string
}

/** No usable client configuration: says which sources were tried and what was wrong with each. */
export class KubeConfigError extends Data.TaggedError("KubeConfigError")<{ readonly attempts: ReadonlyArray<KubeConfigAttempt> }> {
  override get message(): string {
    const tried = this.attempts.map((a, i) => `(${i + 1}) ${a.source}: ${a.problem}`).join("; ")
    return `no usable Kubernetes API configuration. Tried ${tried}`
  }
}

export interface KubeConfigSources {
  /** `--kubeconfig` / `KUBECONFIG`: a path, or several separated by `path.delimiter`. */
  readonly explicit: string | undefined
  readonly home: string | undefined
  /** `KUBERNETES_SERVICE_HOST`; client-node's loadFromCluster reads it (and the port) itself. */
  readonly serviceHost: string | undefined
  /** Prefix of /var/run/secrets/kubernetes.io/serviceaccount (tests only). */
  readonly serviceAccountPrefix?: string
}

export interface ResolvedKubeConfig {
  readonly kc: KubeConfig
  readonly source: string
  readonly tried: ReadonlyArray<KubeConfigAttempt>
}

const SA_TOKEN = "/var/run/secrets/kubernetes.io/serviceaccount/token"
export const errorText = (e: unknown): string => (e instanceof Error ? e.message : String(e)).split("\n")[0]!

/** What is wrong with a loaded config, if anything: a current context naming a cluster with a server. */
const problemOf = (kc: KubeConfig): string | undefined => {
  if (!kc.getCurrentContext()) return "no current-context"
  const cluster = kc.getCurrentCluster()
  if (cluster === null) return `current-context "${kc.getCurrentContext()}" names no known cluster`
  try {
    const url = new URL(cluster.server)
    return url.protocol === "https:" || url.protocol === "http:" ? undefined : `server ${cluster.server} is not http(s)`
  } catch {
    return `cluster "${cluster.name}" has no valid server URL (${JSON.stringify(cluster.server ?? "")})`
  }
}

/** Several files merge as kubectl merges them: the first file's current-context, the first of each name. */
const loadFiles = (kc: KubeConfig, files: ReadonlyArray<string>): void => {
  kc.loadFromFile(files[0]!)
  for (const file of files.slice(1)) {
    const more = new KubeConfig()
    more.loadFromFile(file)
    const has = (list: ReadonlyArray<{ readonly name: string }>, name: string) => list.some((x) => x.name === name)
    for (const c of more.getClusters()) if (!has(kc.getClusters(), c.name)) kc.addCluster(c)
    for (const u of more.getUsers()) if (!has(kc.getUsers(), u.name)) kc.addUser(u)
    for (const c of more.getContexts()) if (!has(kc.getContexts(), c.name)) kc.addContext(c)
    if (!kc.getCurrentContext()) kc.setCurrentContext(more.getCurrentContext())
  }
}

/**
 * The explicit kubeconfig, else `~/.kube/config`, else the in-cluster service account; never
 * client-node's silent http://localhost:8080. A source that exists but is broken is an error, not
 * a reason to try the next one (that could point the controller at another cluster).
 */
export const resolveKubeConfig = (sources: KubeConfigSources): Effect.Effect<ResolvedKubeConfig, KubeConfigError> =>
  Effect.suspend(() => {
    const tried: Array<KubeConfigAttempt> = []
    const fail = (source: string, problem: string) => Effect.fail(new KubeConfigError({ attempts: [...tried, { source, problem }] }))
    const use = (source: string, load: (kc: KubeConfig) => void) => {
      const kc = new KubeConfig()
      try {
        load(kc)
      } catch (e) {
        return fail(source, errorText(e))
      }
      const problem = problemOf(kc)
      return problem === undefined ? Effect.succeed({ kc, source, tried }) : fail(source, problem)
    }

    const files = (sources.explicit ?? "").split(path.delimiter).filter((f) => f !== "")
    if (files.length > 0) {
      const source = `KUBECONFIG/--kubeconfig (${files.join(path.delimiter)})`
      const missing = files.filter((f) => !fs.existsSync(f))
      if (missing.length > 0) {
        return fail(source, `no such file: ${missing.join(", ")} (given explicitly, so ~/.kube/config and the in-cluster service account were not tried)`)
      }
      return use(source, (kc) => loadFiles(kc, files))
    }
    tried.push({ source: "KUBECONFIG/--kubeconfig", problem: "not set" })

    const home = sources.home === undefined || sources.home === "" ? undefined : path.join(sources.home, ".kube", "config")
    if (home !== undefined && fs.existsSync(home)) return use(`~/.kube/config (${home})`, (kc) => loadFiles(kc, [home]))
    tried.push({ source: `~/.kube/config${home === undefined ? "" : ` (${home})`}`, problem: home === undefined ? "no home directory" : "no such file" })

    const prefix = sources.serviceAccountPrefix ?? ""
    const source = "in-cluster service account"
    if (sources.serviceHost === undefined || sources.serviceHost === "") return fail(source, "KUBERNETES_SERVICE_HOST is not set (not running in a pod)")
    if (!fs.existsSync(`${prefix}${SA_TOKEN}`)) return fail(source, `no token at ${prefix}${SA_TOKEN} (automountServiceAccountToken off?)`)
    return use(source, (kc) => kc.loadFromCluster(prefix))
  })

/** Where the kubeconfig comes from: ControllerConfig's path, HOME, and the in-cluster variables. */
export const sourcesFrom = (explicit: string | undefined): Effect.Effect<KubeConfigSources> =>
  Config.all([Config.withDefault(Config.string("HOME"), ""), Config.withDefault(Config.string("KUBERNETES_SERVICE_HOST"), "")]).pipe(
    Effect.orElseSucceed(() => ["", ""] as const),
    Effect.map(([home, serviceHost]) => ({ explicit, home: home || os.homedir(), serviceHost }))
  )
