/** One check's outcome, as the report shows it. */
export interface CheckResult {
  name: string;
  outcome: 'passed' | 'failed' | 'skipped';
  summary: string;
  /** Each violation, for the report (and the first few in the table). */
  problems: string[];
}

/** Passed when there is no problem, failed otherwise. */
export const result = (name: string, problems: string[], summary: string): CheckResult => ({
  name,
  outcome: problems.length === 0 ? 'passed' : 'failed',
  summary,
  problems,
});
