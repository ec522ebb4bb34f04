import { ForbiddenError, NotFoundError } from '@switchyard/common';
import type { EngineConfig } from '../../platform/config/engine-config';
import { ApiKeys, UnauthenticatedException } from '../http/api-keys';
import { channelsTarget, channelsTenant, refuseCrossOrigin } from './jupyter-upgrade';

const KEY = 'key-0123456789abcdef';
const keys = (apiKeys: string[]): ApiKeys =>
  new ApiKeys({ apiKeys, policy: { adminKeys: [] } } as unknown as EngineConfig);

describe('the channels WebSocket upgrade', () => {
  it('finds the session and kernel in the URL, its query aside, and nothing elsewhere', () => {
    expect(channelsTarget('/v1/sessions/ses_1/jupyter/api/kernels/k-1/channels?session_id=abc')).toEqual({
      sessionId: 'ses_1',
      kernelId: 'k-1',
    });
    expect(channelsTarget('/v1/sessions/ses%5F1/jupyter/api/kernels/k/channels/')).toEqual({
      sessionId: 'ses_1',
      kernelId: 'k',
    });
    for (const url of [
      '/v1/sessions/s/kernels/k/channels',
      '/mcp',
      undefined,
      '/v1/sessions/s/jupyter/api/kernels/k',
    ]) {
      expect(() => channelsTarget(url)).toThrow(NotFoundError);
    }
  });

  it('refuses a page of another site (its Origin), and takes clients that send none or their target’s', () => {
    expect(() => refuseCrossOrigin({ host: '127.0.0.1:8080' })).not.toThrow();
    expect(() =>
      refuseCrossOrigin({ host: '127.0.0.1:8080', origin: 'http://127.0.0.1:8080' }),
    ).not.toThrow();
    expect(() => refuseCrossOrigin({ host: 'Engine:8080', origin: 'https://engine:8080' })).not.toThrow();
    for (const origin of ['https://evil.example', 'null', 'http://127.0.0.1:9999']) {
      expect(() => refuseCrossOrigin({ host: '127.0.0.1:8080', origin })).toThrow(ForbiddenError);
    }
  });

  it('takes the key in either scheme; without one, a live kernel’s id only when SWITCHYARD_JUPYTER_KERNEL_ID_AUTH is on', () => {
    const configured = keys([KEY]);
    const tenant = configured.principalOf(KEY).tenant;
    const owner = () => 'tenant-of-the-kernel';
    const none = () => undefined;
    expect(channelsTenant(configured, { authorization: `token ${KEY}` }, false, none)).toBe(tenant);
    expect(channelsTenant(configured, { authorization: `Bearer ${KEY}` }, true, owner)).toBe(tenant);
    expect(() =>
      channelsTenant(configured, { authorization: 'token wrong-key-0123456789' }, true, owner),
    ).toThrow(UnauthenticatedException);
    expect(() => channelsTenant(configured, {}, false, owner)).toThrow(UnauthenticatedException);
    expect(channelsTenant(configured, {}, true, owner)).toBe('tenant-of-the-kernel');
    expect(() => channelsTenant(configured, {}, true, none)).toThrow(UnauthenticatedException);
    // Without keys the API is open, the kernel id aside.
    expect(channelsTenant(keys([]), {}, true, owner)).toBe('open');
  });
});
