#!/usr/bin/env node
// The bin, a file that exists when npm links it at install (before dist/ is built): it runs the built
// CLI, which `npm run build -w plaid-emulator` (or the root's `npm run build`) makes.
import '../dist/run-emulator.js';
