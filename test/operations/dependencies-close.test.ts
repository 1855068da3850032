import { Writable } from 'node:stream';
import { closeDependencies } from '../../src/dependencies';
import { createLogger } from '../../src/observability/logger';
import { startService, type ServiceContext } from '../support/service';

/** A logger whose lines land in `lines`, parsed. */
function capturingLogger(lines: { level: string; msg: string; err?: { message?: string } }[]) {
  return createLogger({
    level: 'info',
    destination: new Writable({
      write(chunk: Buffer, _encoding, done) {
        lines.push(JSON.parse(chunk.toString('utf8')) as (typeof lines)[number]);
        done();
      },
    }),
  });
}

describe('closing the dependencies', () => {
  let service: ServiceContext;

  beforeAll(async () => {
    service = await startService({ teller: true });
  });

  afterAll(async () => {
    await service.close();
  });

  afterEach(() => {
    jest.restoreAllMocks();
  });

  it('when a step fails, then each step is named as it begins, the failure is logged and answered, and the later steps and the pools still close, in order', async () => {
    const { deps } = service;
    const happened: string[] = [];
    const stuck = new Error('retention is stuck');
    // Recorded instead of done: the service's own close, after the test, closes them for real.
    jest.spyOn(deps.reconciliation, 'stop').mockImplementation(async () => {
      happened.push('reconciliation stopped');
    });
    jest.spyOn(deps.tokenReencryption, 'stop').mockImplementation(async () => {
      happened.push('token re-encryption stopped');
    });
    jest.spyOn(deps.outbox, 'stop').mockImplementation(async () => {
      happened.push('outbox stopped');
    });
    jest.spyOn(deps.retention, 'stop').mockImplementation(async () => {
      happened.push('retention failed');
      throw stuck;
    });
    for (const client of deps.tellerClients) {
      jest.spyOn(client, 'close').mockImplementation(async () => {
        happened.push('a Teller client closed');
      });
    }
    for (const [name, pool] of Object.entries({
      request: deps.pool,
      admin: deps.adminPool,
      counters: deps.asyncCommitPool,
    })) {
      jest.spyOn(pool, 'end').mockImplementation((async () => {
        happened.push(`${name} pool closed`);
      }) as never);
    }
    const lines: { level: string; msg: string; err?: { message?: string } }[] = [];

    const failures = await closeDependencies(deps, capturingLogger(lines), (step) =>
      happened.push(`step: ${step}`),
    );

    expect(happened).toEqual([
      'step: the reconciliation',
      'reconciliation stopped',
      'step: the token re-encryption',
      'token re-encryption stopped',
      'step: the outbox worker',
      'outbox stopped',
      'step: the retention',
      'retention failed',
      'step: the Teller clients',
      // One per caller: request, outbox, reconciliation.
      'a Teller client closed',
      'a Teller client closed',
      'a Teller client closed',
      'step: the database pools to close',
      'request pool closed',
      'admin pool closed',
      'counters pool closed',
    ]);
    expect(failures).toEqual([stuck]);
    expect(lines).toEqual([
      expect.objectContaining({
        level: 'error',
        msg: 'retention stop failed',
        err: expect.objectContaining({ message: 'retention is stuck' }),
      }),
    ]);
  });
});
