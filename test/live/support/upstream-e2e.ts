/**
 * Runs upstream whereabouts' e2e test binary (scripts/whereabouts-e2e.sh) against a cluster and
 * reads its verdicts. Two facts of the suite (v0.9.2) shape how:
 *
 * - Its StatefulSet specs all create a StatefulSet `web`, and each deletes it with foreground
 *   propagation but waits only for its pods to go, not for the object: the garbage collector drops
 *   the object a little later (its queue backs off while the pods terminate), so the next spec's
 *   create can meet `object is being deleted`. Those specs therefore run one binary run each, and
 *   each waits until `web` is gone first. Every spec still runs exactly as written.
 * - ScaleStatefulSet reads the StatefulSet and writes it back without retrying a conflict, racing
 *   the StatefulSet controller's status writes. A spec that fails on that conflict, and on nothing
 *   else, runs once more; the report names it.
 */
import { spawn } from "node:child_process"
import * as fs from "node:fs"
import * as os from "node:os"
import { Effect } from "effect"
import { type Credentials, rest } from "./rest.ts"
import { waitUntil } from "./world.ts"

export interface SuiteReport {
  readonly ran: number
  readonly passed: number
  /** Full texts of the specs that failed (after their one rerun, for the known conflict). */
  readonly failed: ReadonlyArray<string>
  /** Specs run again after failing on the suite's own unretried conflict. */
  readonly reruns: ReadonlyArray<string>
  /** Binary runs that did not end with a ginkgo summary (a crash, a timeout). */
  readonly broken: ReadonlyArray<string>
  readonly seconds: number
}

interface BinaryRun {
  readonly code: number | null
  readonly ran: number
  readonly passed: number
  readonly failed: ReadonlyArray<string>
  readonly output: string
}

const escape = (text: string) => text.replace(/[.*+?^${}()|[\]\\]/g, "\\$&")

/** The unretried read-modify-write of ScaleStatefulSet, losing to the StatefulSet controller. */
const SCALE_CONFLICT = /Operation cannot be fulfilled on statefulsets\.apps "web": the object has been modified/

/** One run of the binary with ginkgo flags; its output is appended to `logFile`. */
const runBinary = (binary: string, env: Readonly<Record<string, string>>, ginkgo: ReadonlyArray<string>, logFile: string, minutes: number) =>
  Effect.promise(
    () =>
      new Promise<BinaryRun>((resolve) => {
        const args = ["-test.v", "-test.timeout", `${minutes}m`, "-ginkgo.noColor", "-ginkgo.v", ...ginkgo]
        fs.appendFileSync(logFile, `\n===== ${binary} ${args.join(" ")}\n`)
        const child = spawn(binary, args, { env: { PATH: process.env["PATH"] ?? "/usr/bin:/bin", HOME: os.tmpdir(), ...env }, stdio: ["ignore", "pipe", "pipe"] })
        let output = ""
        const keep = (b: Buffer) => {
          output += b.toString()
          fs.appendFileSync(logFile, b)
        }
        child.stdout.on("data", keep)
        child.stderr.on("data", keep)
        child.once("close", (code) => {
          const ran = /Ran (\d+) of \d+ Specs/.exec(output)
          const passed = /(\d+) Passed \| \d+ Failed/.exec(output)
          const failed = [...new Set(output.split("\n").filter((l) => l.startsWith("[Fail] ")).map((l) => l.slice(7).trim()))]
          resolve({ code, ran: ran === null ? -1 : Number(ran[1]), passed: Number(passed?.[1] ?? 0), failed, output })
        })
      })
  )

/** Every spec's full text, from the binary's dry run (containers' texts and its own, as -ginkgo.focus matches them). */
export const listSpecs = (binary: string) =>
  Effect.map(runBinary(binary, {}, ["-ginkgo.dryRun"], os.devNull, 1), (r) =>
    r.output
      .split(/^-{10,}$/m)
      .map((block) => block.split("\n").map((l) => l.trim()).filter((l) => l !== "" && !l.startsWith("github.com/") && !/^[•SP]+$/.test(l) && !/^(Running Suite|=+|Random Seed|Will run|=== RUN)/.test(l)))
      .filter((lines) => lines.length >= 2 && lines[0]!.startsWith("Whereabouts"))
      .map((lines) => `${lines[0]} ${lines[1]}`)
  )

/**
 * The suite against the cluster of `kubeconfig`, but the specs in `skip` (full texts): the specs
 * outside StatefulSets in one run, then each StatefulSet spec in a run of its own once the previous
 * one's StatefulSet is gone.
 */
export const runUpstreamSuite = (options: {
  readonly binary: string
  readonly kubeconfig: string
  readonly admin: Credentials
  readonly skip: ReadonlyArray<string>
  readonly logFile: string
  /** The binary's -test.timeout for the run of the specs outside StatefulSets, and for each StatefulSet spec's. */
  readonly minutes: { readonly batch: number; readonly spec: number }
}) =>
  Effect.gen(function* () {
    const started = Date.now()
    fs.writeFileSync(options.logFile, "")
    const env = { KUBECONFIG: options.kubeconfig, NUMBER_OF_COMPUTE_NODES: "2" }
    const specs = (yield* listSpecs(options.binary)).filter((s) => !options.skip.includes(s))
    const statefulSpecs = specs.filter((s) => s.includes(" stateful set tests "))
    const skipAlone = [...options.skip, ...statefulSpecs].map((s) => `(${escape(s)}$)`).join("|")
    const runs: Array<BinaryRun> = [yield* runBinary(options.binary, env, ["-ginkgo.skip", skipAlone], options.logFile, options.minutes.batch)]
    const reruns: Array<string> = []
    const stuck: Array<string> = []
    // A spec that broke off may leave its StatefulSet: the next one would only fail on it, so the runs stop there.
    const webGone = Effect.either(
      waitUntil("the previous spec's StatefulSet web gone", Effect.promise(() => rest(options.admin, "GET", "/apis/apps/v1/namespaces/default/statefulsets/web")), (r) => r.status === 404, { timeout: "120 seconds" })
    )
    for (const spec of statefulSpecs) {
      if ((yield* webGone)._tag === "Left") {
        stuck.push(`StatefulSet web still there before: ${spec}`)
        break
      }
      const focus = ["-ginkgo.focus", `${escape(spec)}$`]
      let run = yield* runBinary(options.binary, env, focus, options.logFile, options.minutes.spec)
      if (run.failed.length > 0 && SCALE_CONFLICT.test(run.output) && run.output.split("• Failure").length === 2 && (yield* webGone)._tag === "Right") {
        reruns.push(spec)
        run = yield* runBinary(options.binary, env, focus, options.logFile, options.minutes.spec)
      }
      runs.push(run)
    }
    return {
      ran: runs.reduce((n, r) => n + Math.max(r.ran, 0), 0),
      passed: runs.reduce((n, r) => n + r.passed, 0),
      failed: runs.flatMap((r) => r.failed),
      reruns,
      broken: [...runs.filter((r) => r.ran < 0 || (r.code !== 0 && r.failed.length === 0)).map((r) => `exit ${r.code}: ${r.output.split("\n").slice(-5).join(" | ")}`), ...stuck],
      seconds: Math.round((Date.now() - started) / 1000)
    } satisfies SuiteReport
  })
