/** The live tier's port picker (test/live/cluster.ts): ports no outgoing connection can take first. */
import * as fs from "node:fs"
import * as net from "node:net"
import { describe, expect, it, vi } from "vitest"
import { freePort, freePortRange } from "../live/cluster.ts"

const ephemeralFloor = Number(fs.readFileSync("/proc/sys/net/ipv4/ip_local_port_range", "utf8").trim().split(/\s+/)[0])

describe("freePort", () => {
  it("picks ports below the kernel's ephemeral range that can be bound", async () => {
    const ports = await Promise.all(Array.from({ length: 20 }, () => freePort()))
    for (const port of ports) {
      expect(port).toBeGreaterThan(1_024)
      expect(port).toBeLessThan(ephemeralFloor)
    }
    // Each can be listened on right away.
    for (const port of ports.slice(0, 5)) {
      await new Promise<void>((resolve, reject) => {
        const srv = net.createServer()
        srv.once("error", reject)
        srv.listen(port, "127.0.0.1", () => srv.close(() => resolve()))
      })
    }
  })

  it("skips a port that is taken and draws again", async () => {
    const held = await freePort()
    const srv = net.createServer()
    await new Promise<void>((resolve) => srv.listen(held, "127.0.0.1", () => resolve()))
    const { low, high } = freePortRange()
    // The first draw lands on the held port; the next ones are random again.
    const random = vi.spyOn(Math, "random").mockReturnValueOnce((held - low + 0.5) / (high - low))
    try {
      const port = await freePort()
      expect(random.mock.calls.length).toBeGreaterThanOrEqual(2)
      expect(port).not.toBe(held)
      expect(port).toBeLessThan(ephemeralFloor)
    } finally {
      random.mockRestore()
      await new Promise<void>((resolve) => srv.close(() => resolve()))
    }
  })
})
