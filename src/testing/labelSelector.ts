/**
 * Kubernetes label selectors as the API server reads a list's or watch's `labelSelector`:
 * requirements joined by commas, each `key`, `!key`, `key=value` (or `==`), `key!=value`,
 * `key in (a,b)`, `key notin (a,b)`, `key>n` or `key<n`. `!=` and `notin` also match objects
 * without the label. Used by the in-memory cluster; the live one sends the text to the server.
 */
export type Labels = Readonly<Record<string, string>>

const KEY = String.raw`[A-Za-z0-9](?:[-A-Za-z0-9_./]*[A-Za-z0-9])?`
const VALUE = String.raw`(?:[A-Za-z0-9](?:[-A-Za-z0-9_.]*[A-Za-z0-9])?)?`
const EXISTS = new RegExp(String.raw`^(!?)\s*(${KEY})$`)
const EQUALITY = new RegExp(String.raw`^(${KEY})\s*(==|=|!=)\s*(${VALUE})$`)
const SET = new RegExp(String.raw`^(${KEY})\s+(in|notin)\s*\(([^()]*)\)$`)
const NUMERIC = new RegExp(String.raw`^(${KEY})\s*(>|<)\s*(-?\d+)$`)

/** Splits at the commas outside parentheses. */
const requirements = (selector: string): ReadonlyArray<string> => {
  const out: Array<string> = []
  let depth = 0
  let start = 0
  for (let i = 0; i < selector.length; i++) {
    const c = selector[i]
    if (c === "(") depth++
    else if (c === ")") depth--
    else if (c === "," && depth === 0) {
      out.push(selector.slice(start, i).trim())
      start = i + 1
    }
  }
  out.push(selector.slice(start).trim())
  return out
}

const requirement = (text: string): ((labels: Labels) => boolean) | undefined => {
  let m = EXISTS.exec(text)
  if (m !== null) {
    const [, not, key] = m as unknown as [string, string, string]
    return (l) => (key in l) !== (not === "!")
  }
  m = EQUALITY.exec(text)
  if (m !== null) {
    const [, key, op, value] = m as unknown as [string, string, string, string]
    return op === "!=" ? (l) => l[key] !== value : (l) => l[key] === value
  }
  m = SET.exec(text)
  if (m !== null) {
    const [, key, op, list] = m as unknown as [string, string, string, string]
    const values = list.split(",").map((v) => v.trim())
    if (list.trim() === "" || values.some((v) => !new RegExp(`^${VALUE}$`).test(v))) return undefined
    return op === "in" ? (l) => key in l && values.includes(l[key]!) : (l) => !(key in l) || !values.includes(l[key]!)
  }
  m = NUMERIC.exec(text)
  if (m !== null) {
    const [, key, op, bound] = m as unknown as [string, string, string, string]
    const n = Number(bound)
    const num = (l: Labels) => (key in l && /^-?\d+$/.test(l[key]!) ? Number(l[key]) : undefined)
    return (l) => {
      const v = num(l)
      return v !== undefined && (op === ">" ? v > n : v < n)
    }
  }
  return undefined
}

/** The selector as a predicate on an object's labels, or the requirement it cannot parse. */
export const parseLabelSelector = (selector: string): ((labels: Labels) => boolean) | { readonly invalid: string } => {
  if (selector.trim() === "") return () => true
  const tests: Array<(labels: Labels) => boolean> = []
  for (const text of requirements(selector)) {
    const test = requirement(text)
    if (test === undefined) return { invalid: text }
    tests.push(test)
  }
  return (labels) => tests.every((t) => t(labels))
}
