export {
  EgressProxy,
  type EgressAttempt,
  type EgressProxyOptions,
  type EgressRefusal,
  type LocalRoute,
} from './egress/egress-proxy';
export {
  EgressPolicy,
  parseEgressPattern,
  DEFAULT_EGRESS_PORTS,
  type EgressPattern,
} from './egress/egress-policy';
export { type EgressGate, SessionEgress, type SessionEgressOptions } from './egress/session-egress';
export {
  connectThrough,
  describeUpstream,
  parseUpstreamProxy,
  type UpstreamProxy,
} from './egress/upstream-proxy';
export * from './url-policy/authority';
export * from './url-policy/ip-address';
export { isLocalhost } from './url-policy/localhost';
export * from './url-policy/url-policy';
