/* global module, __dirname */
/**
 * The emulator's own tests. The root's jest runs them as the project "plaid-emulator" (`npm test`, or
 * `npx jest --selectProjects plaid-emulator`); this file alone runs them too:
 * `npx jest -c packages/plaid-emulator/jest.config.js`. jest, ts-jest and typescript resolve from the
 * workspace's node_modules.
 * @type {import('jest').Config}
 */
module.exports = {
  displayName: 'plaid-emulator',
  rootDir: __dirname,
  testEnvironment: 'node',
  roots: ['<rootDir>/test'],
  testMatch: ['**/*.test.ts'],
  // tsconfig.json sets isolatedModules, so ts-jest only transpiles; `npm run typecheck` checks types.
  transform: { '^.+\\.ts$': ['ts-jest', { tsconfig: '<rootDir>/tsconfig.json' }] },
  // emulator-kit from its sources, as tsconfig.json's paths read it (a built emulator loads its dist/).
  moduleNameMapper: { '^emulator-kit$': '<rootDir>/../emulator-kit/src/index.ts' },
  testTimeout: 60_000,
  maxWorkers: 2,
};
