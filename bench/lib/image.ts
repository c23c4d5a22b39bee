import * as fs from "node:fs"
import * as path from "node:path"
import { ROOT } from "./paths.ts"

/**
 * The node flags and environment of the image (Dockerfile ENTRYPOINT and ENV), so the memory run is
 * the deployed process: --max-old-space-size-percentage is relative to the container's limit,
 * which this machine has not, so it becomes the --max-old-space-size it gives under
 * deploy/deployment.yaml's limit (or under `limitMi`, for a run at another limit).
 */
export const imageNodeFlags = (
  override?: number
): {
  readonly flags: ReadonlyArray<string>
  readonly heapCap: string
  readonly env: Readonly<Record<string, string>>
  /** deploy/deployment.yaml's memory limit, MiB. */
  readonly limitMi: number
} => {
  const dockerfile = fs.readFileSync(path.join(ROOT, "Dockerfile"), "utf8")
  const entry = JSON.parse(/^ENTRYPOINT\s+(\[.*\])\s*$/m.exec(dockerfile)?.[1] ?? "[]") as Array<string>
  const shipped = Number(/limits:\s*\n(?:\s+\S.*\n)*?\s+memory:\s*(\d+)Mi/.exec(fs.readFileSync(path.join(ROOT, "deploy/deployment.yaml"), "utf8"))?.[1])
  const limitMi = override ?? shipped
  if (entry.length < 2 || !Number.isFinite(limitMi)) throw new Error("cannot read the image's node flags (Dockerfile ENTRYPOINT) or the memory limit (deploy/deployment.yaml)")
  let heapCap = ""
  const flags = entry.slice(1).filter((a) => a.startsWith("--")).map((f) => {
    const pct = /^--max-old-space-size-percentage=(\d+)$/.exec(f)
    if (pct === null) return f
    heapCap = `--max-old-space-size=${Math.floor((limitMi * Number(pct[1])) / 100)}`
    return heapCap
  })
  // ENV lines of the runtime stage (the last FROM), KEY=value pairs; NODE_ENV as the image sets it.
  const runtime = dockerfile.slice(dockerfile.lastIndexOf("\nFROM "))
  const env: Record<string, string> = {}
  for (const line of runtime.split("\n").filter((l) => /^ENV\s/.test(l))) {
    for (const pair of line.slice(4).trim().split(/\s+/)) {
      const eq = pair.indexOf("=")
      if (eq > 0) env[pair.slice(0, eq)] = pair.slice(eq + 1)
    }
  }
  return { flags, heapCap: heapCap === "" ? "(none)" : heapCap, env, limitMi }
}
