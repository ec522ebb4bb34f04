import { Module } from '@nestjs/common';
import { SessionEgress } from '@switchyard/network';
import * as path from 'node:path';
import { ENGINE_CONFIG } from '../../platform/config/config.tokens';
import type { EngineConfig } from '../../platform/config/engine-config';
import { ApprovalsModule } from '../approvals/approvals.module';
import { PoliciesModule } from '../policies/policies.module';
import { SessionsModule } from '../../session/sessions/sessions.module';
import { EgressApprovals } from './egress-approvals';
import { SessionNetwork } from './session-network';

/**
 * Sessions' network: their egress proxies (one per session with a policy), owned and closed here, each connection
 * decided by the session's policy layers too.
 */
@Module({
  imports: [SessionsModule, PoliciesModule, ApprovalsModule],
  providers: [
    {
      provide: SessionEgress,
      useFactory: (config: EngineConfig) =>
        new SessionEgress({
          root: path.join(config.dataDir, 'egress'),
          resolve: config.network.resolve,
          trustedNets: config.network.trustedNets,
          ...(config.network.upstream && { upstream: config.network.upstream }),
          settingNames: { bound: 'SWITCHYARD_EGRESS_ALLOWED', trustedNets: 'SWITCHYARD_EGRESS_TRUSTED_NETS' },
        }),
      inject: [ENGINE_CONFIG],
    },
    EgressApprovals,
    SessionNetwork,
  ],
  exports: [SessionNetwork],
})
export class NetworkModule {}
