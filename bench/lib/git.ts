/** Which code was measured: the commit and whether the work tree had changes (read-only git). */
import { execFileSync } from "node:child_process"
import { ROOT } from "./paths.ts"

export const gitState = (): string => {
  try {
    const commit = execFileSync("git", ["rev-parse", "--short", "HEAD"], { cwd: ROOT, encoding: "utf8" }).trim()
    const dirty = execFileSync("git", ["status", "--porcelain", "--untracked-files=no", "--", "src"], { cwd: ROOT, encoding: "utf8" }).trimEnd()
    return `Code: commit ${commit}${dirty === "" ? "" : ` with uncommitted changes in ${dirty.split("\n").map((l) => l.slice(3)).join(", ")}`}.`
  } catch {
    return "Code: not a git checkout."
  }
}
