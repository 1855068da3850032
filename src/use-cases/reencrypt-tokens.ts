import { randomUUID } from 'node:crypto';
import { TokenDecryptionError, TokenVault } from '../crypto/token-vault';
import { AppError, notFound } from '../errors';
import type { Logger } from '../observability/logger';
import { inNewTrace } from '../observability/spans';
import {
  FIRST_ROW_KEY,
  TOKEN_TABLES,
  countTokensNotUnderKey,
  listKeyIdsOtherThan,
  listTokensUnderKey,
  replaceTokens,
  type StoredToken,
  type TokenTable,
} from '../repository/stored-tokens-repository';
import {
  beatReencryptionHeart,
  failStaleReencryptionRun,
  findReencryptionRun,
  findRunningReencryptionRunId,
  finishReencryptionRun,
  insertRunningReencryptionRun,
  saveReencryptionProgress,
  type TokenReencryptionProgress,
  type TokenReencryptionState,
} from '../repository/token-reencryption-runs-repository';
import type { UseCaseDependencies } from './use-case-dependencies';
import { describeFailure, InstanceRuns, RunInterrupted } from './exclusive-runs';

/** A running run whose holder has not said it is alive for this long is presumed dead (a crash, a kill). */
export const REENCRYPTION_STALE_AFTER_MS = 120_000;
/**
 * Passes over the tables at most: a pass after the first only re-reads what the previous one left (rows
 * changed or locked at the moment of the write, or written meanwhile under an older key by an instance
 * not yet configured with the new one).
 */
const MAX_PASSES = 5;
/** Before another pass, rows busy in a transaction get a moment to be released. */
const PAUSE_BETWEEN_PASSES_MS = 200;

export interface TokenReencryptionRun extends TokenReencryptionProgress {
  runId: string;
  state: TokenReencryptionState;
  /** The id of the key every token is re-encrypted under. */
  keyId: string;
  /** Tokens under another key when the run started. */
  total: number;
  /** Tokens still under another key when it ended; null while running. */
  remaining: number | null;
  failure: string | null;
  startedAt: Date;
  finishedAt: Date | null;
}

export interface TokenReencryptionDependencies extends Pick<
  UseCaseDependencies,
  'pool' | 'vault' | 'logger' | 'metrics' | 'hooks'
> {
  /** Tokens read and rewritten per statement. */
  batchSize: number;
}

/** A re-encryption for a script: the vault built from the configured keys, no other dependency. */
export function buildTokenReencryption(
  options: Omit<TokenReencryptionDependencies, 'vault'> & { encryptionKeys: Buffer[]; hmacKey: Buffer },
): TokenReencryption {
  const { encryptionKeys, hmacKey, ...deps } = options;
  return new TokenReencryption({ ...deps, vault: new TokenVault(encryptionKeys, hmacKey) });
}

/** The run was ended by stop(), or by another instance that found it stale: it stops where it is. */
function reencryptionRunning(runId: string | undefined): AppError {
  return new AppError('TOKEN_REENCRYPTION_RUNNING', {
    detail: runId
      ? `Token re-encryption run ${runId} is in progress; follow it with GET /admin/tokens/reencrypt/${runId}.`
      : 'A token re-encryption run is in progress; try again when it has finished.',
  });
}

const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms).unref());

/**
 * Key rotation's last step: every stored access token (connections, exchanges under way, Item removals
 * not done) sealed under an older key is sealed again under the first configured key, so that the older
 * key can be dropped. In batches, each a plain read and one statement that rewrites only rows that
 * still hold what was read and that nobody has locked: live traffic is never waited for nor overwritten,
 * and a row changed or busy is left for a later pass. Resumable by construction: a run picks only the
 * tokens not yet under the first key. One run at a time across instances (a partial unique index), as
 * reconciliation; a run whose holder stopped heart-beating is failed by the next one that looks.
 */
export class TokenReencryption {
  private readonly runs = new InstanceRuns('token re-encryption');

  constructor(private readonly deps: TokenReencryptionDependencies) {}

