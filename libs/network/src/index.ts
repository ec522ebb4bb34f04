export {
  EgressProxy,
  splitHostPort,
  type EgressAttempt,
  type EgressProxyOptions,
  type EgressRefusal,
} from './egress/egress-proxy';
export {
  EgressPolicy,
  parseEgressPattern,
  DEFAULT_EGRESS_PORTS,
  type EgressPattern,
} from './egress/egress-policy';
export { SessionEgress, type SessionEgressOptions } from './egress/session-egress';
export * from './url-policy/ip-address';
export * from './url-policy/url-policy';
