/**
 * What the pod's workspace tool gets instead of `@nestjs/common` (`scripts/build-pod-tools.mjs` resolves the package
 * to this file). The workspace classes it bundles carry `@Injectable()`, `@Inject()` and `@Optional()` for the
 * engine's dependency injection; in the tool they are built by hand, so the decorators only have to exist. Without
 * this the bundle would drag in Nest (hundreds of KiB) and `reflect-metadata` for metadata nobody reads.
 *
 * Keep it to what the bundled files import: a missing name fails the build, never silently.
 */

type AnyDecorator = (...args: unknown[]) => void;

const noop: AnyDecorator = () => undefined;

export function Injectable(_options?: unknown): AnyDecorator {
  return noop;
}

export function Inject(_token?: unknown): AnyDecorator {
  return noop;
}

export function Optional(): AnyDecorator {
  return noop;
}
