import { SessionPorts } from '@switchyard/sandbox';
import { sessionPortDialer } from './browser-session-ports';

/** The engine's sessions' ports as the browser tier sees them: the same rules as the ports API. */
describe('sessionPortDialer', () => {
  const ports = (enabled: boolean) =>
    new SessionPorts([], () => [], {
      enabled,
      allowed: [
        [3000, 3999],
        [8080, 8080],
      ],
      settingNames: { enabled: 'SWITCHYARD_PORTS_ENABLED', allowed: 'SWITCHYARD_PORTS_ALLOWED' },
    });
  const dialer = (enabled = true) => sessionPortDialer(ports(enabled));

  it('allows the ports SWITCHYARD_PORTS_ALLOWED allows, and names the setting for the others', () => {
    expect(dialer().refusal(3000)).toBeUndefined();
    expect(dialer().refusal(8080)).toBeUndefined();
    expect(dialer().refusal(22)).toBe(
      'port 22 may not be opened: the allowed ports are 3000-3999,8080 (SWITCHYARD_PORTS_ALLOWED)',
    );
    expect(dialer(false).refusal(3000)).toBe(
      "sessions' ports are not opened by this engine (SWITCHYARD_PORTS_ENABLED=false)",
    );
  });

  it('refuses a session without a sandbox with PORT_CLOSED, saying to start the server', async () => {
    await expect(dialer().connect('ses_none', 3000)).rejects.toMatchObject({
      code: 'PORT_CLOSED',
      message: expect.stringContaining(
        'nothing listens on port 3000: session ses_none has no sandbox running',
      ),
    });
  });
});
