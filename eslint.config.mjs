import js from '@eslint/js';
import tseslint from 'typescript-eslint';
import prettier from 'eslint-config-prettier';

export default tseslint.config(
  { ignores: ['dist/', 'node_modules/', 'data/', 'coverage/', 'packages/*/dist/'] },
  js.configs.recommended,
  ...tseslint.configs.recommended,
  prettier,
  {
    rules: {
      '@typescript-eslint/no-unused-vars': ['error', { argsIgnorePattern: '^_', varsIgnorePattern: '^_' }],
      'no-console': 'error',
    },
  },
  {
    files: ['src/**/*.ts'],
    ignores: ['src/provider/**'],
    rules: {
      'no-restricted-imports': [
        'error',
        { paths: [{ name: 'plaid', message: 'Only src/provider/ talks to the Plaid SDK.' }] },
      ],
    },
  },
  {
    files: ['**/*.mjs', '**/*.cjs', 'jest.config.js'],
    languageOptions: {
      globals: {
        process: 'readonly',
        console: 'readonly',
        module: 'writable',
        URL: 'readonly',
        globalThis: 'readonly',
      },
    },
    rules: { 'no-console': 'off' },
  },
);
