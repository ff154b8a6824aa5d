// Test runner configuration. Suites spawn real processes, sockets, Redis and
// Chromium, so timeouts are generous and parallelism matches a 2-core machine.
import { defineConfig } from "vitest/config";

export default defineConfig({
  test: {
    include: ["src/**/*.test.ts", "test/**/*.test.ts"],
    pool: "forks",
    maxWorkers: 2,
    testTimeout: 60_000,
    hookTimeout: 60_000,
    reporters: ["default"],
  },
});
