/* global module, __dirname */
/**
 * The root's jest runs these tests as the project "teller-emulator" (`npm test`, or
 * `npx jest --selectProjects teller-emulator`); this file alone runs them too:
 * `npx jest -c packages/teller-emulator/jest.config.js`. Everything resolves from the workspace's
 * node_modules (one `npm ci` at the root installs this package's dependencies with the service's).
 * @type {import('jest').Config}
 */
module.exports = {
  displayName: 'teller-emulator',
  rootDir: __dirname,
  // The shared emulator-kit read from its sources, like tsconfig.json's paths; dist/cli.js loads its dist/.
  moduleNameMapper: { '^emulator-kit$': '<rootDir>/../emulator-kit/src/index.ts' },
  testEnvironment: 'node',
  roots: ['<rootDir>/test'],
  testMatch: ['**/*.test.ts'],
  // tsconfig.json sets isolatedModules, so ts-jest only transpiles; `tsc -p tsconfig.json` checks types.
  transform: { '^.+\\.ts$': ['ts-jest', { tsconfig: '<rootDir>/tsconfig.json' }] },
  testTimeout: 30_000,
  maxWorkers: 2,
};
