# syntax=docker/dockerfile:1

FROM node:20.20-bookworm-slim AS build
WORKDIR /app
COPY package.json package-lock.json ./
RUN npm ci --no-audit --no-fund
COPY tsconfig.json tsconfig.build.json ./
COPY src ./src
# dist/dev (embedded database, generated local secrets, the built-in emulator's start, seed, benchmarks) and
# dist/emulator (Plaid's API emulated) are development-only; production never loads them
# (test/operations/production-build.test.ts starts the build without both).
RUN npm run typecheck && npm run build && npm prune --omit=dev && rm -rf dist/dev dist/emulator

FROM node:20.20-bookworm-slim
ENV NODE_ENV=production \
    PORT=3000
WORKDIR /app
COPY package.json ./
COPY migrations ./migrations
COPY --from=build /app/node_modules ./node_modules
COPY --from=build /app/dist ./dist
USER node
EXPOSE 3000
HEALTHCHECK --interval=15s --timeout=3s --start-period=20s --retries=3 \
  CMD ["node", "-e", "fetch('http://127.0.0.1:' + (process.env.PORT || 3000) + '/healthz').then((r) => process.exit(r.ok ? 0 : 1), () => process.exit(1))"]
CMD ["node", "dist/main.js"]
