import { InvalidInputError } from '@switchyard/common';
import { hostTarget, isPortsApi, parsePort, pathTarget, takeToken, upstreamUrl } from './port-target';

describe('pathTarget', () => {
  it('names the session, the port, and the path and query the server is sent (the preview token taken out)', () => {
    const t = pathTarget('/v1/sessions/ses_1/ports/8000/api/items%20x?a=1&switchyard_token=tok.sig&b=%26');
    expect(t).toEqual({
      via: 'path',
      sessionId: 'ses_1',
      port: '8000',
      path: '/api/items%20x',
      query: 'a=1&b=%26',
      token: 'tok.sig',
      prefix: '/v1/sessions/ses_1/ports/8000',
      bare: false,
    });
    expect(upstreamUrl(t!)).toBe('/api/items%20x?a=1&b=%26');
  });

  it('takes the port’s root with or without its slash, and leaves every other path alone', () => {
    expect(pathTarget('/v1/sessions/ses_1/ports/8000/')).toMatchObject({ path: '/', bare: false });
    expect(pathTarget('/v1/sessions/ses_1/ports/8000?x=1')).toMatchObject({
      path: '/',
      query: 'x=1',
      bare: true,
    });
    for (const url of [
      '/v1/sessions/ses_1/ports',
      '/v1/sessions/ses_1/ports/',
      '/v1/sessions/ses_1/kernels/k',
      '/',
    ]) {
      expect(pathTarget(url)).toBeUndefined();
    }
  });

  it('tells the ports API (…/preview, any method) from the proxy', () => {
    expect(isPortsApi('/v1/sessions/ses_1/ports/8000/preview')).toBe(true);
    expect(isPortsApi('/v1/sessions/ses_1/ports/8000/preview?x=1')).toBe(true);
    expect(isPortsApi('/v1/sessions/ses_1/ports/8000/preview/more')).toBe(false);
    expect(isPortsApi('/v1/sessions/ses_1/ports/8000/previews')).toBe(false);
  });
});

describe('hostTarget', () => {
  const domain = 'preview.example.com';

  it('reads <port>-<session>.<domain> (any case, with a port, a trailing dot) and sends the whole path', () => {
    expect(
      hostTarget('8000-ses_ab12.Preview.Example.com.:443', '/a/b?c=1&switchyard_token=t', domain),
    ).toEqual({
      via: 'host',
      sessionId: 'ses_ab12',
      port: '8000',
      path: '/a/b',
      query: 'c=1',
      token: 't',
      prefix: '',
      bare: false,
    });
  });

  it('is no preview host without a domain, for another domain, the domain itself or another label', () => {
    expect(hostTarget('8000-ses_1.preview.example.com', '/', undefined)).toBeUndefined();
    for (const host of [
      '8000-ses_1.example.com',
      'preview.example.com',
      'ses_1.preview.example.com',
      'x.8000-ses_1.preview.example.com',
      '8000-ses_1.evilpreview.example.com',
      undefined,
    ]) {
      expect(hostTarget(host, '/', domain)).toBeUndefined();
    }
  });
});

describe('takeToken', () => {
  it('takes the last token and keeps the other parameters as sent', () => {
    expect(takeToken('switchyard_token=a&x=1&switchyard_token=b')).toEqual({ query: 'x=1', token: 'b' });
    expect(takeToken('x=1')).toEqual({ query: 'x=1' });
    expect(takeToken('')).toEqual({ query: '' });
  });
});

describe('parsePort', () => {
  it('is a TCP port or a 400 naming `port`', () => {
    expect(parsePort('8000')).toBe(8000);
    for (const text of ['0', '65536', '80a', '-1', '', '1e3', '99999999']) {
      let err: unknown;
      try {
        parsePort(text);
      } catch (e) {
        err = e;
      }
      expect(err).toBeInstanceOf(InvalidInputError);
      expect((err as InvalidInputError).field).toBe('port');
    }
  });
});
