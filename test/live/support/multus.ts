/**
 * What Multus reads and hands on for a pod (the node agent's, node-agent.ts), written from Multus'
 * behaviour rather than with the controller's own decoder, so a misreading there is not mirrored
 * here: the `networks` annotation's attachments, and each NAD's config as it is delegated.
 */

export interface Selected {
  readonly namespace: string
  readonly name: string
  readonly ifname: string
}

/** Multus' reading of the `networks` annotation; throws on what Multus would refuse. */
export const selectedNetworks = (text: string | undefined, podNamespace: string): ReadonlyArray<Selected> => {
  const trimmed = (text ?? "").trim()
  if (trimmed === "") return []
  const items: ReadonlyArray<{ name?: unknown; namespace?: unknown; interface?: unknown }> = trimmed.startsWith("[")
    ? (JSON.parse(trimmed) as ReadonlyArray<{ name?: unknown }>)
    : trimmed.split(",").map((item) => {
        const m = /^(?:([^/@\s]+)\/)?([^/@\s]+)(?:@([^/@\s]+))?$/.exec(item.trim())
        if (m === null) throw new Error(`network "${item}" is not [namespace/]name[@interface]`)
        return { namespace: m[1], name: m[2], interface: m[3] }
      })
  return items.map((e, i) => {
    if (typeof e.name !== "string" || e.name === "") throw new Error(`network ${JSON.stringify(e)} has no name`)
    return {
      namespace: typeof e.namespace === "string" && e.namespace !== "" ? e.namespace : podNamespace,
      name: e.name,
      ifname: typeof e.interface === "string" && e.interface !== "" ? e.interface : `net${i + 1}`
    }
  })
}

/** A NAD's config as Multus delegates it: a config without a name is named after the NAD. */
export const delegateConfig = (specConfig: string, nadName: string): string => {
  const parsed = JSON.parse(specConfig) as Record<string, unknown>
  return JSON.stringify(typeof parsed["name"] === "string" && parsed["name"] !== "" ? parsed : { ...parsed, name: nadName })
}

