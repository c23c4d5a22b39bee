/**
 * Raw REST against the harness's API server (node:https, a kubeconfig's bearer token and CA), for
 * what KubeApi does not do: subresources, TokenRequest, RBAC objects. No vitest here, so the soak
 * (bench/soak) runs it as a plain program too.
 */
import * as fs from "node:fs"
import { Effect } from "effect"
import { parse as parseYaml } from "yaml"
import { adminRequest } from "../cluster.ts"

export interface Credentials {
  readonly server: string
  readonly caPem: string
  readonly token: string
}

/** Server, CA and bearer token of a token kubeconfig (as the harness and `writeTokenKubeconfig` write them). */
export const credentialsOf = (kubeconfigPath: string): Credentials => {
  const kc = parseYaml(fs.readFileSync(kubeconfigPath, "utf8")) as {
    clusters: Array<{ cluster: { server: string; "certificate-authority-data": string } }>
    users: Array<{ user: { token: string } }>
  }
  const cluster = kc.clusters[0]!.cluster
  return { server: cluster.server, caPem: Buffer.from(cluster["certificate-authority-data"], "base64").toString("utf8"), token: kc.users[0]!.user.token }
}

/** One request; resolves with status and body text (never rejects on HTTP errors). */
export const rest = (
  creds: Credentials,
  method: string,
  path: string,
  body?: unknown,
  contentType = "application/json"
): Promise<{ readonly status: number; readonly body: string }> => adminRequest(creds, method, path, body, { contentType, timeoutMs: 20_000 })

/** rest() as an Effect that fails unless the status is one of `ok`. */
export const restOk = (creds: Credentials, method: string, path: string, body?: unknown, ok: ReadonlyArray<number> = [200, 201], contentType?: string) =>
  Effect.flatMap(
    Effect.promise(() => rest(creds, method, path, body, contentType)),
    (res) => (ok.includes(res.status) ? Effect.succeed(res.body === "" ? {} : (JSON.parse(res.body) as Record<string, unknown>)) : Effect.fail(new Error(`${method} ${path}: HTTP ${res.status}: ${res.body.slice(0, 500)}`)))
  )
