import { defineConfig } from "vitest/config"

export default defineConfig({
  test: {
    // Property tests and the in-memory cluster are CPU-bound; two cores on CI.
    testTimeout: 30_000,
    // Controller logs are evidence when a test fails and noise when it passes.
    silent: "passed-only",
    hookTimeout: 120_000,
    // --expose-gc as the image's ENTRYPOINT passes it: the controller's heap reclaim (src/programs/memory.ts) runs.
    poolOptions: { forks: { execArgv: ["--expose-gc"] } },
    projects: [
      {
        extends: true,
        test: { name: "unit", include: ["test/**/*.test.ts"], exclude: ["test/live/**", "**/node_modules/**"] }
      },
      {
        // The real-API-server tier (etcd + kube-apiserver). Its globalSetup runs only when one of these
        // files is selected, and decides with WHEREABOUTS_ENVTEST (see test/live/globalSetup.ts). One file
        // at a time: they share one apiserver, and some stop and restart it.
        extends: true,
        test: {
          name: "live",
          include: ["test/live/**/*.test.ts"],
          globalSetup: ["test/live/globalSetup.ts"],
          poolOptions: { forks: { singleFork: true } }
        }
      }
    ]
  }
})
