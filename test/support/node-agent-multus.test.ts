/** What the live tier's node agent reads as Multus does (test/live/support/multus.ts). */
import { describe, expect, it } from "vitest"
import { delegateConfig, selectedNetworks } from "../live/support/multus.ts"

describe("selectedNetworks", () => {
  it.each([
    ["wa-nad", [{ namespace: "default", name: "wa-nad", ifname: "net1" }]],
    ["wa-nad,wa-nad,wa-nad", [1, 2, 3].map((i) => ({ namespace: "default", name: "wa-nad", ifname: `net${i}` }))],
    ["other/a@eth9, b", [{ namespace: "other", name: "a", ifname: "eth9" }, { namespace: "default", name: "b", ifname: "net2" }]],
    ['[{"name":"a","namespace":"x","interface":"if1"},{"name":"b"}]', [{ namespace: "x", name: "a", ifname: "if1" }, { namespace: "default", name: "b", ifname: "net2" }]],
    ["", []],
    [undefined, []]
  ])("%j", (text, want) => {
    expect(selectedNetworks(text, "default")).toEqual(want)
  })

  it.each(["a/b/c", "a@b@c", "[{\"namespace\":\"x\"}]", "[{not json"])("refuses %j", (text) => {
    expect(() => selectedNetworks(text, "default")).toThrow()
  })
})

describe("delegateConfig", () => {
  it("names a config that has no name after its NAD, and keeps a name it has", () => {
    expect(JSON.parse(delegateConfig('{"cniVersion":"0.3.0","plugins":[]}', "wa-nad"))).toEqual({ cniVersion: "0.3.0", plugins: [], name: "wa-nad" })
    expect(JSON.parse(delegateConfig('{"name":"own","type":"macvlan"}', "wa-nad"))).toEqual({ name: "own", type: "macvlan" })
  })
})