  /** Starts a run in the background; throws TOKEN_REENCRYPTION_RUNNING while one runs anywhere. */
  async start(): Promise<{ runId: string; keyId: string }> {
    const claimed = await this.claim();
    this.runs.track(
      this.execute(claimed).catch((error: unknown) =>
        this.deps.logger.error({ err: error, run_id: claimed.runId }, 'token re-encryption run failed'),
      ),
    );
    return claimed;
  }

  /** Runs to the end in the caller's time (the CLI), reporting progress after each batch. */
  async runToEnd(onProgress: (run: TokenReencryptionRun) => void): Promise<TokenReencryptionRun> {
    const claimed = await this.claim();
    await this.runs.track(this.execute(claimed, () => this.getRun(claimed.runId).then(onProgress)));
    return this.getRun(claimed.runId);
  }

  async getRun(runId: string): Promise<TokenReencryptionRun> {
    // A run whose instance died would otherwise read "running" forever.
    await this.failStaleRun();
    const row = await findReencryptionRun(this.deps.pool, runId);
    if (!row) throw notFound('No token re-encryption run has this id.');
    return {
      runId: row.id,
      state: row.state,
      keyId: row.key_id,
      total: row.total,
      reencrypted: row.reencrypted,
      deferred: row.deferred,
      unreadable: row.unreadable,
      remaining: row.remaining,
      failure: row.failure,
      startedAt: row.started_at,
      finishedAt: row.finished_at,
    };
  }

  /**
   * Ends this instance's runs (failed with `reason`, their progress kept: a new run resumes where they
   * stopped) and waits for them; no run starts afterwards. Call it before the pools close.
   */
  async stop(reason = 'stopped at shutdown'): Promise<void> {
    await this.runs.stop(reason);
  }

  private async failStaleRun(): Promise<void> {
    const failed = await failStaleReencryptionRun(this.deps.pool, REENCRYPTION_STALE_AFTER_MS);
    if (failed)
      this.deps.logger.warn({ run_id: failed }, 'token re-encryption run failed: its instance stopped');
  }

  private async claim(): Promise<{ runId: string; keyId: string }> {
    this.runs.refuseIfStopped();
    const keyId = this.deps.vault.encryptingKeyId;
    // A run may end between the refused insert and the look-up: then the insert is tried again.
    for (let attempt = 0; attempt < 3; attempt += 1) {
      await this.failStaleRun();
      const total = await countTokensNotUnderKey(this.deps.pool, keyId);
      const runId = randomUUID();
      if (await insertRunningReencryptionRun(this.deps.pool, { id: runId, keyId, total })) {
        this.deps.logger.info({ run_id: runId, key_id: keyId, total }, 'token re-encryption run started');
        return { runId, keyId };
      }
      const running = await findRunningReencryptionRunId(this.deps.pool);
      if (running) throw reencryptionRunning(running);
    }
    throw reencryptionRunning(undefined);
  }

