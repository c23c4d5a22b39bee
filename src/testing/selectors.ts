/**
 * Kubernetes label and field selectors, as the in-memory cluster reads a list's or watch's
 * `labelSelector` and `fieldSelector` (the live one sends the text to the server).
 *
 * Label selectors:
 * requirements joined by commas, each `key`, `!key`, `key=value` (or `==`), `key!=value`,
 * `key in (a,b)`, `key notin (a,b)`, `key>n` or `key<n`. `!=` and `notin` also match objects
 * without the label.
 *
 * Field selectors: `field=value` (or `==`) and `field!=value`, joined by commas, on the fields
 * the API server offers for every kind (metadata.name, metadata.namespace) and, for pods,
 * spec.nodeName and status.phase. Another field is refused, as the API server refuses a field it
 * does not index, so a test cannot silently select everything.
 */
export type Labels = Readonly<Record<string, string>>

const KEY = String.raw`[A-Za-z0-9](?:[-A-Za-z0-9_./]*[A-Za-z0-9])?`
const VALUE = String.raw`(?:[A-Za-z0-9](?:[-A-Za-z0-9_.]*[A-Za-z0-9])?)?`
const EXISTS = new RegExp(String.raw`^(!?)\s*(${KEY})$`)
const EQUALITY = new RegExp(String.raw`^(${KEY})\s*(==|=|!=)\s*(${VALUE})$`)
const SET = new RegExp(String.raw`^(${KEY})\s+(in|notin)\s*\(([^()]*)\)$`)
const NUMERIC = new RegExp(String.raw`^(${KEY})\s*(>|<)\s*(-?\d+)$`)
const SET_VALUE = new RegExp(`^${VALUE}$`)

/** Every requirement parsed, as one predicate that needs them all; or the first that does not parse. */
const allOf = <A>(texts: ReadonlyArray<string>, parse: (text: string) => ((a: A) => boolean) | undefined): ((a: A) => boolean) | { readonly invalid: string } => {
  const tests: Array<(a: A) => boolean> = []
  for (const text of texts) {
    const test = parse(text)
    if (test === undefined) return { invalid: text.trim() }
    tests.push(test)
  }
  return (a) => tests.every((t) => t(a))
}

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
    if (list.trim() === "" || values.some((v) => !SET_VALUE.test(v))) return undefined
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
export const parseLabelSelector = (selector: string): ((labels: Labels) => boolean) | { readonly invalid: string } =>
  selector.trim() === "" ? () => true : allOf(requirements(selector), requirement)

/** The fields a field selector may name, per kind, and how each is read from an object. */
const FIELDS: Readonly<Record<string, (o: Readonly<Record<string, unknown>>) => unknown>> = {
  "metadata.name": (o) => (o["metadata"] as { name?: unknown } | undefined)?.name,
  "metadata.namespace": (o) => (o["metadata"] as { namespace?: unknown } | undefined)?.namespace
}
const POD_FIELDS: typeof FIELDS = {
  ...FIELDS,
  "spec.nodeName": (o) => (o["spec"] as { nodeName?: unknown } | undefined)?.nodeName,
  "status.phase": (o) => (o["status"] as { phase?: unknown } | undefined)?.phase
}
const FIELD_REQUIREMENT = /^\s*([A-Za-z.]+)\s*(==|=|!=)\s*([^,=!]*?)\s*$/

const fieldRequirement =
  (fields: typeof FIELDS) =>
  (text: string): ((o: Readonly<Record<string, unknown>>) => boolean) | undefined => {
    const m = FIELD_REQUIREMENT.exec(text)
    const read = m === null ? undefined : fields[m[1]!]
    if (m === null || read === undefined) return undefined
    const [, , op, value] = m as unknown as [string, string, string, string]
    // An absent field reads as "", as the API server indexes it.
    const is = (o: Readonly<Record<string, unknown>>) => String(read(o) ?? "") === value
    return op === "!=" ? (o) => !is(o) : is
  }

/** The field selector of a list or watch of `kind` as a predicate on objects, or the requirement it cannot read. */
export const parseFieldSelector = (
  kind: string,
  selector: string
): ((o: Readonly<Record<string, unknown>>) => boolean) | { readonly invalid: string } =>
  selector.trim() === "" ? () => true : allOf(selector.split(","), fieldRequirement(kind === "Pod" ? POD_FIELDS : FIELDS))
