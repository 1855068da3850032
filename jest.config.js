/* global require */
/**
 * A package's own config as one project of this run: the run's timeout and workers are set here.
 * @param {string} file
 */
const projectOf = (file) => {
  // eslint-disable-next-line @typescript-eslint/no-unused-vars, @typescript-eslint/no-require-imports
  const { testTimeout, maxWorkers, ...project } = require(file);
  return project;
};

/**
 * `npm test`: the service's tests, and each package's own (`npx jest --selectProjects service`, or
 * `plaid-emulator`, `teller-emulator`, runs one project). `npx jest test/foo.test.ts` still runs one file.
 * @type {import('jest').Config}
 */
module.exports = {
  projects: [
    {
      displayName: 'service',
      testEnvironment: 'node',
      roots: ['<rootDir>/test'],
      testMatch: ['**/*.test.ts'],
      // tsconfig.json sets isolatedModules, so ts-jest only transpiles; `npm run typecheck` checks types.
      transform: { '^.+\\.ts$': ['ts-jest', { tsconfig: 'tsconfig.json' }] },
      // The workspace's packages from their sources, as tsconfig.json's paths read them (the processes the
      // tests start, `node dist/main.js`, load their dist/, which `npm run build` makes).
      moduleNameMapper: {
        '^plaid-emulator$': '<rootDir>/packages/plaid-emulator/src/index.ts',
        '^emulator-kit$': '<rootDir>/packages/emulator-kit/src/index.ts',
        '^teller-emulator$': '<rootDir>/packages/teller-emulator/src/index.ts',
        '^dev-tools$': '<rootDir>/packages/dev-tools/src/index.ts',
        '^test-kit$': '<rootDir>/packages/test-kit/src/index.ts',
      },
      globalSetup: '<rootDir>/test/support/global-setup.mjs',
      globalTeardown: '<rootDir>/test/support/global-teardown.mjs',
    },
    projectOf('./packages/plaid-emulator/jest.config.js'),
    projectOf('./packages/teller-emulator/jest.config.js'),
  ],
  testTimeout: 60_000,
  maxWorkers: 2,
};