  private async execute(
    run: { runId: string; keyId: string },
    onProgress: () => Promise<void> = () => Promise.resolve(),
  ): Promise<void> {
    const { pool, logger } = this.deps;
    const log = logger.child({ run_id: run.runId, key_id: run.keyId });
    const heartbeat = this.runs.heartbeat(() => beatReencryptionHeart(pool, run.runId), log);
    const progress: TokenReencryptionProgress = { reencrypted: 0, deferred: 0, unreadable: 0 };
    /** Rows no configured key opens: counted and logged once, skipped by later passes. */
    const unreadable = new Set<string>();
    try {
      for (let pass = 1; pass <= MAX_PASSES; pass += 1) {
        if (pass > 1) await sleep(PAUSE_BETWEEN_PASSES_MS);
        let found = 0;
        // Table by table, older key by older key: each batch a range of the key-id index. A table's keys
        // are read when its turn comes, so a token copied into a later table meanwhile is in this pass.
        for (const table of TOKEN_TABLES) {
          for (const oldKeyId of await listKeyIdsOtherThan(pool, table, run.keyId)) {
            let after = FIRST_ROW_KEY[table];
            for (;;) {
              const interruption = heartbeat.interruption();
              if (interruption) throw interruption;
              const batch = await listTokensUnderKey(pool, table, oldKeyId, after, this.deps.batchSize);
              if (batch.length === 0) break;
              after = (batch[batch.length - 1] as StoredToken).rowKey;
              const outcome = await this.reencryptBatch(table, batch, unreadable, log);
              found += outcome.reencrypted + outcome.deferred;
              progress.reencrypted += outcome.reencrypted;
              progress.deferred += outcome.deferred;
              progress.unreadable = unreadable.size;
              if (!(await saveReencryptionProgress(pool, run.runId, progress)))
                throw new RunInterrupted(undefined);
              await onProgress();
              await this.deps.hooks?.afterReencryptionBatch?.();
            }
          }
        }
        if (found === 0) break;
      }
      const remaining = await countTokensNotUnderKey(pool, run.keyId);
      if (!(await finishReencryptionRun(pool, run.runId, { state: 'done', failure: null, remaining }))) {
        throw new RunInterrupted(undefined);
      }
      log[remaining > 0 ? 'warn' : 'info'](
        { ...progress, remaining },
        remaining > 0
          ? 'token re-encryption run done; some tokens are still under another key'
          : 'token re-encryption run done',
      );
    } catch (error) {
      if (error instanceof RunInterrupted && error.failure === undefined) {
        log.warn(progress, 'token re-encryption run was failed by another instance; stopping it here');
        return;
      }
      const failure = error instanceof RunInterrupted ? (error.failure as string) : describeFailure(error);
      const ended = await finishReencryptionRun(pool, run.runId, {
        state: 'failed',
        failure,
        remaining: null,
      }).catch((finishError: unknown) => {
        // It stops heart-beating, so the next run that looks fails it as stale.
        log.error({ err: finishError }, 'could not record the token re-encryption run as failed');
        return false;
      });
      if (ended) log.warn({ ...progress, failure }, 'token re-encryption run failed');
    } finally {
      heartbeat.end();
    }
  }

  /**
   * One batch of one table: each token sealed again in memory, then one statement writes those whose
   * row still holds what was read. A failed write is counted and logged here, then fails the run: what
   * was written stays written, and a new run resumes from what is left.
   */
  private async reencryptBatch(
    table: TokenTable,
    batch: StoredToken[],
    unreadable: Set<string>,
    log: Logger,
  ): Promise<{ reencrypted: number; deferred: number }> {
    const { vault, metrics } = this.deps;
    const replacements: { rowKey: string; oldCiphertext: string; newCiphertext: string }[] = [];
    for (const token of batch) {
      const id = `${table}:${token.rowKey}`;
      if (unreadable.has(id)) continue;
      try {
        replacements.push({
          rowKey: token.rowKey,
          oldCiphertext: token.ciphertext,
          newCiphertext: vault.reseal(token.ciphertext, token.itemId),
        });
      } catch (error) {
        if (!(error instanceof TokenDecryptionError)) throw error;
        unreadable.add(id);
        metrics?.countTokenReencryptions('unreadable', 1);
        // The key id is the ciphertext's second field: which key is missing, never the token.
        log.warn(
          {
            table,
            item_id: token.itemId,
            token_key_id: token.ciphertext.split('.')[1],
            reason: error.message,
          },
          'a stored token cannot be decrypted with any configured key; it is left as it is',
        );
      }
    }
    if (replacements.length === 0) return { reencrypted: 0, deferred: 0 };
    let written: Set<string>;
    try {
      await this.deps.hooks?.beforeReencryptionWrite?.(
        table,
        replacements.map((replacement) => replacement.rowKey),
      );
      written = await inNewTrace(
        'token re-encryption batch',
        { 'reencryption.table': table, 'reencryption.tokens': replacements.length },
        () => replaceTokens(this.deps.pool, table, replacements),
      );
    } catch (error) {
      metrics?.countTokenReencryptionBatchFailure();
      log.error(
        { err: error, table, tokens: replacements.length },
        'a token re-encryption batch failed; run again to resume',
      );
      throw error;
    }
    const deferred = replacements.length - written.size;
    metrics?.countTokenReencryptions('reencrypted', written.size);
    if (deferred > 0) metrics?.countTokenReencryptions('deferred', deferred);
    return { reencrypted: written.size, deferred };
  }
}
