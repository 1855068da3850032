/* global module, __dirname */
/**
 * Run from the repository's root: `npx jest -c packages/teller-emulator/jest.config.js`. jest, ts-jest,
 * typescript and ajv resolve from the root's node_modules; the package's own runtime dependencies from
 * its node_modules (`npm ci` in this folder).
 * @type {import('jest').Config}
 */
module.exports = {
  rootDir: __dirname,
  testEnvironment: 'node',
  roots: ['<rootDir>/test'],
  testMatch: ['**/*.test.ts'],
  // tsconfig.json sets isolatedModules, so ts-jest only transpiles; `tsc -p tsconfig.json` checks types.
  transform: { '^.+\\.ts$': ['ts-jest', { tsconfig: '<rootDir>/tsconfig.json' }] },
  testTimeout: 30_000,
  maxWorkers: 2,
};
