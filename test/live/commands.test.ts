/**
 * The one-shot commands as a user runs them against a real API server: what they print on stdout
 * is the report alone (logs go to stderr), and the exit code says whether orphans exist.
 */
import { expect, it } from "@effect/vitest"
import { Effect } from "effect"
import { deletePod, startPod } from "../../src/testing/cni-plugin.ts"
import { describeLive, runningEnvtest, uniqueNamespace } from "../support/live.ts"
import { runCommand } from "./support/controller-process.ts"
import { createNad, ensureNamespace, liveWorld, on } from "./support/world.ts"

describeLive("commands against a real API server", () => {
  const POOLS = uniqueNamespace("cmd-pools")
  const run = (command: string, args: ReadonlyArray<string>) => Effect.promise(() => runCommand(command, { kubeconfig: runningEnvtest().kubeconfigPath, namespace: POOLS, args }))

  it.live("audit -o json: stdout is one JSON document (the logs are on stderr); exit 1 with an orphan", () =>
    Effect.gen(function* () {
      const ns = uniqueNamespace("cmd")
      yield* ensureNamespace(POOLS)
      yield* ensureNamespace(ns)
      yield* createNad(ns, "net", { range: "10.250.0.0/24" })
      yield* startPod(ns, "keep", [on(ns, "net")])
      const gone = yield* startPod(ns, "gone", [on(ns, "net")])
      yield* deletePod(gone)
      const dirty = yield* run("audit", ["--output", "json"])
      const report = JSON.parse(dirty.stdout) as { orphanedAllocations: Array<{ ip: string; podref: string }> }
      expect(report.orphanedAllocations.map((o) => `${o.ip} ${o.podref}`)).toEqual([`10.250.0.2 ${ns}/gone`])
      expect(dirty.code).toBe(1)
      // The sweep's summary line is a log line: on stderr, as JSON.
      expect(dirty.stderr.split("\\n").some((l) => l.includes('"message":"sweep finished (dry run: nothing freed)"'))).toBe(true)
      const table = yield* run("audit", [])
      expect(table.code).toBe(1)
      expect(table.stdout.startsWith("POOL ")).toBe(true)
      expect(table.stdout).not.toContain('"logLevel"')
    }).pipe(Effect.provide(liveWorld(POOLS))), 60_000)
})
