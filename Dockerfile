# syntax=docker/dockerfile:1
# whereabouts-controller image: Node 24 and one bundled ES module, non-root, no shell at run time.
#   docker build -t ghcr.io/whereabouts-controller/whereabouts-controller:0.1.0 .

# --- build: type-check and bundle to dist/main.js ---------------------------------------------
FROM node:24-bookworm-slim AS build
WORKDIR /src
COPY package.json package-lock.json ./
# Dev dependencies include the `node` package (Node 24 for npm scripts); its install script
# fetches that Node from the npm registry, so scripts stay on here.
RUN npm ci --no-audit --no-fund
COPY tsconfig.json tsconfig.build.json ./
COPY scripts/build.ts ./scripts/
COPY src ./src
# Type-checks, then bundles main.ts and the runtime dependencies into dist/main.js (scripts/build.ts).
RUN npm run build

# --- runtime ---------------------------------------------------------------------------------
# Distroless Node 24: no shell, no package manager; the :nonroot tag runs as uid/gid 65532.
FROM gcr.io/distroless/nodejs24-debian12:nonroot
WORKDIR /app
ENV NODE_ENV=production
# Owned by root and read-only to the process (which cannot write the root fs anyway).
# package.json matters at run time: "type": "module" makes dist/main.js an ES module, and --version reads it.
# The bundle holds every runtime dependency: no node_modules in the image.
COPY --from=build /src/dist ./dist
COPY package.json ./
USER 65532:65532
# The deployment's probes and Service use these (controller-runtime's ports).
EXPOSE 8080 8081
# Distroless keeps node at /nodejs/bin/node, off PATH, so the path is spelled out.
# The heap is sized from the container's memory limit: by default V8 takes about a quarter of
# it, and a large cluster's caches plus a sweep need more; at 55 % the rest of the process (code,
# new space and buffers, measured beside the largest cache) stays under the limit. V8 sizes the young generation from the machine, not
# the container; 16 MiB semi-spaces keep it small. glibc's allocator keeps an arena per thread
# and large blocks after the first is freed (its mmap threshold adapts upwards), so the buffers
# of the first full lists stay resident: two arenas and a fixed 128 KiB threshold and trim give
# them back. --expose-gc lets the controller run one compacting collection after a burst (the
# first lists, a sweep, a mass deletion), which hands the heap V8 grew for it back to the OS
# (src/programs/memory.ts). What each of these saved is in BENCHMARKS.md's Decisions table.
ENV MALLOC_ARENA_MAX=2 MALLOC_MMAP_THRESHOLD_=131072 MALLOC_TRIM_THRESHOLD_=131072
ENTRYPOINT ["/nodejs/bin/node", "--max-old-space-size-percentage=55", "--max-semi-space-size=16", "--expose-gc", "dist/main.js"]
CMD ["run"]
