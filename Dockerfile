# syntax=docker/dockerfile:1

# The build: the whole npm workspace (packages/ holds the emulators and the dev tools, which the type-check
# reads), then the production build (tsconfig.build.json), which compiles src/ without src/dev/ and reaches
# the packages only by name, in lazy imports taken outside production: dist/ holds no development code.
FROM node:20.20-bookworm-slim AS build
WORKDIR /app
COPY package.json package-lock.json ./
COPY packages ./packages
RUN npm ci --no-audit --no-fund
COPY tsconfig.json tsconfig.build.json ./
COPY src ./src
RUN npm run typecheck && npm run build:production

# The production install: package.json and the lockfile without packages/, so the workspace's packages,
# devDependencies of the service, are not installed, nor what only they depend on (the embedded
# PostgreSQL's binaries, the Teller emulator's X.509 library).
FROM node:20.20-bookworm-slim AS dependencies
WORKDIR /app
COPY package.json package-lock.json ./
RUN npm ci --omit=dev --no-audit --no-fund

FROM node:20.20-bookworm-slim
ENV NODE_ENV=production \
    PORT=3000
WORKDIR /app
COPY package.json ./
COPY migrations ./migrations
COPY --from=dependencies /app/node_modules ./node_modules
COPY --from=build /app/dist ./dist
USER node
# The API (PORT) and Prometheus' metrics (METRICS_PORT), each at its default: the metrics listener is a
# second one, on the same interface (HOST: every interface in production). In production it needs
# METRICS_BEARER_TOKEN, or METRICS_ALLOW_UNAUTHENTICATED=true, or METRICS_PORT=0 (then nothing listens on
# 9464). test/operations/production-build.test.ts compares these with the settings' defaults.
EXPOSE 3000 9464
HEALTHCHECK --interval=15s --timeout=3s --start-period=20s --retries=3 \
  CMD ["node", "-e", "fetch('http://127.0.0.1:' + (process.env.PORT || 3000) + '/healthz').then((r) => process.exit(r.ok ? 0 : 1), () => process.exit(1))"]
CMD ["node", "dist/main.js"]
