import { FIELD_ERROR_LIMITS, MAX_DETAIL_LENGTH } from '../../src/http/schemas/common-schemas';
import { request, retryDeadRemovals } from '../support/requests';
import { asWebsite, problemShape, serviceForFile } from '../support/service';

describe('the limits a problem declares', () => {
  const service = serviceForFile();

  it('when a body has more bad fields than a problem lists, then it names the first 100', async () => {
    const unknownFields = Object.fromEntries(Array.from({ length: 150 }, (_, i) => [`field_${i}`, i]));

    const response = await retryDeadRemovals(service, unknownFields);

    expect(response.status).toBe(400);
    expect(response.body).toEqual({
      ...problemShape,
      status: 400,
      code: 'VALIDATION_FAILED',
      errors: expect.any(Array),
    });
    expect(response.body.errors).toHaveLength(FIELD_ERROR_LIMITS.count);
    expect(response.body.errors[0]).toEqual({ field: 'field_0', message: 'is not a known field' });
  });

  it('when a field name is longer than a problem carries, then it is cut, marked with an ellipsis', async () => {
    const longKey = `k${'x'.repeat(3_000)}`;

    const response = await retryDeadRemovals(service, { [longKey]: 1 });

    expect(response.status).toBe(400);
    expect(response.body.errors).toEqual([
      { field: `${longKey.slice(0, FIELD_ERROR_LIMITS.field - 1)}…`, message: 'is not a known field' },
    ]);
  });

  it('when an unknown path is very long, then the 404 detail stays within its declared length', async () => {
    const response = await request(service, 'get', `/${'a'.repeat(8_000)}`).set(asWebsite);

    expect(response.status).toBe(404);
    expect(response.body).toEqual({ ...problemShape, status: 404, code: 'NOT_FOUND' });
    expect(response.body.detail.length).toBeLessThanOrEqual(MAX_DETAIL_LENGTH);
    expect(response.body.detail).toMatch(/^There is no GET \/a+… here\.$/);
  });
});
