/**
 * What a deeply nested JSON body costs before its handler runs: JSON.parse, then the route's validation
 * (`parseInput` with the exchange's schema), for bodies up to the 16 kB cap nested ever deeper. The
 * validation should stay flat with depth (the nesting limit refuses the body at its first levels), not
 * grow with its square. A measurement, not a test:
 *
 *   npm run build && npx tsc -p bench/tsconfig.json --noCheck && node dist/bench/bench/nested-body-cost.js
 */
import { performance } from 'node:perf_hooks';
import { AppError } from '../src/errors';
import { BODY_LIMITS } from '../src/http/body-limits';
import { exchangePublicTokenBody } from '../src/http/schemas/linking-schemas';
import { parseInput } from '../src/http/validate';
import { print } from './run-context';

const RUNS = 41;

/** An exchange body whose Link metadata carries `arrays` arrays nested in one another. */
const bodyNested = (arrays: number) =>
  '{"public_token":"public-sandbox-5c0d2a4e-1f3b-4b8e-a6d2-9e7f0c1b2a33","subscription_user_id":"u",' +
  '"app_name":"Budget App","metadata":{"institution":{"institution_id":"ins_109508","name":"Bank",' +
  `"extra":${'['.repeat(arrays)}${']'.repeat(arrays)}}}}`;

const median = (times: number[]) => [...times].sort((a, b) => a - b)[Math.floor(times.length / 2)]!;

/** Milliseconds (medians of RUNS) to parse `raw` and to validate it as the service does. */
function measure(raw: string): { parseMs: number; validateMs: number; outcome: string } {
  const parseTimes: number[] = [];
  const validateTimes: number[] = [];
  let outcome = '';
  for (let run = 0; run < RUNS; run += 1) {
    let started = performance.now();
    const parsed = JSON.parse(raw) as unknown;
    parseTimes.push(performance.now() - started);
    started = performance.now();
    try {
      parseInput(exchangePublicTokenBody, parsed, 'body');
      outcome = 'accepted';
    } catch (error) {
      if (!(error instanceof AppError)) throw error;
      outcome = error.code;
    }
    validateTimes.push(performance.now() - started);
  }
  return { parseMs: median(parseTimes), validateMs: median(validateTimes), outcome };
}

const deepest = Math.floor((BODY_LIMITS.json - bodyNested(0).length) / 2);
print(`medians of ${RUNS} runs`);
for (const arrays of [10, 1_000, 2_000, 4_000, deepest]) {
  const raw = bodyNested(arrays);
  const { parseMs, validateMs, outcome } = measure(raw);
  print(
    `${String(arrays).padStart(5)} nested arrays, ${String(raw.length).padStart(5)} bytes: ` +
      `JSON.parse ${parseMs.toFixed(2).padStart(6)} ms, validation ${validateMs.toFixed(3).padStart(8)} ms, ${outcome}`,
  );
}
