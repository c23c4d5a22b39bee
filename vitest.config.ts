import { defineConfig } from "vitest/config"

export default defineConfig({
  test: {
    include: ["test/**/*.test.ts"],
    // Property tests and the in-memory cluster are CPU-bound; two cores on CI.
    testTimeout: 30_000,
    hookTimeout: 120_000
  }
})
